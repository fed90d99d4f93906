"""A delivery from a master that has been replaced, read late by the consumer's node
(its link from the old master slow, as under gauntlet-late-peer), must not be handed to
the consumer: the new master gave back everything the old one had delivered, and the
consumer's credit is the new master's now. Handed over, each such delivery let the
consumer hold one more than its prefetch for as long as the new master lasted."""

from __future__ import annotations

from pamqp import commands

from tests.amqp.memory_client import MemoryClient
from tests.cluster.simcluster import SimCluster
from tests.ha.test_ha_simulated import mirrored_queue

PREFETCH = 3


def pump_but(sim: SimCluster, held: tuple[str, str]) -> None:
    """Everything in flight moves but what is on the ``held`` link."""
    while busy := [link for link in sim.busy() if link != held]:
        sim.move(*sim.rng.choice(busy))


def ack(consumer: MemoryClient, tags: list[int]) -> None:
    for tag in tags:
        consumer.send(1, commands.Basic.Ack(delivery_tag=tag))


def received(consumer: MemoryClient) -> list[int]:
    return [method.delivery_tag for method, _ in consumer.deliveries()]


def test_a_delivery_read_late_from_a_replaced_master_is_dropped() -> None:
    sim = mirrored_queue(21)
    publisher = sim.client("n2")
    for i in range(20):
        publisher.publish(1, f"m{i}".encode(), "ha.q", persistent=True)
    sim.pump()
    consumer = sim.client("n3")
    consumer.send(1, commands.Basic.Qos(prefetch_count=PREFETCH))
    consumer.send(1, commands.Basic.Consume(queue="ha.q", consumer_tag="c"))
    sim.pump()
    # The consumer answers one delivery; the master (n1) sends the next, which n3
    # has not read yet when n1 dies. n2 sees it die and takes over; n3, still reading
    # n1's link, is told by n2 and moves its consumer there first.
    held = received(consumer)
    assert len(held) == PREFETCH
    ack(consumer, held[:1])
    held = held[1:]
    pump_but(sim, ("n1", "n3"))
    sim.alive.discard("n1")
    for link, queue in sim.links.items():
        if "n1" in link and link != ("n1", "n3"):
            queue.clear()
    sim.coordinators["n2"].peer_down("n1")
    sim.brokers["n2"].after_input()
    pump_but(sim, ("n1", "n3"))
    stale = len(sim.links[("n1", "n3")])
    assert stale >= 1
    sim.move("n1", "n3", stale)
    sim.pump()
    held += received(consumer)
    assert len(held) <= PREFETCH
    # Its window answered, the new master sends no more than the prefetch.
    ack(consumer, held)
    sim.pump()
    assert len(received(consumer)) == PREFETCH
