"""Each toxic's effect measured through real sockets. Timing bounds are generous:
the machine has two shared cores."""

from __future__ import annotations

import asyncio
import time

import pytest

from faults.toxiproxy import ToxiproxyServer
from tests.faults.toxiproxy_support import Api, EchoServer, PeerServer, connect, read_exactly


async def round_trip(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> float:
    start = time.perf_counter()
    writer.write(b"x")
    await read_exactly(reader, 1)
    return time.perf_counter() - start


async def read_until_eof(reader: asyncio.StreamReader, timeout: float = 5.0) -> bytes:
    return await asyncio.wait_for(reader.read(), timeout)


async def test_passes_data_unchanged(api: Api, echo: EchoServer) -> None:
    proxy = await api.proxy("p", echo.address)
    reader, writer = await connect(proxy["listen"])
    payload = bytes(range(256)) * 8192  # 2 MiB, above the link's flow-control window
    writer.write(payload)
    assert await read_exactly(reader, len(payload), timeout=20) == payload
    writer.close()


async def test_latency_adds_delay(api: Api, echo: EchoServer) -> None:
    proxy = await api.proxy("p", echo.address)
    reader, writer = await connect(proxy["listen"])
    assert await round_trip(reader, writer) < 0.15
    await api.toxic("p", type="latency", attributes={"latency": 300})
    for _ in range(3):
        assert 0.28 <= await round_trip(reader, writer) < 0.8
    writer.close()


async def test_jitter_stays_within_latency_plus_minus_jitter(api: Api, echo: EchoServer) -> None:
    proxy = await api.proxy("p", echo.address)
    await api.toxic("p", type="latency", attributes={"latency": 300, "jitter": 200})
    reader, writer = await connect(proxy["listen"])
    delays = [await round_trip(reader, writer) for _ in range(10)]
    assert all(0.09 <= d < 0.5 + 0.3 for d in delays), delays
    assert max(delays) - min(delays) > 0.1, delays  # the jitter is really drawn
    writer.close()


async def test_latency_delays_each_chunk_from_when_it_was_read(api: Api, peer: PeerServer) -> None:
    # Chunks sent in quick succession each arrive ~latency after they were sent; they
    # do not queue behind one another's delay.
    loop = asyncio.get_running_loop()
    proxy = await api.proxy("p", peer.address)
    await api.toxic("p", type="latency", stream="upstream", attributes={"latency": 300})
    _, writer = await connect(proxy["listen"])
    server = await peer.next_connection()
    sent = []
    for n in range(5):
        sent.append(loop.time())
        writer.write(b"%d" % n)
        await asyncio.sleep(0.04)
    arrived = [(await asyncio.wait_for(server.arrivals.get(), 5))[0] for _ in sent]
    delays = [a - s for a, s in zip(arrived, sent, strict=True)]
    assert all(0.28 <= d < 0.6 for d in delays), delays
    writer.close()


async def test_latency_only_affects_its_stream(api: Api, peer: PeerServer) -> None:
    loop = asyncio.get_running_loop()
    proxy = await api.proxy("p", peer.address)
    await api.toxic("p", type="latency", stream="upstream", attributes={"latency": 300})

    async def one_way_delays() -> tuple[float, float]:
        reader, writer = await connect(proxy["listen"])
        server = await peer.next_connection()
        sent = loop.time()
        writer.write(b"up")
        arrived, _ = await asyncio.wait_for(server.arrivals.get(), 5)
        up = arrived - sent
        sent = loop.time()
        server.writer.write(b"down")
        await read_exactly(reader, 4)
        writer.close()
        return up, loop.time() - sent

    up, down = await one_way_delays()
    assert 0.28 <= up < 0.8 and down < 0.15, (up, down)
    await api.call("DELETE", "/proxies/p/toxics/latency_upstream")
    await api.toxic("p", type="latency", stream="downstream", attributes={"latency": 300})
    up, down = await one_way_delays()
    assert up < 0.15 and 0.28 <= down < 0.8, (up, down)


@pytest.mark.parametrize("write_size", [400_000, 2_000])
async def test_bandwidth_limits_rate(api: Api, peer: PeerServer, write_size: int) -> None:
    # One big write takes the toxic's 100 ms slicing path; small writes its per-chunk pacing.
    proxy = await api.proxy("p", peer.address)
    await api.toxic("p", type="bandwidth", attributes={"rate": 200})  # 200 KB/s
    reader, writer = await connect(proxy["listen"])
    server = await peer.next_connection()
    size = 400_000
    start = time.perf_counter()
    for _ in range(size // write_size):
        server.writer.write(b"b" * write_size)
        await server.writer.drain()
        await asyncio.sleep(0)
    await read_exactly(reader, size, timeout=20)
    rate = size / (time.perf_counter() - start)
    assert 140_000 <= rate <= 260_000, rate
    writer.close()


async def test_timeout_zero_is_a_black_hole(api: Api, peer: PeerServer) -> None:
    proxy = await api.proxy("p", peer.address)
    await api.toxic("p", type="timeout", attributes={"timeout": 0})
    reader, writer = await connect(proxy["listen"])
    server = await peer.next_connection()
    writer.write(b"request")
    _, data = await asyncio.wait_for(server.arrivals.get(), 5)  # upstream is untouched
    assert data == b"request"
    server.writer.write(b"reply")
    with pytest.raises(TimeoutError):  # neither data nor end-of-stream arrives
        await asyncio.wait_for(reader.read(100), 1.0)
    assert not reader.at_eof()
    # As toxiproxy does, removing a timeout toxic closes the connections it held.
    assert await api.call("DELETE", "/proxies/p/toxics/timeout_downstream") == (204, None)
    assert await read_until_eof(reader) == b""
    writer.close()


async def test_timeout_drops_data_then_closes(api: Api, echo: EchoServer) -> None:
    proxy = await api.proxy("p", echo.address)
    await api.toxic("p", type="timeout", attributes={"timeout": 300})
    reader, writer = await connect(proxy["listen"])
    writer.write(b"dropped")
    assert await read_until_eof(reader) == b""  # nothing echoed, then the end
    writer.close()


async def test_reset_peer_resets_the_connection(api: Api, echo: EchoServer) -> None:
    proxy = await api.proxy("p", echo.address)
    await api.toxic("p", type="reset_peer", attributes={"timeout": 300})
    reader, writer = await connect(proxy["listen"])
    writer.write(b"x")
    with pytest.raises(ConnectionResetError):
        await read_until_eof(reader)
    writer.close()


async def test_slicer_splits_writes(api: Api, peer: PeerServer) -> None:
    proxy = await api.proxy("p", peer.address)
    attributes = {"average_size": 100, "size_variation": 20, "delay": 20_000}
    await api.toxic("p", type="slicer", attributes=attributes)
    reader, writer = await connect(proxy["listen"])
    server = await peer.next_connection()
    payload = bytes(range(250)) * 4
    server.writer.write(payload)
    reads: list[bytes] = []
    while sum(map(len, reads)) < len(payload):
        reads.append(await asyncio.wait_for(reader.read(65536), 5))
    assert b"".join(reads) == payload
    assert len(reads) >= 6 and max(map(len, reads)) <= 2 * 120, [len(r) for r in reads]
    writer.close()


async def test_limit_data_closes_after_n_bytes(api: Api, peer: PeerServer) -> None:
    proxy = await api.proxy("p", peer.address)
    await api.toxic("p", type="limit_data", attributes={"bytes": 100})
    reader, writer = await connect(proxy["listen"])
    server = await peer.next_connection()
    payload = bytes(range(250))
    server.writer.write(payload)
    assert await read_until_eof(reader) == payload[:100]
    writer.close()


async def test_slow_close_delays_the_close(api: Api, peer: PeerServer) -> None:
    proxy = await api.proxy("p", peer.address)

    async def time_to_eof() -> float:
        reader, writer = await connect(proxy["listen"])
        server = await peer.next_connection()
        start = time.perf_counter()
        server.writer.write(b"last words")
        server.writer.close()
        assert await read_until_eof(reader) == b"last words"
        writer.close()
        return time.perf_counter() - start

    assert await time_to_eof() < 0.2
    await api.toxic("p", type="slow_close", attributes={"delay": 500})
    assert 0.45 <= await time_to_eof() < 1.5


async def test_toxicity_is_rolled_once_per_connection(
    api: Api, echo: EchoServer, server: ToxiproxyServer
) -> None:
    proxy = await api.proxy("p", echo.address)
    await api.toxic("p", type="latency", toxicity=0.5, attributes={"latency": 250})
    toxic = server.proxies.get("p").toxics.get("latency_downstream")
    expected = [toxic.link_state(n).roll < 0.5 for n in range(10)]
    assert True in expected and False in expected  # the seed gives a mix to check against
    observed = []
    for _ in range(10):
        reader, writer = await connect(proxy["listen"])
        first, second = await round_trip(reader, writer), await round_trip(reader, writer)
        assert (first > 0.2) == (second > 0.2)  # the same answer for the whole connection
        observed.append(first > 0.2)
        writer.close()
    assert observed == expected


async def test_toxicity_zero_and_one(api: Api, echo: EchoServer) -> None:
    proxy = await api.proxy("p", echo.address)
    await api.toxic("p", type="latency", toxicity=0, attributes={"latency": 300})
    reader, writer = await connect(proxy["listen"])
    assert await round_trip(reader, writer) < 0.15
    writer.close()
    await api.call("PATCH", "/proxies/p/toxics/latency_downstream", {"toxicity": 1})
    reader, writer = await connect(proxy["listen"])
    assert await round_trip(reader, writer) >= 0.28
    writer.close()
