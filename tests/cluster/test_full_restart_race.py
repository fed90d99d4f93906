"""A full-cluster restart whose racing queue records cost a mirror its GM catch-up.

Every node loses power and restarts, each recovering ha.q from its store as a
provisional master. n3 comes up first and, alone, keeps its copy; n1 joins it and
becomes its (empty) mirror. n2 starts while both run but gives up waiting for their
metadata (a real node's cluster wait times out) and announces the copy it recovered,
with n1 and n3 as its mirrors: a record that competes with n3's. n3, noticing n2, adds
it to its own record, which wins everywhere; n1, installing that view, sends the
catch-up to its new right-hand neighbour n2, which reaches n2 ahead of n3's record,
while n2's earlier GroupMember (its recovered master's) still stands and takes it.
When n3's record arrives, n2 starts over as an empty joiner, and no one ever sent it a
catch-up again: it never received a broadcast, and a sync never ended because its last
batch never came back round the ring. The joiner must ask its left-hand neighbour for
one (gm.ask).

The simulated brokers share a seeded random generator, so every recovered master draws
the same queue uid, and the catch-up for n3's group passes n2's uid check.
"""

from __future__ import annotations

from cluster.core.policy import Policy
from tests.cluster.simcluster import SimCluster
from tests.cluster.test_breakages import held, publish, replica
from tests.cluster.test_ha_simulated import mirrored_queue


def restart_with_policy(sim: SimCluster, node: str, *, seen_by: list[str]) -> None:
    """Restart without moving a message; the policy comes back as a real node reloads
    its saved definitions (SimCluster.restart recovers only the queues)."""
    sim.restart(node, seen_by=seen_by, pump=False)
    sim.brokers[node].set_policy(Policy.create("/", "ha", "^ha", {"ha-mode": "all"}))


def test_a_catch_up_taken_by_the_recovered_master_is_sent_again_after_a_full_restart(
) -> None:
    sim = mirrored_queue(11)
    publish(sim, "n1", 3)
    for node in ("n1", "n2", "n3"):
        sim.kill(node)
    restart_with_policy(sim, "n3", seen_by=[])  # alone: its copy is the queue at once
    restart_with_policy(sim, "n1", seen_by=["n3"])
    sim.pump()  # n1's recovered copy lost to n3's record: an empty mirror
    restart_with_policy(sim, "n2", seen_by=[])
    sim.coordinators["n2"].stop_waiting()  # timed out: announces its own record
    sim.brokers["n2"].after_input()
    assert replica(sim, "n2").is_master
    assert {member.split("/")[0] for member in replica(sim, "n2").record.mirrors} == {
        "n1", "n3"}
    earlier = replica(sim, "n2").member

    sim.seen("n3", "n2")  # n3 adds n2 to its record, which wins
    sim.brokers["n3"].after_input()
    before = sim.delivered.copy()
    sim.move("n3", "n1")  # that record: n1's right-hand neighbour is now n2
    sim.move("n1", "n2")  # n1's catch-up, to n2's recovered master's member
    assert sim.delivered - before == {("n3", "n1", "meta"): 1, ("n1", "n2", "gm"): 1}
    assert replica(sim, "n2").member is earlier and replica(sim, "n2").is_master
    sim.seen("n1", "n2")
    sim.pump()

    master = replica(sim, "n3")
    assert [m.split("/")[0] for m in master.record.view.members] == ["n3", "n1", "n2"]
    assert replica(sim, "n2").member is not earlier  # started over as a joiner
    publish(sim, "n3", 2)
    assert [held(sim, node) for node in ("n3", "n1", "n2")] == [5, 2, 2]

    coordinator = sim.coordinators["n3"]
    coordinator.sync(master)
    while coordinator.sync_step():
        sim.pump()
    sim.pump()
    assert [held(sim, node) for node in ("n1", "n2")] == [5, 5]
    assert set(master.record.synced) == {replica(sim, "n1").me, replica(sim, "n2").me}
