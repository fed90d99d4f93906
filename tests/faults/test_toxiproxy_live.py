"""Changes made while connections are open: toxics spliced into live links, and
proxies disabled and enabled under their clients."""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from typing import Any

import pytest

from faults.toxiproxy import ToxiproxyServer
from tests.faults.toxiproxy_support import Api, EchoServer, PeerServer, connect, read_exactly


async def round_trip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> float:
    start = time.perf_counter()
    writer.write(b"x")
    await read_exactly(reader, 1)
    return time.perf_counter() - start


async def test_toxics_apply_to_open_connections(api: Api, echo: EchoServer) -> None:
    proxy = await api.proxy("p", echo.address)
    reader, writer = await connect(proxy["listen"])
    await api.toxic("p", type="latency", stream="upstream", attributes={"latency": 200})
    assert await round_trip(reader, writer) >= 0.18
    status, _ = await api.call(
        "PATCH", "/proxies/p/toxics/latency_upstream", {"attributes": {"latency": 500}}
    )
    assert status == 200
    assert await round_trip(reader, writer) >= 0.48
    await api.call("DELETE", "/proxies/p/toxics/latency_upstream")
    assert await api.call("GET", "/proxies/p/toxics") == (200, [])
    await round_trip(reader, writer)  # the open connection still carries data
    writer.close()


async def test_removing_a_toxic_releases_what_it_held(api: Api, echo: EchoServer) -> None:
    proxy = await api.proxy("p", echo.address)
    # an hour's latency: the bytes come back only because the toxic goes
    await api.toxic("p", type="latency", attributes={"latency": 3_600_000})
    reader, writer = await connect(proxy["listen"])
    writer.write(b"held")
    await asyncio.sleep(0.2)
    await api.call("DELETE", "/proxies/p/toxics/latency_downstream")
    assert await read_exactly(reader, 4, timeout=60) == b"held"
    writer.close()


async def test_rechaining_under_traffic_keeps_every_byte_in_order(
    api: Api, echo: EchoServer
) -> None:
    proxy = await api.proxy("p", echo.address)
    reader, writer = await connect(proxy["listen"])
    source = random.Random(5)
    sent, received = bytearray(), bytearray()
    churning = True

    async def receive() -> None:
        while data := await reader.read(65536):
            received.extend(data)

    async def send() -> None:
        # Traffic flows for as long as the chain is being changed.
        while churning:
            piece = source.randbytes(source.randrange(1, 32768))
            writer.write(piece)
            sent.extend(piece)
            await writer.drain()
            await asyncio.sleep(0.002)

    async def churn() -> None:
        toxics: list[dict[str, Any]] = [
            {"type": "latency", "attributes": {"latency": 5, "jitter": 5}},
            {"type": "slicer", "attributes": {"average_size": 2048, "delay": 10}},
            {"type": "bandwidth", "attributes": {"rate": 100_000}},
            {"type": "slow_close"},
            {"type": "latency", "name": "lat2", "toxicity": 0.5, "attributes": {"latency": 2}},
        ]
        for round_ in range(6):
            for spec in toxics:
                for stream in ("upstream", "downstream"):
                    name = f"{spec.get('name', spec['type'])}_{stream}"
                    await api.toxic("p", **dict(spec, name=name, stream=stream))
                    await asyncio.sleep(0.01)
            for stream in ("upstream", "downstream"):
                await api.call(
                    "PATCH",
                    f"/proxies/p/toxics/latency_{stream}",
                    {"attributes": {"latency": round_}},
                )
            for spec in reversed(toxics) if round_ % 2 else toxics:
                for stream in ("downstream", "upstream"):
                    name = f"{spec.get('name', spec['type'])}_{stream}"
                    assert (await api.call("DELETE", f"/proxies/p/toxics/{name}"))[0] == 204
                    await asyncio.sleep(0.01)

    receiver, sender = asyncio.ensure_future(receive()), asyncio.ensure_future(send())
    await churn()
    churning = False
    await sender
    assert len(sent) > 1 << 20
    for _ in range(600):
        if len(received) >= len(sent):
            break
        await asyncio.sleep(0.05)
    assert received == sent
    writer.close()
    await asyncio.wait_for(receiver, 5)


async def test_disable_drops_connections_and_enable_listens_again(
    api: Api, echo: EchoServer, server: ToxiproxyServer
) -> None:
    proxy = await api.proxy("p", echo.address)
    reader, writer = await connect(proxy["listen"])
    assert await round_trip(reader, writer) < 0.5
    assert server.proxies.get("p").connection_count == 1

    status, body = await api.call("PATCH", "/proxies/p", {"enabled": False})
    assert status == 200 and body["enabled"] is False
    with contextlib.suppress(ConnectionResetError):  # either way the connection is gone
        assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    for _ in range(50):
        if server.proxies.get("p").connection_count == 0:
            break
        await asyncio.sleep(0.02)
    assert server.proxies.get("p").connection_count == 0
    try:
        await connect(proxy["listen"])
    except ConnectionRefusedError:
        pass
    else:
        raise AssertionError("a disabled proxy accepted a connection")

    status, body = await api.call("PATCH", "/proxies/p", {"enabled": True})
    assert status == 200 and body["listen"] == proxy["listen"]
    reader, writer = await connect(proxy["listen"])
    assert await round_trip(reader, writer) < 0.5
    writer.close()


async def test_connection_to_unreachable_upstream_is_closed(api: Api) -> None:
    proxy = await api.proxy("p", "127.0.0.1:1")
    reader, writer = await connect(proxy["listen"])
    with contextlib.suppress(ConnectionResetError):
        assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_server_close_arrives_after_data_still_under_latency(
    api: Api, peer: PeerServer
) -> None:
    proxy = await api.proxy("p", peer.address)
    await api.toxic("p", type="latency", attributes={"latency": 300})
    reader, writer = await connect(proxy["listen"])
    server = await peer.next_connection()
    server.writer.write(b"last words")
    server.writer.close()
    assert await asyncio.wait_for(reader.read(), 5) == b"last words"
    writer.close()


async def test_client_half_close_ends_the_whole_connection(api: Api, peer: PeerServer) -> None:
    # Toxiproxy closes a socket outright when the stream towards it ends; it does not
    # forward half-closes, and neither does this server.
    proxy = await api.proxy("p", peer.address)
    reader, writer = await connect(proxy["listen"])
    server = await peer.next_connection()
    writer.write(b"bye")
    writer.write_eof()
    _, data = await asyncio.wait_for(server.arrivals.get(), 5)
    assert data == b"bye"
    assert server.task is not None
    await asyncio.wait_for(server.task, 5)  # the server saw end-of-stream
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_a_triggered_reset_peer_still_fires_when_removed(api: Api, echo: EchoServer) -> None:
    # Toxiproxy's reset cannot be interrupted once data has triggered it: removed while
    # its timeout runs, the toxic still resets the connection. The echo's reply triggers
    # it, a round trip through the proxy: 1 s for that, then 2 s of timeout still to run
    # when it is removed. (With 0.1 s, a loaded fresh clone's run read until its 5 s ran
    # out, as it does when the DELETE lands before the reply: nothing resets then.)
    proxy = await api.proxy("p", echo.address)
    await api.toxic("p", type="reset_peer", attributes={"timeout": 3000})
    reader, writer = await connect(proxy["listen"])
    writer.write(b"x")
    await asyncio.sleep(1.0)
    assert await api.call("DELETE", "/proxies/p/toxics/reset_peer_downstream") == (204, None)
    with pytest.raises(ConnectionResetError):
        await asyncio.wait_for(reader.read(), 10)
    writer.close()
