"""The HTTP API over raw HTTP: what the python client cannot reach, and every error
with toxiproxy's status code and body."""

from __future__ import annotations

import socket

import aiohttp
import pytest

from faults.toxiproxy import VERSION, ToxiproxyServer
from tests.faults.toxiproxy_support import Api, EchoServer, connect, read_exactly, split_listen


def err(message: str, status: int) -> dict[str, object]:
    return {"error": message, "status": status}


async def test_create_shape_and_listing(api: Api, echo: EchoServer) -> None:
    status, body = await api.call(
        "POST", "/proxies", {"name": "p", "listen": "localhost:0", "upstream": echo.address}
    )
    assert status == 201
    assert list(body) == ["name", "listen", "upstream", "enabled", "toxics"]
    host, port = split_listen(body["listen"])
    assert (host, body["upstream"], body["enabled"], body["toxics"]) == (
        "127.0.0.1",
        echo.address,
        True,
        [],
    )
    assert port > 0
    await api.proxy("a", echo.address)
    status, listing = await api.call("GET", "/proxies")
    assert status == 200 and list(listing) == ["a", "p"]  # keyed by name, sorted like Go's map
    assert listing["p"] == body
    assert await api.call("GET", "/proxies/p") == (200, body)


async def test_create_errors(api: Api, echo: EchoServer) -> None:
    await api.proxy("p", echo.address)
    cases = [
        ({"name": "p", "upstream": echo.address}, 409, "proxy already exists"),
        ({"upstream": echo.address}, 400, "missing required field: name"),
        ({"name": "q"}, 400, "missing required field: upstream"),
        ({"name": "", "upstream": echo.address}, 400, "missing required field: name"),
    ]
    for request, status, message in cases:
        assert await api.call("POST", "/proxies", request) == (status, err(message, status))
    assert await api.call("POST", "/proxies", raw=b"") == (400, err("bad request body: EOF", 400))
    for raw in (b"{", b"{nope}", b"[1, 2]", b'{"name": 5, "upstream": "x:1"}', b"NaN"):
        status, body = await api.call("POST", "/proxies", raw=raw)
        assert status == 400 and body["status"] == 400, raw
        assert body["error"].startswith("bad request body: "), raw
    status, body = await api.call("GET", "/proxies")
    assert list(body) == ["p"]


async def test_create_listen_failures_are_500_json(api: Api, echo: EchoServer) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, body = await api.call(
            "POST",
            "/proxies",
            {"name": "p", "listen": f"127.0.0.1:{port}", "upstream": echo.address},
        )
    assert (status, body) == (
        500,
        err(f"listen tcp 127.0.0.1:{port}: bind: address already in use", 500),
    )
    status, body = await api.call(
        "POST", "/proxies", {"name": "p", "listen": "local373", "upstream": echo.address}
    )
    assert (status, body) == (
        500,
        err("listen tcp: address local373: missing port in address", 500),
    )
    assert await api.call("GET", "/proxies") == (200, {})


async def test_unknown_proxy_is_404_everywhere(api: Api) -> None:
    missing = (404, err("proxy not found", 404))
    for method, path, body in [
        ("GET", "/proxies/nope", None),
        ("PATCH", "/proxies/nope", {"enabled": False}),
        ("POST", "/proxies/nope", {"enabled": False}),
        ("DELETE", "/proxies/nope", None),
        ("GET", "/proxies/nope/toxics", None),
        ("POST", "/proxies/nope/toxics", {"type": "latency"}),
        ("GET", "/proxies/nope/toxics/t", None),
        ("PATCH", "/proxies/nope/toxics/t", {"toxicity": 1}),
        ("DELETE", "/proxies/nope/toxics/t", None),
    ]:
        assert await api.call(method, path, body) == missing, (method, path)


