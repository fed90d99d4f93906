"""The links pass a peer's envelopes on one by one and then say the read is done, so
that the node answers a batch of messages with one flush."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cluster.peer.codec import Envelope, encode
from cluster.peer.links import ClusterSettings, PeerNetwork
from faults.ports import free_port


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.01)


async def test_each_read_is_reported_once_after_its_envelopes() -> None:
    calls: list[str] = []
    port = free_port()
    settings = ClusterSettings("c", "127.0.0.1", port, {"n2": ("127.0.0.1", free_port())})
    network = PeerNetwork("n1", settings, lambda: ("i1", True), lambda event: None,
                          lambda peer, envelope: calls.append(f"{peer}:{envelope.type}"),
                          lambda: calls.append("read"), lambda backlogged: None)
    await network.start()
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(encode(Envelope("hello", {"cluster": "c", "node": "n2", "incarnation": "i2",
                                               "app": True, "hears": ["n1"]})))
        await until(lambda: "read" in calls)
        calls.clear()
        writer.write(b"".join(encode(Envelope(kind)) for kind in ("a", "b", "c")))
        await until(lambda: "read" in calls)
        assert calls == ["n2:a", "n2:b", "n2:c", "read"]
    finally:
        writer.close()
        await network.stop()


async def test_part_of_a_large_frame_is_news_from_the_peer() -> None:
    """A busy node reads a peer's large frame (a GM catch-up of many megabytes) a
    piece per turn of its loop, for seconds. Each piece breaks the silence: counting
    only whole envelopes took a live peer down as silent while its frame was still
    arriving, and the two sides of a graceful stop of the master each promoted a
    mirror (scripts/measure-peer-health split-brain, without burners)."""
    port = free_port()
    settings = ClusterSettings("c", "127.0.0.1", port, {"n2": ("127.0.0.1", free_port())},
                               tick=30.0)  # no timer fires in the test: we tick the detector
    reads: list[str] = []
    network = PeerNetwork("n1", settings, lambda: ("i1", True), lambda event: None,
                          lambda peer, envelope: None, lambda: reads.append("read"),
                          lambda backlogged: None)
    await network.start()
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    loop = asyncio.get_running_loop()
    try:
        writer.write(encode(Envelope("hello", {"cluster": "c", "node": "n2", "incarnation": "i2",
                                               "app": True, "hears": ["n1"]})))
        await until(lambda: bool(reads))
        hello_read = loop.time()  # n2 was last heard at or before this
        await asyncio.sleep(0.01)  # so that the next read comes strictly later
        reads.clear()
        frame = encode(Envelope("gm", {}, b"x" * 1_000_000))
        writer.write(frame[:100_000])
        await until(lambda: bool(reads))
        # A window after the hello, yet less than one after the piece was read.
        assert network.detector.tick(hello_read + network.detector.timeout + 0.005) == []
        assert network.detector.reachable() == ["n2"]
    finally:
        writer.close()
        await network.stop()
