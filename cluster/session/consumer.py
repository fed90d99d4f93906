"""A channel's subscription to a queue (`ChannelConsumer`, what ``basic.consume``
makes) and a delivery the client has yet to acknowledge (`Delivery`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cluster.core.hosted import HostedQueue
from cluster.core.queue import Entry, Queue

if TYPE_CHECKING:
    from cluster.session.channel import Channel


@dataclass(eq=False)
class ChannelConsumer:
    channel: Channel
    queue: HostedQueue
    tag: str
    no_ack: bool
    exclusive: bool
    prefetch: int
    arguments: dict[str, Any] = field(default_factory=dict)
    unacked: int = 0

    def can_take(self) -> bool:
        return (self.prefetch == 0 or self.unacked < self.prefetch) and self.channel.can_deliver()

    @property
    def owner(self) -> str:
        return self.channel.ref

    def take(self, queue: Queue, entry: Entry, redelivered: bool) -> None:
        # self.queue, not the argument: a master's copy hands out its messages, but acks
        # must go through the queue the channel consumes from so that mirrors hear of them.
        self.deliver(self.queue, entry, redelivered)

    def deliver(self, queue: HostedQueue, entry: Entry, redelivered: bool) -> None:
        self.channel.deliver(self, queue, entry, redelivered)

    def queue_deleted(self) -> None:
        self.channel.cancel_by_server(self)

    def failed_over(self) -> None:
        self.channel.cancel_by_server(self)


@dataclass(slots=True)
class Delivery:
    """An unacknowledged delivery: the message ``seq`` of ``queue``, delivered to
    ``consumer`` (None: taken by ``basic.get``)."""

    queue: HostedQueue
    seq: int
    consumer: ChannelConsumer | None
