"""Stopping the links ends their tasks, whatever they were doing. A node stopped at
the same moment as its peers kept dialling them for ever: a cancel that landed as a
refused connection ended was dropped (Python 3.11's ``asyncio.wait_for``), so the
node never exited on SIGTERM (one node in four, stopping a 3-node cluster at once)."""

from __future__ import annotations

import asyncio
import random

from cluster.peer.links import ClusterSettings, PeerNetwork
from faults.ports import free_port


async def test_stop_ends_the_dialling_to_peers_that_refuse() -> None:
    rng = random.Random(1)
    for cycle in range(300):
        # Nobody listens on the peers' ports: every dial is refused at once, and the
        # tiny tick dials again within a millisecond, so stops land on every step.
        peers = {"n2": ("127.0.0.1", free_port()), "n3": ("127.0.0.1", free_port())}
        settings = ClusterSettings("c", "127.0.0.1", free_port(), peers, tick=0.002)
        network = PeerNetwork("n1", settings, lambda: ("i1", True), lambda event: None,
                              lambda peer, envelope: None, lambda: None,
                              lambda backlogged: None)
        await network.start()
        await asyncio.sleep(rng.uniform(0, 0.01))
        try:
            async with asyncio.timeout(5):
                await network.stop()
        except TimeoutError:
            raise AssertionError(f"stop did not end the links' tasks (cycle {cycle})") from None
