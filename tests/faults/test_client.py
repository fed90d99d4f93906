"""The client layer over toxiproxy-python against the project's server: one client
per server, timeouts, toxic update, and every error answer typed and named."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from toxiproxy.api import APIConsumer

from faults.client import (
    AlreadyExists,
    InvalidRequest,
    NotFound,
    ToxiproxyClient,
    ToxiproxyServerError,
    ToxiproxyUnavailable,
    split_address,
)
from faults.ports import free_port
from tests.faults.toxiproxy_support import ServerThread


@pytest.fixture
def second() -> Iterator[ServerThread]:
    with ServerThread(seed=2) as running:
        yield running


def round_trip(sock: socket.socket, payload: bytes = b"ping") -> float:
    started = time.monotonic()
    sock.sendall(payload)
    received = b""
    while len(received) < len(payload):
        received += sock.recv(len(payload) - len(received))
    return time.monotonic() - started


def test_two_clients_talk_to_two_servers_in_one_process(
    threaded: ServerThread, second: ServerThread
) -> None:
    one = ToxiproxyClient(threaded.server.url)
    two = ToxiproxyClient(second.server.url)
    one.create_proxy("p", threaded.echo.address)
    two.create_proxy("p", second.echo.address)
    two.create_proxy("only-on-two", second.echo.address)
    assert one.proxy("p").upstream == threaded.echo.address
    assert two.proxy("p").upstream == second.echo.address
    assert set(one.proxies()) == {"p"}
    assert set(two.proxies()) == {"p", "only-on-two"}
    # The package's global address is left as it was.
    assert (APIConsumer.host, APIConsumer.port) == ("127.0.0.1", 8474)


def test_a_silent_server_times_out_with_the_call_named() -> None:
    with socket.socket() as silent:  # accepts connections (backlog) but never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        client = ToxiproxyClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5)
        with pytest.raises(ToxiproxyUnavailable) as caught:
            client.proxies()
    assert caught.value.call == "GET /proxies"
    assert "within 0.5s" in str(caught.value)


def test_a_closed_port_is_unavailable() -> None:
    port = free_port()
    with pytest.raises(ToxiproxyUnavailable) as caught:
        ToxiproxyClient(f"http://127.0.0.1:{port}").version()
    assert caught.value.call == "GET /version"


def test_updating_a_toxic_changes_a_live_connection(threaded: ServerThread) -> None:
    client = ToxiproxyClient(threaded.server.url)
    proxy = client.create_proxy("link:a->b", threaded.echo.address)
    client.add_toxic("link:a->b", "slow", "latency", attributes={"latency": 0})
    with socket.create_connection(split_address(proxy.listen), timeout=5) as sock:
        assert round_trip(sock) < 0.2
        updated = client.update_toxic("link:a->b", "slow", attributes={"latency": 300})
        assert updated.attributes["latency"] == 300
        assert client.toxic("link:a->b", "slow").attributes["latency"] == 300
        assert round_trip(sock) >= 0.29
        client.update_toxic("link:a->b", "slow", toxicity=0.0)
        assert client.toxic("link:a->b", "slow").toxicity == 0.0


def test_a_5xx_answer_is_raised_naming_the_call(threaded: ServerThread) -> None:
    client = ToxiproxyClient(threaded.server.url)
    taken = client.create_proxy("first", threaded.echo.address)
    with pytest.raises(ToxiproxyServerError) as caught:
        client.create_proxy("second", threaded.echo.address, listen=taken.listen)
    assert caught.value.status == 500
    assert caught.value.call == "POST /proxies"
    assert "address already in use" in caught.value.message
    # The same through enable: the port was taken while the proxy was disabled.
    client.disable("first")
    client.create_proxy("thief", threaded.echo.address, listen=taken.listen)
    with pytest.raises(ToxiproxyServerError) as caught:
        client.enable("first")
    assert caught.value.call == "POST /proxies/first"


def test_4xx_answers_are_typed_with_the_server_message(threaded: ServerThread) -> None:
    client = ToxiproxyClient(threaded.server.url)
    with pytest.raises(NotFound) as missing:
        client.proxy("link:n1->n9")
    assert missing.value.call == "GET /proxies/link:n1->n9"
    assert missing.value.message == "404 proxy not found"
    client.create_proxy("p", threaded.echo.address)
    with pytest.raises(AlreadyExists):
        client.create_proxy("p", threaded.echo.address)
    with pytest.raises(InvalidRequest) as invalid:
        client.add_toxic("p", "t", "no-such-toxic")
    assert "invalid toxic type" in str(invalid.value)
    with pytest.raises(NotFound):
        client.update_toxic("p", "absent", attributes={"latency": 1})
