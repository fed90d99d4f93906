"""A link to a peer that reads slowly is held, not cut: past FLOW_HIGH unsent bytes the
node is told to stop its publishers, under FLOW_LOW to go on, and the link stays up all
along (cutting it split a three-node cluster under eight producers)."""

from __future__ import annotations

import asyncio

from cluster.peer.codec import Envelope, encode
from cluster.peer.links import FLOW_HIGH, ClusterSettings, PeerNetwork
from faults.ports import free_port
from tests.peer.test_links_reads import until

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
    _, n2_writer = await asyncio.open_connection("127.0.0.1", settings.listen_port)
    try:
        n2_writer.write(encode(Envelope("hello", {  # up: it hears n1
            "cluster": "c", "node": "n2", "incarnation": "i2", "app": True, "hears": ["n1"]})))
        reader = await asyncio.wait_for(accepted.get(), 10)
        await until(lambda: network.detector.reachable() == ["n2"])
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
        n2_writer.close()
        await network.stop()
        server.close()


async def test_a_backlogged_peer_that_goes_down_holds_publishers_no_longer() -> None:
    """n2 says hello and heartbeats on its own link to n1 but stops reading n1's link to
    it; once it falls silent too, n1 takes it down and drops its link with the backlog."""
    accepted: asyncio.Queue[asyncio.StreamReader] = asyncio.Queue()

    async def peer_n2(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await accepted.put(reader)

    server = await asyncio.start_server(peer_n2, "127.0.0.1", 0)
    settings = ClusterSettings("c", "127.0.0.1", free_port(),
                               {"n2": ("127.0.0.1", server.sockets[0].getsockname()[1])},
                               tick=0.2)
    flow: list[bool] = []
    events: list[object] = []
    network = PeerNetwork("n1", settings, lambda: ("i1", True), events.append,
                          lambda peer, envelope: None, lambda: None, flow.append)
    await network.start()
    _, n2_writer = await asyncio.open_connection("127.0.0.1", settings.listen_port)

    def say(kind: str) -> None:
        n2_writer.write(encode(Envelope(kind, {"cluster": "c", "node": "n2", "incarnation": "i2",
                                               "app": True, "hears": ["n1"]})))

    try:
        say("hello")
        reader = await asyncio.wait_for(accepted.get(), 10)
        for _ in range(4 * FLOW_HIGH // PAYLOAD + 64):
            network.send("n2", Envelope("gm", {}, b"x" * PAYLOAD))
            say("hb")
            await asyncio.sleep(0)
        assert flow == [True] and network.detector.reachable() == ["n2"]
        async with asyncio.timeout(10):  # n2 silent: down after 4 ticks
            while flow == [True]:
                await asyncio.sleep(0.05)
        assert flow == [True, False] and not network.backlogged
        assert "PeerDown" in [type(e).__name__ for e in events]
        while await asyncio.wait_for(reader.read(PAYLOAD), 10):
            pass  # the link n1 dropped: what it held is gone, the stream ends
    finally:
        n2_writer.close()
        await network.stop()
        server.close()
