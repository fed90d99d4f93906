"""A crash of the whole cluster right after a mirror rejoined: whose copy is the queue.

n3 rejoins ha.q empty (an unsynchronised mirror) and holds only what was published
since; n1 (the master) and n2 (a synchronised mirror) hold everything. Then every node
loses power at once and all of them start together, each recovering its copy as a
provisional master. Whichever app starts first must not make its copy the queue's: a
node waits for the peers whose copy comes before its own in the succession it saved
(master, synchronised mirrors, the rest), and among recovered copies the earliest in
the succession wins.
"""

from __future__ import annotations

from itertools import permutations
from typing import Any

import pytest

from cluster.core.broker import BrokerConfig
from cluster.core.policy import Policy
from cluster.core.queue import Queue
from cluster.ha.coordinator import Coordinator
from cluster.session.broker import Broker
from tests.cluster.simcluster import SimCluster
from tests.cluster.test_breakages import held, master_node, publish
from tests.ha.test_ha_simulated import mirrored_queue


def with_partial_mirror(seed: int) -> SimCluster:
    """ha.q on n1 with 7 messages; n2 holds all 7 (synchronised), n3 only the last 2."""
    sim = mirrored_queue(seed)
    sim.kill("n3")
    publish(sim, "n1", 5)
    sim.restart("n3")
    publish(sim, "n1", 2)
    assert [held(sim, n) for n in ("n1", "n2", "n3")] == [7, 7, 2]
    assert sim.coordinators["n1"].successions()["/"]["ha.q"] == ["n1", "n2", "n3"]
    return sim


def crash_and_start_together(sim: SimCluster, order: tuple[str, ...]) -> None:
    """Every node dies at once; they start in ``order``, each seeing the ones after it
    up with their apps still to start, as the boot gate lets them all go together."""
    sim.power_loss()
    for index, node in enumerate(order):
        sim.restart(node, starting=order[index + 1:])
        # The policy comes back as a real node reloads its saved definitions.
        sim.brokers[node].set_policy(Policy.create("/", "ha", "^ha", {"ha-mode": "all"}))
        sim.pump()


@pytest.mark.parametrize("order", list(permutations(("n1", "n2", "n3"))))
def test_the_masters_copy_survives_a_crash_of_the_whole_cluster_whoever_starts_first(
    order: tuple[str, ...],
) -> None:
    for seed in range(5):
        sim = with_partial_mirror(seed)
        crash_and_start_together(sim, order)
        assert {master_node(sim, n) for n in ("n1", "n2", "n3")} == {"n1"}, (seed, order)
        assert held(sim, "n1") == 7, (seed, order)


def test_without_the_master_the_synchronised_mirrors_copy_beats_the_partial_one() -> None:
    for seed in range(5):
        sim = with_partial_mirror(seed)
        sim.power_loss()  # and n1 never comes back
        sim.restart("n3", starting=("n2",))
        assert held(sim, "n3") == 2 and sim.coordinators["n3"].awaiting == {"n2"}
        sim.restart("n2")
        sim.brokers["n2"].set_policy(Policy.create("/", "ha", "^ha", {"ha-mode": "all"}))
        sim.pump()
        assert master_node(sim, "n3") == master_node(sim, "n2") == "n2"
        assert held(sim, "n2") == 7, seed


def test_a_node_waits_for_no_peer_whose_copy_comes_after_its_own() -> None:
    sim = with_partial_mirror(0)
    sim.power_loss()
    sim.restart("n1", starting=("n2", "n3"))
    assert sim.coordinators["n1"].awaiting == set()
    assert held(sim, "n1") == 7


def test_the_definitions_file_keeps_the_succession_until_a_coordinator_saves_anew() -> None:
    saved: list[dict[str, Any]] = []
    broker = Broker(BrokerConfig(node_name="n3"), save_definitions=saved.append)
    broker.load_definitions({"successions": {"/": {"ha.q": ["n1", "n2", "n3"]}}})
    broker.save_definitions()  # before its coordinator exists
    assert saved[-1]["successions"] == {"/": {"ha.q": ["n1", "n2", "n3"]}}
    coordinator = Coordinator(broker, "n3", "i1", ["n1", "n2"])
    copy = Queue("/", "ha.q", durable=True)
    broker.vhosts["/"].add_queue(coordinator.restored(copy, ["n1", "n2", "n3"]))
    broker.save_definitions()  # still only our claim: the saved succession stays
    assert saved[-1]["successions"] == {"/": {"ha.q": ["n1", "n2", "n3"]}}
    coordinator.stop_waiting()  # nobody else has it: ours, written, and saved at once
    assert saved[-1]["successions"] == {"/": {"ha.q": ["n3"]}}
