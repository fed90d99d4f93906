"""What a node sends a peer as soon as it sees that peer up (its metadata snapshot)
reaches it: a peer takes messages only from a peer it has heard say it hears it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cluster.peer.codec import Envelope, encode
from cluster.peer.detector import Event, PeerUp
from cluster.peer.links import ClusterSettings, PeerNetwork
from faults.ports import free_port

TICK = 30.0  # no periodic heartbeat (nor redial) within the test: only the handshake


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.01)


async def test_what_a_peer_coming_up_is_sent_first_is_not_dropped_by_it() -> None:
    """n1's hello reaches n2 before n1 hears n2; n2's hello, saying it hears n1, is
    the first n1 hears of n2. n1 sees n2 up and sends it its snapshot at once: n2 must
    have been told that n1 hears it first, or it drops the snapshot and is never sent
    another (the soak run where n3 kept a stale queue record)."""
    port1, port2 = free_port(), free_port()
    received: list[str] = []
    n2 = PeerNetwork("n2", ClusterSettings("c", "127.0.0.1", port2,
                                           {"n1": ("127.0.0.1", free_port())}, tick=TICK),
                     lambda: ("i2", True), lambda event: None,
                     lambda peer, envelope: received.append(f"{peer}:{envelope.type}"),
                     lambda: None, lambda backlogged: None)
    n1: PeerNetwork

    def n1_event(event: Event) -> None:
        if isinstance(event, PeerUp):
            n1.send(event.peer, Envelope("meta"))  # as Coordinator.peer_up does

    n1 = PeerNetwork("n1", ClusterSettings("c", "127.0.0.1", port1,
                                           {"n2": ("127.0.0.1", port2)}, tick=TICK),
                     lambda: ("i1", True), n1_event, lambda peer, envelope: None, lambda: None,
                     lambda backlogged: None)
    await n2.start()  # its own link to n1 goes nowhere: the test says its hello
    await n1.start()
    _, writer = await asyncio.open_connection("127.0.0.1", port1)
    try:
        await until(lambda: n2.detector.hears() == ["n1"])
        writer.write(encode(Envelope("hello", {"cluster": "c", "node": "n2",
                                               "incarnation": "i2", "app": True,
                                               "hears": n2.detector.hears()})))
        await until(lambda: n1.detector.running() == ["n2"])
        await until(lambda: n2.detector.running() == ["n1"])
        n1.send("n2", Envelope("later"))
        await until(lambda: "n1:later" in received)
        assert received == ["n1:meta", "n1:later"]
    finally:
        writer.close()
        await n1.stop()
        await n2.stop()
