"""A queue deleted in the same read as the metadata that settles its recovered master.

n1 declares ha.z and dies before its record leaves; restarted, it recovers ha.z as a
provisional master and waits for its peers' metadata. n2, which learned of ha.z from
n1's, asks n1 to delete it; n2's metadata and the delete reach n1 in one read (a live
node handles a whole read before its after_input). The metadata settles ha.z, announced
with n2 and n3 as empty mirrors, synchronised once the read is handled (or by the sync
an automatic policy starts); the delete comes in between. That synchronisation used to
be written anyway, a record of the deleted queue newer than its tombstone: n2 and n3
took the queue back, n1 did not, and they disagreed for good.
"""

from __future__ import annotations

import pytest
from pamqp import commands

from cluster.ha.record import queue_key
from tests.cluster.simcluster import SimCluster


@pytest.mark.parametrize("sync_mode", ["manual", "automatic"])
def test_a_queue_deleted_as_its_recovered_master_settles_stays_deleted(
    sync_mode: str,
) -> None:
    sim = SimCluster(["n1", "n2", "n3"], 13)
    sim.set_policy("n1", "^ha", {"ha-mode": "all", "ha-sync-mode": sync_mode})
    deleter = sim.client("n2")
    declarer = sim.client("n1")
    declarer.send(1, commands.Queue.Declare(queue="ha.z", durable=True))
    sim.kill("n1")  # before its record left
    sim.restart("n1", pump=False)
    before = sim.delivered.copy()
    sim.move("n1", "n2")  # n1's metadata: n2 learns of ha.z, mastered by n1
    sim.move("n3", "n1")  # n3's: n1 now waits for n2's only
    deleter.send(1, commands.Queue.Delete(queue="ha.z"))  # a call to n1
    sim.move("n2", "n1", count=2)  # n2's metadata and the delete, in one read
    assert sim.delivered - before == {("n1", "n2", "meta"): 1, ("n3", "n1", "meta"): 1,
                                      ("n2", "n1", "meta"): 1, ("n2", "n1", "q.call"): 1}
    coordinator = sim.coordinators["n1"]
    while coordinator.sync_step():  # as n1's shell runs a sync, a batch at a time
        sim.pump()
    sim.pump()

    assert any(isinstance(m, commands.Queue.DeleteOk) for m in deleter.methods())
    nodes = ("n1", "n2", "n3")
    assert {n: "ha.z" in sim.brokers[n].vhosts["/"].queues for n in nodes} == dict.fromkeys(
        nodes, False)
    assert {n: sim.coordinators[n].meta.get(queue_key("/", "ha.z")) for n in nodes} == (
        dict.fromkeys(nodes))