async def test_patch_and_post_update_proxy(api: Api, echo: EchoServer) -> None:
    created = await api.proxy("p", echo.address)
    status, body = await api.call("PATCH", "/proxies/p", {"enabled": False})
    assert (status, body["enabled"], body["listen"]) == (200, False, created["listen"])
    with pytest.raises(ConnectionRefusedError):
        await connect(created["listen"])
    status, body = await api.call("POST", "/proxies/p", {"enabled": True})
    assert (status, body["enabled"], body["listen"]) == (200, True, created["listen"])
    reader, writer = await connect(created["listen"])
    writer.write(b"hi")
    assert await read_exactly(reader, 2) == b"hi"
    writer.close()

    # A new upstream restarts the proxy; a new listen address moves it.
    other = await EchoServer().start()
    status, body = await api.call("PATCH", "/proxies/p", {"upstream": other.address})
    assert (status, body["upstream"], body["enabled"]) == (200, other.address, True)
    status, body = await api.call("PATCH", "/proxies/p", {"listen": "127.0.0.1:0"})
    assert status == 200 and body["listen"] != created["listen"]
    reader, writer = await connect(body["listen"])
    writer.write(b"yo")
    assert await read_exactly(reader, 2) == b"yo"
    writer.close()
    await other.close()

    status, body = await api.call("PATCH", "/proxies/p", {"listen": "nonsense"})
    assert (status, body) == (500, err("address nonsense: missing port in address", 500))
    status, body = await api.call("PATCH", "/proxies/p", {"enabled": "yes"})
    assert status == 400 and body["error"].startswith("bad request body: ")
    assert await api.call("PATCH", "/proxies/p", raw=b"") == (
        400,
        err("bad request body: EOF", 400),
    )


async def test_delete_proxy(api: Api, echo: EchoServer) -> None:
    created = await api.proxy("p", echo.address)
    assert await api.call("DELETE", "/proxies/p") == (204, None)
    assert await api.call("DELETE", "/proxies/p") == (404, err("proxy not found", 404))
    with pytest.raises(ConnectionRefusedError):
        await connect(created["listen"])


async def test_toxic_create_defaults_and_shape(api: Api, echo: EchoServer) -> None:
    await api.proxy("p", echo.address)
    status, body = await api.call("POST", "/proxies/p/toxics", {"type": "latency"})
    assert status == 200
    assert body == {
        "attributes": {"latency": 0, "jitter": 0},
        "name": "latency_downstream",
        "type": "latency",
        "stream": "downstream",
        "toxicity": 1.0,
    }
    status, body = await api.call(
        "POST",
        "/proxies/p/toxics",
        {"type": "slicer", "stream": "UpStream", "toxicity": 0, "attributes": {"delay": 5}},
    )
    # The stream is matched case-insensitively but echoed as written, as toxiproxy does.
    assert (status, body["name"], body["stream"], body["toxicity"]) == (
        200,
        "slicer_UpStream",
        "UpStream",
        0,
    )
    assert body["attributes"] == {"average_size": 0, "size_variation": 0, "delay": 5}
    expected_attributes = {
        "bandwidth": {"rate": 0},
        "slow_close": {"delay": 0},
        "timeout": {"timeout": 0},
        "reset_peer": {"timeout": 0},
        "limit_data": {"bytes": 0},
        "noop": {},
    }
    for kind, attributes in expected_attributes.items():
        status, body = await api.call(
            "POST", "/proxies/p/toxics", {"type": kind, "stream": "upstream"}
        )
        assert (status, body["attributes"]) == (200, attributes), kind
    status, listing = await api.call("GET", "/proxies/p/toxics")
    # Upstream toxics first, then downstream, each in the order added.
    assert [t["name"] for t in listing] == [
        "slicer_UpStream",
        "bandwidth_upstream",
        "slow_close_upstream",
        "timeout_upstream",
        "reset_peer_upstream",
        "limit_data_upstream",
        "noop_upstream",
        "latency_downstream",
    ]
    status, proxy = await api.call("GET", "/proxies/p")
    assert proxy["toxics"] == listing


