"""A restarted mirror whose GM catch-up arrives before the cluster's queue record.

n3 restarts and recovers ha.q from its store as a provisional master. n1 (the master)
sees it first and adds the new incarnation as a mirror; n2, its left-hand neighbour in
the ring, gets that view and sends n3 the catch-up before n2 has even noticed n3, so the
catch-up reaches n3 ahead of any metadata. It used to go to the recovered group of one
and be lost: n3 became a mirror that never received a broadcast again and a sync to it
never ended. It must instead wait until n3 has started over as an empty joiner."""

from __future__ import annotations

from tests.cluster.test_breakages import held, publish, replica
from tests.ha.test_ha_simulated import mirrored_queue


def test_a_catch_up_that_overtakes_the_record_reaches_the_restarted_mirror() -> None:
    sim = mirrored_queue(11)
    publish(sim, "n1", 3)
    sim.kill("n3")
    sim.pump()
    sim.restart("n3", seen_by=["n1"], pump=False)
    before = sim.delivered.copy()
    sim.move("n1", "n2")  # the record whose view adds n3's new run as a mirror
    sim.move("n2", "n3")  # its catch-up, while n3's record is still the one it recovered
    assert sim.delivered - before == {("n1", "n2", "meta"): 1, ("n2", "n3", "gm"): 1}
    sim.seen("n2", "n3")
    sim.pump()

    publish(sim, "n1", 2)
    assert (held(sim, "n1"), held(sim, "n3")) == (5, 2)  # n3 rejoined empty, gets broadcasts

    coordinator = sim.coordinators["n1"]
    coordinator.sync(replica(sim, "n1"))
    while coordinator.sync_step():
        sim.pump()
    sim.pump()
    assert held(sim, "n3") == 5
    assert replica(sim, "n3").me in replica(sim, "n1").record.synced
