"""A starting node learns from its peers' hellos whom their last-running files name,
which `BootGate` needs to tell whether a peer starting with it saw it stop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cluster.peer.boot import BootGate
from cluster.peer.detector import FailureDetector
from cluster.peer.links import ClusterSettings, PeerNetwork
from faults.ports import free_port

TICK = 0.5  # a dial that found no listener yet tries again soon


async def until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0.01)


def test_the_detector_keeps_what_each_peer_said_its_file_names() -> None:
    d = FailureDetector("n2", ["n1", "n3"], tick=1.0, count=4)
    d.heard("n1", "i1", False, ["n2", "n3"], now=0.0, outlived_by=["n3"])
    d.heard("n3", "i3", False, ["n2", "n1"], now=0.0)  # an older node: says nothing
    assert d.outlived_by() == {"n1": frozenset({"n3"})}
    d.heard("n1", "i1", False, ["n2", "n3"], now=0.5)  # a heartbeat without it keeps it
    assert d.outlived_by() == {"n1": frozenset({"n3"})}


async def test_a_node_that_a_booting_peer_saw_stop_waits_for_it_over_real_links() -> None:
    """n2 stopped first (its file names n1); n1 saw it stop (its file names nobody).
    Both are up and neither app runs: n2's gate holds it back until n1 runs."""
    port1, port2 = free_port(), free_port()
    apps = {"n1": False, "n2": False}
    n1 = PeerNetwork("n1", ClusterSettings("c", "127.0.0.1", port1,
                                           {"n2": ("127.0.0.1", port2)}, tick=TICK),
                     lambda: ("i1", apps["n1"]), lambda event: None,
                     lambda peer, envelope: None, lambda: None, lambda backlogged: None)
    n2 = PeerNetwork("n2", ClusterSettings("c", "127.0.0.1", port2,
                                           {"n1": ("127.0.0.1", port1)}, tick=TICK),
                     lambda: ("i2", apps["n2"]), lambda event: None,
                     lambda peer, envelope: None, lambda: None, lambda backlogged: None)
    n1.outlived_by, n2.outlived_by = frozenset(), frozenset({"n1"})
    gate = BootGate(frozenset({"n1"}), frozenset({"n1"}), me="n2")
    await n1.start()
    await n2.start()
    try:
        await until(lambda: n2.detector.reachable() == ["n1"])
        assert n2.detector.outlived_by() == {"n1": frozenset()}
        assert n1.detector.outlived_by() == {"n2": frozenset({"n1"})}
        d = n2.detector
        assert not gate.may_start(set(d.running()), set(d.reachable()), d.outlived_by())
        apps["n1"] = True
        n1.announce()
        await until(lambda: d.running() == ["n1"])
        assert gate.may_start(set(d.running()), set(d.reachable()), d.outlived_by())
    finally:
        await n1.stop()
        await n2.stop()