async def test_toxic_create_errors(api: Api, echo: EchoServer) -> None:
    await api.proxy("p", echo.address)
    await api.toxic("p", name="t", type="latency", stream="upstream")
    cases = [
        ({"name": "t", "type": "latency"}, 409, "toxic already exists"),
        ({"name": "t", "type": "slow_close", "stream": "downstream"}, 409, "toxic already exists"),
        (
            {"type": "latency", "stream": "sideways"},
            400,
            "stream was invalid, can be either upstream or downstream",
        ),
        (
            {"type": "latency", "stream": ""},
            400,
            "stream was invalid, can be either upstream or downstream",
        ),
        ({"type": "gremlin"}, 400, "invalid toxic type"),
        ({}, 400, "invalid toxic type"),
    ]
    for request, status, message in cases:
        assert await api.call("POST", "/proxies/p/toxics", request) == (
            status,
            err(message, status),
        )
    bad_bodies = [
        b"",
        b"[]",
        b'{"type": "latency", "attributes": {"latency": 1.5}}',
        b'{"type": "latency", "attributes": {"latency": "10"}}',
        b'{"type": "latency", "attributes": {"jitter": true}}',
        b'{"type": "latency", "attributes": [1]}',
        b'{"type": "latency", "toxicity": "high"}',
        b'{"type": 3}',
    ]
    for raw in bad_bodies:
        status, body = await api.call("POST", "/proxies/p/toxics", raw=raw)
        assert status == 400 and body["error"].startswith("bad request body: "), raw
    status, listing = await api.call("GET", "/proxies/p/toxics")
    assert [t["name"] for t in listing] == ["t"]


async def test_toxic_get_update_delete(api: Api, echo: EchoServer) -> None:
    await api.proxy("p", echo.address)
    created = await api.toxic(
        "p", type="latency", toxicity=0.5, attributes={"latency": 10, "jitter": 2}
    )
    assert await api.call("GET", "/proxies/p/toxics/latency_downstream") == (200, created)
    assert await api.call("GET", "/proxies/p/toxics/nope") == (404, err("toxic not found", 404))

    # Attributes merge; toxicity and the rest stay unless given.
    status, body = await api.call(
        "PATCH", "/proxies/p/toxics/latency_downstream", {"attributes": {"jitter": 7}}
    )
    assert status == 200
    assert body == dict(created, attributes={"latency": 10, "jitter": 7})
    status, body = await api.call(
        "POST",
        "/proxies/p/toxics/latency_downstream",
        {"toxicity": 1, "name": "renamed", "type": "bandwidth", "stream": "upstream"},
    )
    assert status == 200
    assert body == dict(created, toxicity=1.0, attributes={"latency": 10, "jitter": 7})
    assert await api.call("GET", "/proxies/p/toxics/latency_downstream") == (200, body)
    assert await api.call("PATCH", "/proxies/p/toxics/nope", {"toxicity": 1}) == (
        404,
        err("toxic not found", 404),
    )
    status, bad = await api.call(
        "PATCH", "/proxies/p/toxics/latency_downstream", {"attributes": {"latency": -0.5}}
    )
    assert status == 400 and bad["error"].startswith("bad request body: ")
    assert await api.call("GET", "/proxies/p/toxics/latency_downstream") == (200, body)

    assert await api.call("DELETE", "/proxies/p/toxics/latency_downstream") == (204, None)
    assert await api.call("DELETE", "/proxies/p/toxics/latency_downstream") == (
        404,
        err("toxic not found", 404),
    )
    assert await api.call("GET", "/proxies/p/toxics") == (200, [])


