"""Consumers across nodes: a channel's consumer on a queue whose master is anywhere.

A channel's consumer lives with its channel, in its queue's `ClusterQueue` on the
channel's node; the queue's master serves it through a `ConsumerProxy` named by
`consumer_key`, which has the credit the consumer's node granted and hands what it
takes back to that node. `RemoteConsumers` is both ends on one node: what its channels'
consumers tell masters elsewhere (consume, cancel, credit, acks and requeues), and what
masters here deliver to other nodes' consumers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cluster.core.hosted import ClientConsumer
from cluster.core.queue import Entry, Queue
from cluster.ha.messages import (
    Cancel,
    Consume,
    ConsumerGone,
    Credit,
    Deliver,
    QueueRef,
    Settle,
)
from cluster.ha.outbox import Outbox

if TYPE_CHECKING:
    from cluster.ha.queue import ClusterQueue


def consumer_key(consumer: ClientConsumer) -> str:
    """Its name across the cluster: its channel's (`ClientChannel.ref`), then its tag."""
    return f"{consumer.owner}|{consumer.tag}"


def owner_of_key(key: str) -> str:
    """The channel of the consumer named ``key`` (`consumer_key`)."""
    return key.rpartition("|")[0]


class ConsumerProxy:
    """A consumer of some node's channel, as the master's queue serves it."""

    def __init__(self, queue: ClusterQueue, key: str, node: str, owner: str, no_ack: bool,
                 exclusive: bool) -> None:
        self.cluster_queue = queue
        self.tag = key
        self.node = node
        self.owner = owner
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.credit = 0

    def can_take(self) -> bool:
        return self.credit > 0

    def take(self, queue: Queue, entry: Entry, redelivered: bool) -> None:
        self.credit -= 1
        self.cluster_queue.coordinator.consumers.deliver(self, entry, redelivered)

    def queue_deleted(self) -> None:
        self.cluster_queue.coordinator.consumers.proxy_gone(self)


class RemoteConsumers:
    """This node's channels' consumers, by key, and the traffic between them and their
    queues' masters."""

    def __init__(self, node: str, outbox: Outbox,
                 find: Callable[[QueueRef], ClusterQueue | None]) -> None:
        self.node = node
        self.outbox = outbox
        self.find = find
        self._consumers: dict[str, tuple[ClusterQueue, ClientConsumer]] = {}

    # -- this node's channels ---------------------------------------------------------

    def consume(self, queue: ClusterQueue, consumer: ClientConsumer) -> None:
        key = consumer_key(consumer)
        self._consumers[key] = (queue, consumer)
        if queue.is_master:
            queue.add_proxy(key, self.node, consumer.owner, consumer.no_ack, consumer.exclusive)
        else:
            self.outbox.send(queue.master_node, Consume(
                queue.ref, key, consumer.owner, consumer.no_ack, consumer.exclusive))

    def cancel(self, queue: ClusterQueue, consumer: ClientConsumer) -> None:
        key = consumer_key(consumer)
        self.forget(consumer)
        if queue.is_master:
            queue.remove_proxy(key)
        else:
            self.outbox.send(queue.master_node, Cancel(queue.ref, key))

    def forget(self, consumer: ClientConsumer) -> None:
        self._consumers.pop(consumer_key(consumer), None)

    def credit(self, queue: ClusterQueue, consumer: ClientConsumer, more: int) -> None:
        key = consumer_key(consumer)
        if queue.is_master:
            proxy = queue.proxies.get(key)
            if proxy is not None:
                proxy.credit += more
                queue.copy.dispatch()  # type: ignore[union-attr]
        else:
            self.outbox.send(queue.master_node, Credit(queue.ref, key, more))

    def settle(self, queue: ClusterQueue, seqs: list[int], owner: str | None,
               requeue: bool) -> None:
        self.outbox.send(queue.master_node, Settle(queue.ref, tuple(seqs), owner, requeue))

    def delivered(self, peer: str, deliver: Deliver) -> None:
        """A delivery from the queue's master, handed to its consumer. One from a node
        that is no longer the master (read late, after this node heard of the new one)
        is dropped: the new master put back everything delivered before it took over,
        and the consumer's credit is the new master's now, which this delivery did not
        use (counted against it, every such delivery would let the consumer hold one
        more than its prefetch for as long as the new master lasts)."""
        queue = self.find(deliver.queue)
        if queue is not None and peer == queue.master_node:
            self._hand_over(queue, deliver.key, Entry(deliver.seq, deliver.message),
                            deliver.redelivered)

    def _hand_over(self, queue: ClusterQueue, key: str, entry: Entry,
                   redelivered: bool) -> None:
        found = self._consumers.get(key)
        if found is None or found[1].channel.closing:
            # Cancelled meanwhile: the message goes back for someone else.
            queue.requeue([entry.seq], owner_of_key(key))
            return
        consumer = found[1]
        queue.delivered(consumer)
        consumer.deliver(queue, entry, redelivered)
        queue.grant(consumer)

    def gone(self, peer: str, gone: ConsumerGone) -> None:
        self._cancelled(gone.key)

    def _cancelled(self, key: str) -> None:
        found = self._consumers.pop(key, None)
        if found is not None:
            queue, consumer = found
            if consumer in queue.consumers:
                queue.consumers.remove(consumer)
            consumer.queue_deleted()  # deleted on the master, which told us

    # -- the master's side -------------------------------------------------------------

    def deliver(self, proxy: ConsumerProxy, entry: Entry, redelivered: bool) -> None:
        queue = proxy.cluster_queue
        if proxy.node == self.node:
            self._hand_over(queue, proxy.tag, entry, redelivered)
        else:
            self.outbox.send(proxy.node, Deliver(queue.ref, proxy.tag, entry.seq, redelivered,
                                                 entry.message))

    def proxy_gone(self, proxy: ConsumerProxy) -> None:
        if proxy.node == self.node:
            self._cancelled(proxy.tag)
        else:
            self.outbox.send(proxy.node, ConsumerGone(proxy.tag))

    def at_master(self, peer: str, message: Consume | Cancel | Credit | Settle) -> None:
        """A consumer's traffic from ``peer`` for a queue mastered here."""
        queue = self.find(message.queue)
        if queue is None or not queue.is_master:
            return
        copy = queue.copy
        assert copy is not None
        if isinstance(message, Consume):
            queue.add_proxy(message.key, peer, message.owner, message.no_ack, message.exclusive)
        elif isinstance(message, Cancel):
            queue.remove_proxy(message.key)
        elif isinstance(message, Credit):
            proxy = queue.proxies.get(message.key)
            if proxy is not None:
                proxy.credit += message.more
        elif message.requeue:
            copy.requeue(message.seqs, message.owner)
        else:
            copy.settle(message.seqs, message.owner)
        copy.dispatch()
