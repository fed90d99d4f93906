"""basic.consume of a mirrored queue counts every node's consumers for exclusivity: a
node whose queue is mastered elsewhere asks the master (`AskConsume`), whose copy holds
a proxy of each node's consumer, and registers the consumer only once it is granted.

ha.q is mastered on n1 and mirrored on n2 and n3 (`mirrored_queue`)."""

from __future__ import annotations

from pamqp import commands

from cluster.ha.queue import ClusterQueue
from tests.amqp.memory_client import MemoryClient
from tests.cluster.simcluster import SimCluster
from tests.ha.test_ha_simulated import mirrored_queue

IN_EXCLUSIVE_USE = "ACCESS_REFUSED - queue 'ha.q' in vhost '/' in exclusive use"


def consume(sim: SimCluster, node: str, tag: str, *, exclusive: bool = False,
            pump: bool = True) -> MemoryClient:
    client = sim.client(node)
    client.send(1, commands.Basic.Consume(queue="ha.q", consumer_tag=tag,
                                          exclusive=exclusive))
    if pump:
        sim.pump()
    return client


def refusal(client: MemoryClient) -> tuple[int, str] | None:
    closes = [m for m in client.methods() if isinstance(m, commands.Channel.Close)]
    return (closes[0].reply_code, closes[0].reply_text) if closes else None


def cluster_queue(sim: SimCluster, node: str) -> ClusterQueue:
    queue = sim.brokers[node].vhosts["/"].queues["ha.q"]
    assert isinstance(queue, ClusterQueue)
    return queue


def test_an_exclusive_consumer_on_one_node_refuses_consumers_on_others() -> None:
    sim = mirrored_queue(1)
    consume(sim, "n1", "x", exclusive=True)
    local, remote = consume(sim, "n1", "a"), consume(sim, "n2", "b")
    assert refusal(local) == refusal(remote) == (403, IN_EXCLUSIVE_USE)
    assert list(cluster_queue(sim, "n1").proxies) != [] and cluster_queue(
        sim, "n2").consumers == []


def test_an_exclusive_consume_is_refused_beside_a_consumer_on_another_node() -> None:
    sim = mirrored_queue(2)
    consume(sim, "n3", "plain")
    assert refusal(consume(sim, "n2", "x", exclusive=True)) == (403, IN_EXCLUSIVE_USE)


def test_a_plain_consume_beside_another_nodes_plain_consumer_joins_and_is_served() -> None:
    sim = mirrored_queue(3)
    consume(sim, "n3", "first")
    client = consume(sim, "n2", "second")
    assert [m.consumer_tag for m in client.methods()
            if isinstance(m, commands.Basic.ConsumeOk)] == ["second"]
    assert sorted(key.rpartition("|")[2] for key in cluster_queue(sim, "n1").proxies) == [
        "first", "second"]


def test_with_the_masters_node_down_a_consumer_joins_as_in_any_failover() -> None:
    sim = mirrored_queue(4)
    sim.kill("n1")
    client = consume(sim, "n2", "c", exclusive=True)
    assert any(isinstance(m, commands.Basic.ConsumeOk) for m in client.methods())
    assert [c.tag for c in cluster_queue(sim, "n2").consumers] == ["c"]


def test_a_connection_lost_while_its_consume_is_asked_leaves_no_consumer() -> None:
    sim = mirrored_queue(5)
    client = consume(sim, "n2", "c", pump=False)
    client.connection.connection_lost()
    sim.pump()
    assert cluster_queue(sim, "n2").consumers == []
    assert cluster_queue(sim, "n1").proxies == {}


def test_a_queue_deleted_before_the_masters_grant_arrives_cancels_the_consumer() -> None:
    """n1 grants n2's consume, then deletes the queue for n3; the delete, relayed by n3,
    reaches n2 before the grant: the consumer joined before the delete, so it is
    cancelled, not left on a queue that is gone."""
    sim = mirrored_queue(6)
    deleter = sim.client("n3")
    client = consume(sim, "n2", "c", pump=False)
    deleter.send(1, commands.Queue.Delete(queue="ha.q"))
    sim.move("n2", "n1")  # the consume's call: granted
    sim.move("n3", "n1")  # the delete's
    while sim.busy() != [("n1", "n2")]:  # all but n1's answer and delete to n2
        sim.move(*next(pair for pair in sim.busy() if pair != ("n1", "n2")))
    assert "ha.q" not in sim.brokers["n2"].vhosts["/"].queues
    sim.pump()
    assert [(type(m).__name__, m.consumer_tag) for m in client.methods()] == [
        ("ConsumeOk", "c"), ("Cancel", "c")]
    assert client.connection.channels[1].consumers == {}
