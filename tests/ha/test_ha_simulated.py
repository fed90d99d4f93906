"""Mirrored queues on a simulated network: whatever the interleaving of messages and
wherever the master dies, no confirmed message is lost while a synchronised mirror
survives, repeats carry redelivered=true, and the queue is reachable from every node."""

from __future__ import annotations

import datetime
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pamqp import commands

from cluster.core.policy import Policy
from cluster.mgmt.shapes import queue_json
from tests.amqp.memory_client import MemoryClient, publish_frames
from tests.cluster.simcluster import SimCluster
from tests.examples import examples


def confirmed_tags(client: MemoryClient, settled: int = 0) -> set[int]:
    """Tags acked in the methods not read yet, where every tag up to ``settled`` was
    acked or nacked in methods read before (a multiple ack does not cover them again)."""
    tags: set[int] = set()
    last = settled
    for method in client.methods():
        if isinstance(method, commands.Basic.Ack):
            covered = range(last + 1, method.delivery_tag + 1) if method.multiple else [
                method.delivery_tag]
            tags.update(covered)
            last = max(last, method.delivery_tag)
        elif isinstance(method, commands.Basic.Nack):
            last = max(last, method.delivery_tag)
    return tags


def drain(sim: SimCluster, node: str) -> list[tuple[bytes, bool]]:
    """Every message left, by basic.get with no-ack on ``node``."""
    client = sim.client(node)
    out = []
    while True:
        client.send(1, commands.Basic.Get(queue="ha.q", no_ack=True))
        sim.pump()
        frames = client.drain()
        answers = commands.Basic.GetOk | commands.Basic.GetEmpty
        methods = [v for _, v in frames if isinstance(v, answers)]
        assert methods, f"no answer to basic.get on {node}: {frames}"
        if isinstance(methods[0], commands.Basic.GetEmpty):
            return out
        body = frames[-1][1].value
        out.append((body, methods[0].redelivered))


def mirrored_queue(seed: int, *breaks: str) -> SimCluster:
    sim = SimCluster(["n1", "n2", "n3"], seed, breaks)
    sim.set_policy("n1", "^ha", {"ha-mode": "all"})
    declarer = sim.client("n1")
    declarer.send(1, commands.Queue.Declare(queue="ha.q", durable=True))
    sim.pump()
    return sim


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 10_000), kill_after=st.integers(0, 60),
       interleave=st.integers(0, 6))
def test_confirmed_publishes_survive_the_master_dying_anywhere(
    seed: int, kill_after: int, interleave: int,
) -> None:
    sim = mirrored_queue(seed)
    publisher = sim.client("n2")
    publisher.send(1, commands.Confirm.Select())
    publisher.methods()
    for i in range(80):
        if i == kill_after:
            sim.kill("n1")
        publisher.publish(1, f"m{i}".encode(), "ha.q", persistent=True)
        for _ in range(interleave):
            sim.step()
    sim.pump()
    confirmed = {f"m{tag - 1}".encode() for tag in confirmed_tags(publisher)}
    assert len(confirmed) == 80  # a mirror survived: every publish is confirmed
    seen = drain(sim, "n3")
    bodies = [body for body, _ in seen]
    assert sorted(bodies) == sorted(set(bodies)), "a message was delivered twice"
    assert confirmed <= set(bodies)
    assert bodies == sorted(bodies, key=lambda b: int(b[1:])), "publish order was lost"


@settings(max_examples=examples(40), deadline=None)
@given(seed=st.integers(0, 10_000), kill_after=st.integers(1, 60),
       interleave=st.integers(0, 6))
def test_what_the_master_confirmed_to_its_own_clients_survives_its_death(
    seed: int, kill_after: int, interleave: int,
) -> None:
    """A publisher connected to the master loses its connection with it; whatever it
    was confirmed must be on the mirrors, because confirms wait for every replica."""
    sim = mirrored_queue(seed)
    publisher = sim.client("n1")
    publisher.send(1, commands.Confirm.Select())
    publisher.methods()
    for i in range(kill_after):
        publisher.publish(1, f"m{i}".encode(), "ha.q", persistent=True)
        for _ in range(interleave):
            sim.step()
    confirmed = {f"m{tag - 1}".encode() for tag in confirmed_tags(publisher)}
    sim.kill("n1")
    sim.pump()
    bodies = [body for body, _ in drain(sim, "n3")]
    assert confirmed <= set(bodies)


