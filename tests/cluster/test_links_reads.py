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
                          lambda: calls.append("read"))
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
