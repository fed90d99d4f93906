"""A link to a peer that reads slowly is held, not cut: past FLOW_HIGH unsent bytes the
node is told to stop its publishers, under FLOW_LOW to go on, and the link stays up all
along (cutting it split a three-node cluster under eight producers)."""

from __future__ import annotations

import asyncio

from cluster.peer.codec import Envelope
from cluster.peer.links import FLOW_HIGH, ClusterSettings, PeerNetwork
from faults.ports import free_port

PAYLOAD = 1 << 20


async def test_a_peer_that_stops_reading_holds_publishers_until_it_reads_again() -> None:
    accepted: asyncio.Queue[asyncio.StreamReader] = asyncio.Queue()

    async def peer_n2(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(reader)  # reads nothing until the test says so

    server = await asyncio.start_server(peer_n2, "127.0.0.1", 0)
    peer_port = server.sockets[0].getsockname()[1]
    settings = ClusterSettings("c", "127.0.0.1", free_port(), {"n2": ("127.0.0.1", peer_port)},
                               tick=30.0)  # no heartbeat or detector tick in the test
    flow: list[bool] = []
    network = PeerNetwork("n1", settings, lambda: ("i1", True), lambda event: None,
                          lambda peer, envelope: None, lambda: None, flow.append)
    await network.start()
    try:
        reader = await asyncio.wait_for(accepted.get(), 10)
        # Far more than the link held before it was cut (64 MiB) and than the kernel's
        # socket buffers take.
        for _ in range(4 * FLOW_HIGH // PAYLOAD + 64):
            assert network.send("n2", Envelope("gm", {}, b"x" * PAYLOAD)), "the link was cut"
            await asyncio.sleep(0)
        assert flow == [True] and network.backlogged
        while flow == [True]:
            await asyncio.wait_for(reader.read(PAYLOAD), 10)
        assert flow == [True, False] and not network.backlogged
        assert network.send("n2", Envelope("gm", {}, b"after"))
        tail = b""
        while not tail.endswith(b"after"):  # everything sent arrives, the last one too
            tail = (tail + await asyncio.wait_for(reader.read(PAYLOAD), 10))[-16:]
    finally:
        await network.stop()
        server.close()