async def test_populate(api: Api, echo: EchoServer) -> None:
    entries = [
        {"name": "one", "listen": "127.0.0.1:0", "upstream": echo.address},
        {"name": "two", "listen": "127.0.0.1:0", "upstream": echo.address, "enabled": False},
    ]
    status, body = await api.call("POST", "/populate", entries)
    assert status == 201 and list(body) == ["proxies"]
    assert [(p["name"], p["enabled"]) for p in body["proxies"]] == [("one", True), ("two", False)]
    one = body["proxies"][0]
    await api.toxic("one", type="latency")

    # Same resolved addresses: kept as is, toxics included. Different: replaced.
    same = [
        {
            "name": "one",
            "listen": one["listen"].replace("127.0.0.1", "localhost"),
            "upstream": echo.address,
        }
    ]
    status, body = await api.call("POST", "/populate", same)
    assert status == 201 and [t["name"] for t in body["proxies"][0]["toxics"]] == [
        "latency_downstream"
    ]
    moved = [{"name": "one", "listen": one["listen"], "upstream": "127.0.0.1:1"}]
    status, body = await api.call("POST", "/populate", moved)
    assert status == 201 and body["proxies"][0]["toxics"] == []
    assert body["proxies"][0]["upstream"] == "127.0.0.1:1"

    assert await api.call("POST", "/populate", []) == (201, {"proxies": None})


async def test_populate_errors(api: Api, echo: EchoServer) -> None:
    status, body = await api.call(
        "POST", "/populate", [{"name": "a", "upstream": echo.address}, {"upstream": echo.address}]
    )
    assert (status, body) == (
        400,
        {**err("missing required field: name at proxy 2", 400), "proxies": None},
    )
    status, body = await api.call("POST", "/populate", [{"name": "a", "upstream": ""}])
    assert (status, body) == (
        400,
        {**err("missing required field: upstream at proxy 1", 400), "proxies": None},
    )
    assert await api.call("GET", "/proxies") == (200, {})
    for raw in (b"", b"{}", b'[{"name": 1}]', b"[1]"):
        status, body = await api.call("POST", "/populate", raw=raw)
        assert (
            status == 400
            and body["error"].startswith("bad request body: ")
            and body["proxies"] is None
        ), raw

    # A proxy that cannot listen stops the run; those before it are reported and kept.
    entries = [
        {"name": "one", "listen": "127.0.0.1:0", "upstream": echo.address},
        {"name": "two", "listen": "local373", "upstream": echo.address},
        {"name": "three", "listen": "127.0.0.1:0", "upstream": echo.address},
    ]
    status, body = await api.call("POST", "/populate", entries)
    assert status == 500
    assert (body["error"], body["status"]) == (
        "listen tcp: address local373: missing port in address",
        500,
    )
    assert [p["name"] for p in body["proxies"]] == ["one"]
    status, listing = await api.call("GET", "/proxies")
    assert list(listing) == ["one"]


async def test_reset(api: Api, echo: EchoServer) -> None:
    await api.proxy("a", echo.address)
    await api.proxy("b", echo.address, enabled=False)
    await api.toxic("a", type="latency", stream="upstream")
    await api.toxic("a", type="slicer")
    assert await api.call("POST", "/reset") == (204, None)
    status, listing = await api.call("GET", "/proxies")
    assert status == 200 and list(listing) == ["a", "b"]
    assert all(p["enabled"] and p["toxics"] == [] for p in listing.values())


async def test_version(server: ToxiproxyServer) -> None:
    async with aiohttp.ClientSession() as session, session.get(server.url + "/version") as response:
        assert response.status == 200
        assert response.headers["Content-Type"] == "application/json;charset=utf-8"
        assert await response.text() == f'{{"version": "{VERSION}"}}\n'


async def test_browsers_routes_and_methods(server: ToxiproxyServer) -> None:
    async with aiohttp.ClientSession() as session:
        headers = {"User-Agent": "Mozilla/5.0 (X11)"}
        async with session.get(server.url + "/proxies", headers=headers) as response:
            assert response.status == 403
        async with session.get(server.url + "/nowhere") as response:
            assert response.status == 404
        async with session.put(server.url + "/proxies") as response:
            assert response.status == 405