def confirmed_then_lost(seed: int, *breaks: str) -> set[bytes]:
    """Publish through the master, kill it, and return what it had confirmed that the
    survivors do not hold."""
    sim = mirrored_queue(seed, *breaks)
    publisher = sim.client("n1")
    publisher.send(1, commands.Confirm.Select())
    publisher.methods()
    for i in range(20):
        publisher.publish(1, f"m{i}".encode(), "ha.q", persistent=True)
    confirmed = {f"m{tag - 1}".encode() for tag in confirmed_tags(publisher)}
    sim.kill("n1")
    sim.pump()
    return confirmed - {body for body, _ in drain(sim, "n3")}


def test_the_simulation_catches_confirms_that_do_not_wait_for_the_mirrors() -> None:
    """The same run on nodes broken to confirm before the mirrors have a message
    (``--break early-confirm``) loses confirmed messages; correct nodes lose none."""
    assert confirmed_then_lost(1, "early-confirm")
    assert not confirmed_then_lost(1)


@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 10_000), kill_after=st.integers(1, 30))
def test_unacknowledged_messages_come_back_redelivered_after_promotion(
    seed: int, kill_after: int,
) -> None:
    sim = mirrored_queue(seed)
    publisher = sim.client("n2")
    for i in range(40):
        publisher.publish(1, f"m{i}".encode(), "ha.q")
    sim.pump()
    consumer = sim.client("n3")
    consumer.send(1, commands.Basic.Consume(queue="ha.q", consumer_tag="c"))
    sim.pump()
    delivered = consumer.deliveries()
    assert [body for _, body in delivered] == [f"m{i}".encode() for i in range(40)]
    acked = delivered[:kill_after]
    for method, _ in acked:
        consumer.send(1, commands.Basic.Ack(delivery_tag=method.delivery_tag))
    sim.pump()
    sim.kill("n1")
    sim.pump()
    again = consumer.deliveries()
    assert all(method.redelivered for method, _ in again)
    assert {body for _, body in again} == {body for _, body in delivered[kill_after:]}


@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 10_000), steps=st.integers(0, 40))
def test_a_queue_declared_again_is_a_new_group_whatever_was_in_flight(
    seed: int, steps: int,
) -> None:
    """GM messages of a deleted queue still travelling must not reach the group of the
    same name declared again (the same members, but a new declaration)."""
    sim = mirrored_queue(seed)
    publisher = sim.client("n2")
    admin = sim.client("n1")
    publisher.send(1, commands.Confirm.Select())
    for i in range(10):
        publisher.publish(1, f"old{i}".encode(), "ha.q", persistent=True)
    for _ in range(steps):
        sim.step()
    admin.send(1, commands.Queue.Delete(queue="ha.q"))
    admin.send(1, commands.Queue.Declare(queue="ha.q", durable=True))
    sim.pump()
    assert confirmed_tags(publisher) == set(range(1, 11))  # deleted with their queue
    for i in range(20):
        publisher.publish(1, f"new{i}".encode(), "ha.q", persistent=True)
    sim.pump()
    assert confirmed_tags(publisher, settled=10) == set(range(11, 31))
    bodies = [body for body, _ in drain(sim, "n3")]
    assert bodies == [f"new{i}".encode() for i in range(20)]  # nothing of the old queue


@pytest.mark.parametrize("node", ["n1", "n2"])  # the master's node, a mirror's
def test_a_batch_of_publishes_travels_as_one_envelope_per_hop_and_one_confirm_per_replica(
    node: str,
) -> None:
    sim = mirrored_queue(seed=3)
    publisher = sim.client(node)
    publisher.send(1, commands.Confirm.Select())
    sim.pump()
    publisher.methods()
    before = sim.delivered.copy()
    # One read of the publisher's socket: twenty publishes.
    publisher.send_raw(b"".join(publish_frames(1, f"m{i}".encode(), "ha.q")
                                for i in range(20)))
    sim.pump()
    assert confirmed_tags(publisher) == set(range(1, 21))
    sent = sim.delivered - before
    others = [n for n in sim.brokers if n != node]
    assert [sent[(node, other, "q.pub")] for other in others] == [1, 1]
    # The ring carries the batch once round and its ack once more.
    gm = {(a, b): n for (a, b, kind), n in sent.items() if kind == "gm"}
    assert sorted(gm.values()) == [2, 2, 2], gm
    assert [sent[(other, node, "q.confirm")] for other in others] == [1, 1]
    assert [body for body, _ in drain(sim, "n3")] == [f"m{i}".encode() for i in range(20)]


