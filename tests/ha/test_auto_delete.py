"""An auto-delete mirrored queue goes when its last consumer goes, on whichever node that
consumer was (RabbitMQ's rule), not when one node's consumers are all gone."""

from __future__ import annotations

import pytest
from pamqp import commands

from tests.cluster.simcluster import SimCluster


def queue_on(sim: SimCluster) -> dict[str, bool]:
    return {node: "ad.q" in broker.vhosts["/"].queues for node, broker in sim.brokers.items()}


@pytest.mark.parametrize("first", ["n1", "n2"])
def test_the_queue_goes_with_its_last_consumer_on_any_node(first: str) -> None:
    """ad.q mastered on n1 and mirrored on all: a consumer on n1 and one on n2. Either
    one cancelled leaves the queue on every node; the other cancelled too, it is gone
    from every node."""
    sim = SimCluster(["n1", "n2", "n3"], 3)
    sim.set_policy("n1", "^ad", {"ha-mode": "all"})
    sim.client("n1").send(1, commands.Queue.Declare(queue="ad.q", durable=True,
                                                     auto_delete=True))
    sim.pump()
    clients = {node: sim.client(node) for node in ("n1", "n2")}
    for node, client in clients.items():
        client.send(1, commands.Basic.Consume(queue="ad.q", consumer_tag=node))
    sim.pump()
    assert queue_on(sim) == {"n1": True, "n2": True, "n3": True}
    clients[first].send(1, commands.Basic.Cancel(consumer_tag=first))
    sim.pump()
    assert queue_on(sim) == {"n1": True, "n2": True, "n3": True}
    last = "n2" if first == "n1" else "n1"
    clients[last].send(1, commands.Basic.Cancel(consumer_tag=last))
    sim.pump()
    assert queue_on(sim) == {"n1": False, "n2": False, "n3": False}


def test_the_queue_goes_when_the_node_of_its_last_consumer_dies() -> None:
    """The consumer's node gone, its consumer is gone with it: the master deletes the
    queue."""
    sim = SimCluster(["n1", "n2", "n3"], 4)
    sim.set_policy("n1", "^ad", {"ha-mode": "all"})
    sim.client("n1").send(1, commands.Queue.Declare(queue="ad.q", durable=True,
                                                     auto_delete=True))
    sim.pump()
    sim.client("n3").send(1, commands.Basic.Consume(queue="ad.q", consumer_tag="c"))
    sim.pump()
    sim.kill("n3")
    sim.pump()
    assert {n: v for n, v in queue_on(sim).items() if n != "n3"} == {"n1": False, "n2": False}
