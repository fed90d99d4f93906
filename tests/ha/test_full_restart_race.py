"""Full-cluster restarts whose racing queue records cost a replica its GM group.

Every node's app stops at once (a pause_minority pause of the whole cluster) and each
recovers ha.q from its store as a provisional master with a uid of its own. Once a
node's wait for its peers' metadata is over it announces its record, and the records
race: one wins everywhere, and every replica of a losing one must start over in the
winner's group, as a joiner that asks its left-hand neighbour for a catch-up (gm.ask).
"""

from __future__ import annotations

import random
from itertools import permutations

from pamqp import commands

from cluster.core.policy import Policy
from tests.amqp.memory_client import MemoryClient
from tests.cluster.simcluster import SimCluster
from tests.cluster.test_breakages import confirmed_tags, held, publish, replica
from tests.ha.test_ha_simulated import mirrored_queue


def restart_with_policy(sim: SimCluster, node: str, *, seen_by: list[str]) -> None:
    """Restart without moving a message; the policy comes back as a real node reloads
    its saved definitions (SimCluster.restart recovers only the queues)."""
    sim.restart(node, seen_by=seen_by, pump=False)
    sim.brokers[node].set_policy(Policy.create("/", "ha", "^ha", {"ha-mode": "all"}))


def restarted_apart(seed: int) -> tuple[SimCluster, list[str]]:
    """After a stop of every app (a pause_minority pause of the whole cluster), each
    node recovers ha.q as master, sees the others and, its wait over, announces its own
    record: each with its own uid, all with the same number of members. Nothing has
    moved between the nodes yet."""
    order = random.Random(seed).sample(["n1", "n2", "n3"], 3)
    sim = mirrored_queue(seed)
    publish(sim, "n1", 3)
    for node in order:
        sim.kill(node)
    for node in order:
        restart_with_policy(sim, node, seen_by=[])
    for later, earlier in permutations(order, 2):
        if order.index(earlier) < order.index(later):
            sim.seen(earlier, later)  # restart told each one of those before it
    for node in order:
        sim.coordinators[node].stop_waiting()  # timed out: announces its own record
        sim.brokers[node].after_input()
    return sim, order


def test_a_mirror_of_a_recovered_master_that_lost_starts_over_in_the_winners_group(
) -> None:
    """A node that mirrored a losing record when the winner's arrives must not keep its
    member of the losing group: the winner's view has the same version, so that member
    would take it as stale and keep the wrong neighbours, never deliver a broadcast,
    and every publish would wait forever for its confirm."""
    stalled = []
    for seed in range(40):
        sim, order = restarted_apart(seed)
        sim.pump()
        master = next(node for node in order if replica(sim, node).is_master)
        publisher = publish(sim, master, 2, confirm=True)
        uids = {replica(sim, node).record.uid for node in order}
        got = {node: held(sim, node) for node in order if node != master}
        if len(uids) != 1 or min(got.values()) < 2 or confirmed_tags(publisher) != {1, 2}:
            stalled.append((seed, order, master, got))
    assert stalled == []


def test_publishes_into_a_record_that_loses_are_answered() -> None:
    """A mirror of a recovered master's record takes publishes (with confirms) from its
    own clients; then the record loses to another. Those publishes wait for the losing
    record's replicas, which from then on confirm only under the winner's uid: they
    must stop waiting for them (confirmed or nacked), not wait forever."""
    outcomes = []
    for seed in range(40):
        sim, order = restarted_apart(seed)
        clients = {}
        for node in order:  # connected before anything moves between the nodes
            clients[node] = MemoryClient(sim.brokers[node])
            clients[node].handshake()
            clients[node].open_channel()
            clients[node].send(1, commands.Confirm.Select())
            clients[node].methods()
        while not (mirrors := [n for n in order if replica(sim, n).me is not None
                               and not replica(sim, n).is_master]):
            assert sim.step(), "no node came to mirror another's record"
        node = mirrors[0]
        losing = replica(sim, node).record.uid
        for i in range(2):
            clients[node].publish(1, f"late{i}".encode(), "ha.q", persistent=True)
        sim.brokers[node].after_input()
        sim.pump()
        if replica(sim, node).record.uid != losing:
            answers = [m.delivery_tag for m in clients[node].methods()
                       if isinstance(m, commands.Basic.Ack | commands.Basic.Nack)]
            outcomes.append(max(answers, default=0) == 2)
    assert outcomes and all(outcomes)