def test_publishes_after_another_request_to_the_master_do_not_join_an_earlier_batch() -> None:
    """Publishes, a purge through another connection, more publishes, all before the
    node sends anything: the purge must take exactly the publishes made before it."""
    sim = mirrored_queue(seed=6)
    publisher, purger = sim.client("n2"), sim.client("n2")
    for i in range(5):
        publisher.publish(1, f"before{i}".encode(), "ha.q")
    purger.send(1, commands.Queue.Purge(queue="ha.q"))
    for i in range(5):
        publisher.publish(1, f"after{i}".encode(), "ha.q")
    sim.pump()
    purged = [m for m in purger.methods() if isinstance(m, commands.Queue.PurgeOk)]
    assert [m.message_count for m in purged] == [5]
    assert [body for body, _ in drain(sim, "n3")] == [f"after{i}".encode() for i in range(5)]


def test_a_policy_set_on_another_node_places_the_masters_mirrors() -> None:
    """The policy reaches the master as replicated metadata: it must place mirrors as
    if it had been asked itself, dropping one under exactly 2 and adding it back under
    all (as a new GM member: the old one is a dead member's alias). The mirror taken
    back replicates again: with the others dead it is promoted holding what was
    confirmed."""
    sim = mirrored_queue(21)
    master = sim.coordinators["n1"]

    def mirrors() -> list[str]:
        (queue,) = [q for q in master.queues() if q.name == "ha.q"]
        return sorted(member.split("/")[0] for member in queue.record.mirrors)

    assert mirrors() == ["n2", "n3"]
    sim.set_policy("n3", "^ha", {"ha-mode": "exactly", "ha-params": 2})
    assert len(mirrors()) == 1
    sim.set_policy("n2", "^ha", {"ha-mode": "all"})
    assert mirrors() == ["n2", "n3"]
    publisher = sim.client("n1")
    publisher.send(1, commands.Confirm.Select())
    publisher.methods()
    for i in range(4):
        publisher.publish(1, f"m{i}".encode(), "ha.q", persistent=True)
    sim.pump()
    assert confirmed_tags(publisher) == {1, 2, 3, 4}
    sim.kill("n1")
    sim.kill("n2")
    sim.pump()
    assert [body for body, _ in drain(sim, "n3")] == [b"m0", b"m1", b"m2", b"m3"]


def test_a_mirror_the_policy_drops_while_publishes_wait_for_it_holds_up_no_confirm() -> None:
    """The publisher's own node leaves the queue before the master ordered its
    publishes: that replica will never confirm them, and confirms go out in order, so
    waiting for it would hold up every later confirm of the channel."""
    sim = mirrored_queue(16)
    publisher = sim.client("n3")
    publisher.send(1, commands.Confirm.Select())
    publisher.methods()
    for i in range(5):
        publisher.publish(1, f"m{i}".encode(), "ha.q", persistent=True)
    sim.brokers["n1"].set_policy(Policy.create("/", "ha", "^ha", {
        "ha-mode": "nodes", "ha-params": ["n1", "n2"]}))
    sim.brokers["n1"].after_input()
    sim.pump()
    assert confirmed_tags(publisher) == {1, 2, 3, 4, 5}
    assert queue_json(sim.brokers["n1"], sim.brokers["n1"].vhosts["/"].queues["ha.q"])[
        "slave_nodes"] == ["n2"]


def test_after_a_promotion_the_new_master_is_not_listed_as_a_synchronised_mirror() -> None:
    sim = mirrored_queue(22)
    sim.kill("n1")
    sim.pump()
    (queue,) = [q for q in sim.coordinators["n2"].queues() if q.name == "ha.q"]
    shown = queue_json(sim.brokers["n2"], queue)
    assert shown["node"] == "n2"
    assert shown["slave_nodes"] == shown["synchronised_slave_nodes"] == ["n3"]


