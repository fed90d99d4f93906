"""The unmodified toxiproxy-python client against our server, for every call it has."""

from __future__ import annotations

import json
import socket

import pytest
import toxiproxy
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from faults.ports import free_port
from faults.toxiproxy import VERSION
from tests.faults.toxiproxy_support import ServerThread, split_listen


def echo_once(listen: str, payload: bytes = b"ping") -> bytes:
    with socket.create_connection(split_listen(listen), timeout=5) as sock:
        sock.sendall(payload)
        return sock.recv(len(payload))


def test_version_and_running(client: toxiproxy.Toxiproxy, threaded: ServerThread) -> None:
    assert client.running() is True
    assert json.loads(client.version()) == {"version": VERSION}
    threaded.stop_server()
    assert client.running() is False
    assert client.version() is None


def test_create_get_list_destroy(client: toxiproxy.Toxiproxy, threaded: ServerThread) -> None:
    proxy = client.create(upstream=threaded.echo.address, name="redis")
    assert proxy.name == "redis" and proxy.enabled is True
    assert proxy.upstream == threaded.echo.address
    host, port = split_listen(proxy.listen)
    assert host == "127.0.0.1" and port != 0  # "127.0.0.1:0" came back as the real port
    assert echo_once(proxy.listen) == b"ping"

    fetched = client.get_proxy("redis")
    assert fetched is not None and fetched.listen == proxy.listen
    assert set(client.proxies()) == {"redis"}
    with pytest.raises(ProxyExists):
        client.create(upstream=threaded.echo.address, name="redis")

    assert client.destroy(proxy) is True
    assert client.get_proxy("redis") is None
    assert client.proxies() == {}
    with pytest.raises(NotFound):
        proxy.destroy()


def test_create_disabled_then_enable(client: toxiproxy.Toxiproxy, threaded: ServerThread) -> None:
    listen = f"127.0.0.1:{free_port()}"
    proxy = client.create(upstream=threaded.echo.address, name="off", listen=listen, enabled=False)
    assert proxy.enabled is False and proxy.listen == listen
    with pytest.raises(ConnectionRefusedError):
        echo_once(listen)
    proxy.enable()
    assert client.get_proxy("off").enabled is True
    assert echo_once(listen) == b"ping"


def test_toxics_add_list_get_remove(client: toxiproxy.Toxiproxy, threaded: ServerThread) -> None:
    proxy = client.create(upstream=threaded.echo.address, name="db")
    proxy.add_toxic(type="latency", attributes={"latency": 100, "jitter": 10})
    proxy.add_toxic(
        type="bandwidth", name="slow_up", stream="upstream", toxicity=0.5, attributes={"rate": 9}
    )
    toxics = proxy.toxics()
    assert set(toxics) == {"latency_downstream", "slow_up"}
    latency = toxics["latency_downstream"]
    assert (latency.type, latency.stream, latency.toxicity) == ("latency", "downstream", 1.0)
    assert latency.attributes == {"latency": 100, "jitter": 10}
    slow = proxy.get_toxic("slow_up")
    assert slow is not None
    assert (slow.stream, slow.toxicity, slow.attributes) == ("upstream", 0.5, {"rate": 9})
    assert proxy.get_toxic("nope") is None

    with pytest.raises(ProxyExists):  # the client maps every 409 to ProxyExists
        proxy.add_toxic(type="latency")
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="no_such_toxic")
    with pytest.raises(InvalidToxic):
        proxy.add_toxic(type="latency", name="x", stream="sideways")

    assert proxy.destroy_toxic("latency_downstream") is True
    assert set(proxy.toxics()) == {"slow_up"}
    with pytest.raises(NotFound):
        proxy.destroy_toxic("latency_downstream")


def test_disable_enable_and_down(client: toxiproxy.Toxiproxy, threaded: ServerThread) -> None:
    proxy = client.create(upstream=threaded.echo.address, name="svc")
    proxy.disable()
    assert client.get_proxy("svc").enabled is False
    with pytest.raises(ConnectionRefusedError):
        echo_once(proxy.listen)
    proxy.enable()
    assert echo_once(proxy.listen) == b"ping"
    with proxy.down():
        assert client.get_proxy("svc").enabled is False
        with pytest.raises(ConnectionRefusedError):
            echo_once(proxy.listen)
    assert client.get_proxy("svc").enabled is True
    assert echo_once(proxy.listen) == b"ping"


def test_populate(client: toxiproxy.Toxiproxy, threaded: ServerThread) -> None:
    wanted = [
        {"name": "one", "upstream": threaded.echo.address, "listen": f"127.0.0.1:{free_port()}"},
        {"name": "two", "upstream": threaded.echo.address, "listen": f"127.0.0.1:{free_port()}"},
    ]
    created = client.populate(wanted)
    assert sorted(p.name for p in created) == ["one", "two"]
    client.get_proxy("one").add_toxic(type="latency", attributes={"latency": 1})
    # Unchanged proxies are left alone (their toxics too); a changed one is replaced.
    assert client.populate(wanted) == []
    assert set(client.get_proxy("one").toxics()) == {"latency_downstream"}
    moved = [dict(wanted[0], listen=f"127.0.0.1:{free_port()}"), wanted[1]]
    assert [p.name for p in client.populate(moved)] == ["one"]
    assert client.get_proxy("one").toxics() == {}
    assert echo_once(moved[0]["listen"]) == b"ping"


def test_reset(client: toxiproxy.Toxiproxy, threaded: ServerThread) -> None:
    first = client.create(upstream=threaded.echo.address, name="a")
    second = client.create(upstream=threaded.echo.address, name="b")
    first.add_toxic(type="timeout", attributes={"timeout": 0})
    second.add_toxic(type="latency", stream="upstream")
    second.disable()
    assert client.reset() is True
    proxies = client.proxies()
    assert all(p.enabled for p in proxies.values())
    assert first.toxics() == {} and second.toxics() == {}
    assert echo_once(first.listen) == b"ping" and echo_once(second.listen) == b"ping"


def test_destroy_all(client: toxiproxy.Toxiproxy, threaded: ServerThread) -> None:
    for name in ("x", "y", "z"):
        client.create(upstream=threaded.echo.address, name=name)
    client.destroy_all()
    assert client.proxies() == {}
