"""Verified heals against the project's server: the normal path, each fallback when
the proxy was tampered with behind the verifier's back, and HealError when nothing
brings traffic back."""

from __future__ import annotations

import pytest

from faults.client import (
    HealError,
    HealVerifier,
    ProxySpec,
    ReplyProbe,
    ToxiproxyClient,
    UpstreamDown,
)
from faults.ports import free_port
from tests.faults.toxiproxy_support import ServerThread

PING = ReplyProbe(b"ping", expect=b"ping")  # the upstream is an echo server


@pytest.fixture
def toxi(threaded: ServerThread) -> ToxiproxyClient:
    return ToxiproxyClient(threaded.server.url)


def proxied(client: ToxiproxyClient, name: str, upstream: str) -> ProxySpec:
    proxy = client.create_proxy(name, upstream)
    return ProxySpec(name, proxy.listen, proxy.upstream, proxy.listen, PING)


def black_hole(client: ToxiproxyClient, proxy: str, name: str = "cut") -> None:
    client.add_toxic(proxy, name, "timeout", stream="upstream", attributes={"timeout": 0})


def dead_address() -> str:
    return f"127.0.0.1:{free_port()}"


def test_removing_a_black_hole_is_verified_by_traffic(
    toxi: ToxiproxyClient, threaded: ServerThread
) -> None:
    spec = proxied(toxi, "p", threaded.echo.address)
    black_hole(toxi, "p")
    assert not PING(spec.address, 0.3)
    outcome = HealVerifier(toxi, timeout=2).heal(spec, toxics=["cut"])
    assert (outcome.method, outcome.failures) == ("direct", ())
    assert toxi.proxy("p").toxics == () and PING(spec.address, 1)


def test_re_enabling_a_disabled_proxy_is_verified(
    toxi: ToxiproxyClient, threaded: ServerThread
) -> None:
    spec = proxied(toxi, "p", threaded.echo.address)
    toxi.disable("p")
    assert not PING(spec.address, 0.3)
    assert HealVerifier(toxi, timeout=2).heal(spec, enable=True).method == "direct"
    assert PING(spec.address, 1)


def test_a_tampered_upstream_is_fixed_by_recreating_the_proxy_keeping_other_toxics(
    toxi: ToxiproxyClient, threaded: ServerThread
) -> None:
    spec = proxied(toxi, "p", threaded.echo.address)
    toxi.add_toxic("p", "someone-elses-latency", "latency", attributes={"latency": 10})
    black_hole(toxi, "p")
    toxi.update_proxy("p", upstream=dead_address())  # behind the verifier's back
    outcome = HealVerifier(toxi, timeout=1).heal(spec, toxics=["cut"])
    assert outcome.method == "recreate"
    assert "its upstream is" in outcome.failures[0]
    after = toxi.proxy("p")
    assert (after.listen, after.upstream) == (spec.listen, spec.upstream)
    assert after.toxic_names() == {"someone-elses-latency"}
    assert PING(spec.address, 1)


def test_a_deleted_proxy_is_recreated_at_its_address(
    toxi: ToxiproxyClient, threaded: ServerThread
) -> None:
    spec = proxied(toxi, "p", threaded.echo.address)
    black_hole(toxi, "p")
    toxi.delete_proxy("p")
    outcome = HealVerifier(toxi, timeout=1).heal(spec, toxics=["cut"])
    assert outcome.method == "recreate" and outcome.failures == ("direct: the proxy is gone",)
    assert PING(spec.address, 1)


def test_a_foreign_black_hole_survives_recreation_and_is_cleared_by_reset(
    toxi: ToxiproxyClient, threaded: ServerThread
) -> None:
    spec = proxied(toxi, "p", threaded.echo.address)
    black_hole(toxi, "p")
    black_hole(toxi, "p", "tampered")  # not ours, so recreation keeps it
    outcome = HealVerifier(toxi, timeout=0.5).heal(spec, toxics=["cut"])
    assert outcome.method == "reset"
    assert [f.split(":")[0] for f in outcome.failures] == ["direct", "recreate"]
    assert toxi.proxy("p").toxics == () and PING(spec.address, 1)


def test_a_stolen_listen_port_cannot_be_healed(
    toxi: ToxiproxyClient, threaded: ServerThread
) -> None:
    spec = proxied(toxi, "p", threaded.echo.address)
    toxi.disable("p")
    toxi.create_proxy("thief", dead_address(), listen=spec.listen)
    with pytest.raises(HealError) as caught:
        HealVerifier(toxi, timeout=0.5).heal(spec, enable=True)
    assert caught.value.proxy == "p"
    assert "address already in use" in caught.value.reason
    assert not PING(spec.address, 0.3)


def test_an_upstream_that_does_not_answer_fails_at_once_without_a_reset(
    toxi: ToxiproxyClient, threaded: ServerThread
) -> None:
    spec = proxied(toxi, "p", dead_address())
    other = proxied(toxi, "other", threaded.echo.address)
    black_hole(toxi, "p")
    black_hole(toxi, other.name, "another-fault")
    with pytest.raises(UpstreamDown, match="does not answer when dialled directly"):
        HealVerifier(toxi, timeout=0.5).heal(spec, toxics=["cut"])
    # No fallback ran: a reset would have wiped the other proxy's fault too.
    assert toxi.proxy("other").toxic_names() == {"another-fault"}


def test_a_server_that_went_away_fails_the_heal(
    toxi: ToxiproxyClient, threaded: ServerThread
) -> None:
    spec = proxied(toxi, "p", threaded.echo.address)
    black_hole(toxi, "p")
    threaded.stop_server()
    with pytest.raises(HealError, match="DELETE /proxies/p/toxics/cut"):
        HealVerifier(ToxiproxyClient(toxi.url, timeout=1), timeout=0.5).heal(
            spec, toxics=["cut"])
