"""Every random choice comes from the server's seed, so a run replays."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

from faults import seeds
from faults.toxiproxy import ToxiproxyServer
from faults.toxiproxy.toxics import Latency, Slicer
from tests.faults.toxiproxy_support import Api, EchoServer, connect, read_exactly

REPO = Path(__file__).resolve().parents[2]


async def draws(seed: int, echo: EchoServer) -> list[tuple[float, list[float], list[int]]]:
    """For each of the first connections: the toxicity roll, the first jitter delays,
    and how a slicer would cut 5000 bytes."""
    async with ToxiproxyServer("127.0.0.1", 0, seed=seed) as server, aiohttp.ClientSession() as s:
        api = Api(s, server.url)
        await api.proxy("p", echo.address)
        await api.toxic(
            "p", type="latency", toxicity=0.5, attributes={"latency": 100, "jitter": 50}
        )
        await api.toxic("p", type="slicer", attributes={"average_size": 100, "size_variation": 40})
        toxics = server.proxies.get("p").toxics
        latency, slicer = toxics.get("latency_downstream"), toxics.get("slicer_downstream")
        assert isinstance(latency.attributes, Latency) and isinstance(slicer.attributes, Slicer)
        result = []
        for connection in range(5):
            state = latency.link_state(connection)
            delays = [latency.attributes.delay(state.rng) for _ in range(20)]
            cuts = [
                end for _, end in slicer.attributes.pieces(5000, slicer.link_state(connection).rng)
            ]
            result.append((state.roll, delays, cuts))
        return result


async def test_same_seed_same_draws_other_seed_other_draws(echo: EchoServer) -> None:
    first, again, other = await draws(11, echo), await draws(11, echo), await draws(12, echo)
    assert first == again
    assert first != other
    # Streams differ between connections, and jitter really varies within one.
    assert len({tuple(delays) for _, delays, _ in first}) == 5
    assert all(len(set(delays)) > 5 for _, delays, _ in first)


async def test_recreated_toxic_gets_a_new_stream(
    api: Api, echo: EchoServer, server: ToxiproxyServer
) -> None:
    await api.proxy("p", echo.address)
    spec = {"type": "latency", "attributes": {"latency": 100, "jitter": 50}}
    await api.toxic("p", **spec)
    before = server.proxies.get("p").toxics.get("latency_downstream").link_state(0).roll
    await api.call("DELETE", "/proxies/p/toxics/latency_downstream")
    await api.toxic("p", **spec)
    after = server.proxies.get("p").toxics.get("latency_downstream").link_state(0).roll
    assert before != after


def test_streams_do_not_depend_on_the_interpreter() -> None:
    # A stable hash, not Python's salted hash(): another process must agree.
    code = "from faults import seeds; print(seeds.derive(99, 'proxy', 'p', 0))"
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert int(out.stdout) == seeds.derive(99, "proxy", "p", 0)


async def test_measured_delays_follow_the_seeded_stream(
    api: Api, echo: EchoServer, server: ToxiproxyServer
) -> None:
    """Wall clock: each round trip on connection 0 takes the delay its stream predicts."""
    proxy = await api.proxy("p", echo.address)
    await api.toxic("p", type="latency", attributes={"latency": 300, "jitter": 250})
    toxic = server.proxies.get("p").toxics.get("latency_downstream")
    assert isinstance(toxic.attributes, Latency)
    state = toxic.link_state(0)
    predicted = [toxic.attributes.delay(state.rng) for _ in range(8)]
    reader, writer = await connect(proxy["listen"])
    measured = []
    for _ in predicted:
        start = time.perf_counter()
        writer.write(b"x")
        await read_exactly(reader, 1)
        measured.append(time.perf_counter() - start)
        await asyncio.sleep(0)
    writer.close()
    assert all(abs(m - p) < 0.08 for m, p in zip(measured, predicted, strict=True)), (
        measured,
        predicted,
    )
