"""A queue as a vhost holds it and channels use it, whichever kind it is.

On a single node every queue is a core `Queue`, which holds the messages. In a cluster
the vhost holds the cluster layer's queue (`cluster.ha`), whose master may be on
another node. Channels use both through `HostedQueue`: a request that needs the
messages (``basic.get``, purge, delete, declare's counts) is answered through a
`Reply`, at once by a queue whose messages are here, once the master has answered by
one whose master is elsewhere. `ClientConsumer` is a channel's consumer as such a
queue serves it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from cluster.core.clients import ClientChannel, Publishing
from cluster.core.queue import Consumer, Counts, Entry, GetAnswer, Reply


class ClientConsumer(Consumer, Protocol):
    """A consumer on a channel of this node: what a queue whose master may be elsewhere
    needs to grant it credit and to hand it what the master delivered."""

    @property
    def channel(self) -> ClientChannel: ...

    @property
    def prefetch(self) -> int: ...

    @property
    def unacked(self) -> int:
        """Deliveries it holds unacknowledged."""
        ...

    @property
    def arguments(self) -> dict[str, Any]: ...

    def deliver(self, queue: HostedQueue, entry: Entry, redelivered: bool) -> None:
        """A message for it from ``queue``, whose master took it on its behalf."""
        ...

    def failed_over(self) -> None:
        """Its queue's master changed and it is cancelled for it
        (``x-cancel-on-ha-failover``)."""
        ...


class HostedQueue(Protocol):
    """A queue as a vhost holds it and channels use it."""

    vhost: str
    name: str
    durable: bool
    auto_delete: bool
    arguments: dict[str, Any]
    exclusive_owner: int | None

    @property
    def consumers(self) -> Sequence[Consumer]:
        """Its consumers on this node's channels."""
        ...

    @property
    def ready_count(self) -> int:
        """Messages ready here (0 where this node holds none)."""
        ...

    @property
    def message_bytes(self) -> int:
        """Bodies held here, for the memory alarm."""
        ...

    def publish(self, publishing: Publishing) -> int:
        """Take a channel's publish; returns the store LSN a copy here waits for."""
        ...

    def dispatch(self) -> None:
        """Deliver what its consumers have credit for."""
        ...

    def add_consumer(self, consumer: ClientConsumer) -> None: ...

    def remove_consumer(self, consumer: ClientConsumer) -> bool:
        """True when the queue is auto-delete and that was its last consumer, on any
        node: the caller deletes it (a clustered queue's master decides, and deletes it
        itself when the last consumer was on another node)."""
        ...

    def settle(self, seqs: Iterable[int], owner: str | None = None) -> None: ...

    def requeue(self, seqs: Iterable[int], owner: str | None = None) -> None: ...

    def drop_all(self) -> None:
        """It is being deleted here: every message goes."""
        ...

    def cancel_consumers(self) -> None: ...

    def ask_get(self, no_ack: bool, owner: str, reply: Reply[GetAnswer]) -> None: ...

    def ask_purge(self, reply: Reply[int]) -> None:
        """Drop the ready messages; answers how many."""
        ...

    def ask_counts(self, reply: Reply[Counts]) -> None: ...

    def ask_consume(self, exclusive: bool, reply: Reply[Counts]) -> None:
        """basic.consume: may a consumer (``exclusive`` or not) join every node's
        consumers of the queue? Refused (403) when either is exclusive."""
        ...

    def ask_delete(self, if_unused: bool, if_empty: bool, delete_here: Callable[[], int],
                   reply: Reply[int]) -> None:
        """queue.delete: ``delete_here`` deletes it from this node's vhost (checking the
        conditions) and counts its messages; a master elsewhere checks and deletes it
        there, and the deletion reaches this node as the cluster's."""
        ...