def test_a_metadata_write_lost_on_one_link_reaches_that_peer_through_another() -> None:
    """The delete's message from n1 to n2 is lost (a black-holed link, then n1 dies):
    n3 passes on what it learnt, so n2 drops the queue too and the nodes agree. (Had
    n2 seen n1 die first, its promotion would write the queue's record anew, newer than
    the delete: the window the relay leaves is its own latency.)"""
    sim = mirrored_queue(23)
    client = sim.client("n1")
    client.send(1, commands.Queue.Delete(queue="ha.q"))
    sim._collect()
    lost = [m for m in sim.links[("n1", "n2")] if b'"meta"' in m]
    assert lost, "the delete's metadata for n2"
    for message in lost:
        sim.links[("n1", "n2")].remove(message)
    sim.move("n1", "n3")
    sim.move("n3", "n2")  # what n3 passes on, before n1 dies
    sim.kill("n1")
    sim.pump()
    assert all("ha.q" not in sim.brokers[n].vhosts["/"].queues for n in ("n2", "n3"))


def test_a_mirror_synchronised_by_draining_during_its_sync_is_listed_once() -> None:
    """n3 rejoins while m0 is delivered but unacknowledged; the automatic sync starts,
    and the ack drains everything older than n3's join before the sync's last batch has
    gone round: n3 is synchronised twice, once by each. The record listed it twice, and
    the management API showed n3 twice among the synchronised mirrors
    (scripts/measure-peer-health starvation waited for ["n1", "n2"], got
    ["n1", "n2", "n2"])."""
    sim = mirrored_queue(24)
    sim.set_policy("n1", "^ha", {"ha-mode": "all", "ha-sync-mode": "automatic"})
    sim.kill("n3")
    sim.pump()
    consumer = sim.client("n1")
    consumer.publish(1, b"m0", "ha.q", persistent=True)
    consumer.send(1, commands.Basic.Consume(queue="ha.q", consumer_tag="c"))
    sim.pump()
    ((method, _),) = consumer.deliveries()
    sim.restart("n3")  # its sync starts: the master is paused until it is done
    coordinator = sim.coordinators["n1"]
    assert coordinator.syncs.jobs
    consumer.send(1, commands.Basic.Ack(delivery_tag=method.delivery_tag))
    sim.pump()  # nothing older than n3's join is left: synchronised by draining
    while coordinator.sync_step():  # as n1's shell runs the sync, a batch at a time
        sim.pump()
    sim.pump()
    (queue,) = [q for q in coordinator.queues() if q.name == "ha.q"]
    assert len(queue.record.synced) == len(set(queue.record.synced))
    assert queue_json(sim.brokers["n1"], queue)["synchronised_slave_nodes"] == ["n2", "n3"]


def test_arguments_of_types_json_lacks_reach_every_node_as_they_were_declared() -> None:
    """A durable queue and exchange whose arguments hold a decimal, bytes, a byte array
    and a timestamp: every node has them, with their types (the metadata was JSON, which
    had no form for them, and the declare failed with 541)."""
    sim = mirrored_queue(5)
    arguments = {"x-decimal": Decimal("2.5"), "x-bytes": bytearray(b"\x00\xff"),
                 "x-when": datetime.datetime(2026, 11, 27, tzinfo=datetime.UTC)}
    client = sim.client("n1")
    client.send(1, commands.Queue.Declare(queue="ha.typed", durable=True,
                                          arguments=arguments))
    client.send(1, commands.Exchange.Declare(exchange="typed", exchange_type="direct",
                                             durable=True, arguments=arguments))
    sim.pump()
    assert [type(m).__name__ for m in client.methods()] == ["DeclareOk", "DeclareOk"]
    for node in ("n2", "n3"):
        vhost = sim.brokers[node].vhosts["/"]
        for declared in (vhost.queues["ha.typed"], vhost.exchanges["typed"]):
            assert {k: (type(v), v) for k, v in declared.arguments.items()} == {
                k: (type(v), v) for k, v in arguments.items()}
