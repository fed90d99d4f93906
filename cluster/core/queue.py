"""A queue as an I/O-free state machine.

Messages carry a sequence id assigned in publish order. Ready messages are kept in
sequence order: fresh ones in a deque, requeued ones in a heap, so a requeued message
goes back to its original position (RabbitMQ's ``queue_merge``). Delivery is
round-robin over consumers that have credit.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from cluster.amqp.errors import ACCESS_REFUSED, ChannelError
from cluster.core.clients import Publishing, node_of_ref
from cluster.core.message import Message

T = TypeVar("T")
# Where a queue sends its answer to a channel's request: at once when it holds the
# messages here, once its master on another node has answered otherwise (an error then,
# if the master could not be asked or refused).
Reply = Callable[[T | ChannelError], None]


@dataclass(slots=True)
class Entry:
    seq: int
    message: Message
    delivered: bool = False
    # Who holds it while unacknowledged (a channel's cluster-wide name; "" locally), so
    # an ack from one channel never settles another's delivery of the same message.
    owner: str = ""

    def __lt__(self, other: Entry) -> bool:
        return self.seq < other.seq


class Consumer(Protocol):
    """The channel side of a subscription."""

    tag: str
    no_ack: bool
    exclusive: bool

    @property
    def owner(self) -> str: ...

    def can_take(self) -> bool: ...

    def take(self, queue: Queue, entry: Entry, redelivered: bool) -> None: ...

    def queue_deleted(self) -> None: ...


@dataclass(frozen=True, slots=True)
class GetAnswer:
    """basic.get's: the message taken (None: the queue was empty), its redelivered
    flag, and how many are left."""

    entry: Entry | None
    redelivered: bool
    remaining: int


@dataclass(frozen=True, slots=True)
class Counts:
    """queue.declare-ok's: messages ready and consumers."""

    messages: int
    consumers: int


def in_exclusive_use(consumers: Sequence[Consumer], exclusive: bool) -> bool:
    """Whether a new consumer (``exclusive`` or not) is refused: an exclusive one
    wants the queue to itself, and an existing exclusive one keeps it."""
    return bool(consumers) and (exclusive or any(c.exclusive for c in consumers))


def exclusive_use_error(vhost: str, name: str) -> ChannelError:
    return ChannelError(ACCESS_REFUSED, f"queue '{name}' in vhost '{vhost}' in exclusive use")


class QueueObserver(Protocol):
    """Told of every change a master makes, so that it can replicate them (see
    ``cluster.ha``)."""

    def taken(self, entry: Entry, no_ack: bool) -> None: ...

    def settled(self, seqs: list[int]) -> None: ...

    def requeued(self, seqs: list[int]) -> None: ...

    def purged(self) -> None: ...


class MessageLog(Protocol):
    """The durable store as the queue sees it (see ``cluster.store``)."""

    def stage_append(self, queue: str, seq: int, payload: bytes) -> int: ...

    def stage_remove(self, queue: str, seqs: Iterable[int]) -> int: ...

    def stage_drop_queue(self, queue: str) -> int: ...


@dataclass(eq=False)
class Queue:
    vhost: str
    name: str
    durable: bool = False
    exclusive_owner: int | None = None
    auto_delete: bool = False
    arguments: dict[str, Any] = field(default_factory=dict)
    log: MessageLog | None = None
    # The planted bug ``--break requeue-at-tail``: requeued messages lose their place.
    requeue_at_tail: bool = False

    def __post_init__(self) -> None:
        self._fresh: deque[Entry] = deque()
        self._requeued: list[Entry] = []
        self.unacked: dict[int, Entry] = {}
        self.consumers: list[Consumer] = []
        self._next_seq = 1
        self._round_robin = 0
        self.message_bytes = 0
        self.observer: QueueObserver | None = None
        # A master synchronising its mirrors delivers nothing until it is done.
        self.paused = False

    @property
    def key(self) -> str:
        return f"{self.vhost}\x00{self.name}"

    @property
    def ready_count(self) -> int:
        return len(self._fresh) + len(self._requeued)

    def _persists(self, message: Message) -> bool:
        return self.log is not None and self.durable and message.persistent

    # -- messages -----------------------------------------------------------------------

    @property
    def next_seq(self) -> int:
        return self._next_seq

    def enqueue(self, message: Message) -> int:
        """Append a message; returns the store LSN it must wait for (0: none)."""
        return self.enqueue_at(self._next_seq, message)

    def enqueue_at(self, seq: int, message: Message) -> int:
        """Append a message with the sequence id its master gave it (mirrors)."""
        self._next_seq = max(self._next_seq, seq + 1)  # a seq is never used twice
        self._fresh.append(Entry(seq, message))
        self.message_bytes += len(message.body)
        if self.log is not None and self._persists(message):
            return self.log.stage_append(self.key, seq, message.encode())
        return 0

    def restore(self, entries: Iterable[tuple[int, Message]]) -> None:
        """Load recovered messages. They may have been delivered before the crash, so they
        carry the redelivered flag."""
        for seq, message in entries:
            self._fresh.append(Entry(seq, message, delivered=True))
            self.message_bytes += len(message.body)
            self._next_seq = max(self._next_seq, seq + 1)

    def _pop_ready(self) -> Entry | None:
        fresh, requeued = self._fresh, self._requeued
        if requeued and (not fresh or requeued[0].seq < fresh[0].seq):
            return heapq.heappop(requeued)
        if fresh:
            return fresh.popleft()
        return None

    def _forget(self, entries: list[Entry]) -> None:
        for entry in entries:
            self.message_bytes -= len(entry.message.body)
        if self.log is not None:
            persisted = [e.seq for e in entries if self._persists(e.message)]
            if persisted:
                self.log.stage_remove(self.key, persisted)

    def take_next(self, no_ack: bool, owner: str = "") -> tuple[Entry, bool] | None:
        """Remove the head for delivery; returns it with its redelivered flag."""
        entry = self._pop_ready()
        if entry is None:
            return None
        redelivered = entry.delivered
        self._take(entry, no_ack, owner)
        if self.observer is not None:
            self.observer.taken(entry, no_ack)
        return entry, redelivered

    def _take(self, entry: Entry, no_ack: bool, owner: str) -> None:
        entry.owner = owner
        if no_ack:
            self._forget([entry])
        else:
            entry.delivered = True
            self.unacked[entry.seq] = entry

    def take_seq(self, seq: int, no_ack: bool, owner: str) -> None:
        """Take the ready message ``seq`` as the master did (mirrors). A mirror that
        joined after it was published does not hold it and has nothing to do."""
        fresh, requeued = self._fresh, self._requeued
        if requeued and requeued[0].seq == seq:
            entry = heapq.heappop(requeued)
        elif fresh and fresh[0].seq == seq:
            entry = fresh.popleft()
        else:
            return
        self._take(entry, no_ack, owner)

    def settle(self, seqs: Iterable[int], owner: str | None = None) -> None:
        """Acknowledge (or reject without requeue): the messages are gone. With
        ``owner``, only that holder's deliveries are settled."""
        gone = self._release(seqs, owner)
        if gone:
            self._forget(gone)
            if self.observer is not None:
                self.observer.settled([e.seq for e in gone])

    def requeue(self, seqs: Iterable[int], owner: str | None = None) -> None:
        back = self._release(seqs, owner)
        for entry in back:
            if self.requeue_at_tail:
                self._fresh.append(entry)
            else:
                heapq.heappush(self._requeued, entry)
        if back and self.observer is not None:
            self.observer.requeued([e.seq for e in back])

    def _release(self, seqs: Iterable[int], owner: str | None) -> list[Entry]:
        unacked = self.unacked
        out = []
        for seq in seqs:
            entry = unacked.get(seq)
            if entry is not None and (owner is None or entry.owner == owner):
                del unacked[seq]
                out.append(entry)
        return out

    def unacked_on(self, node: str) -> list[int]:
        """Seqs held by the channels of ``node``."""
        return [seq for seq, e in self.unacked.items() if node_of_ref(e.owner) == node]

    def mark_ready_delivered(self) -> None:
        """Every ready message may already have been delivered (a mirror promoted after
        its master died cannot know what the master's last deliveries were): their next
        delivery says redelivered, as AMQP's "may have been delivered before" allows."""
        for entry in (*self._fresh, *self._requeued):
            entry.delivered = True

    def held(self, low: int, high: int) -> list[Entry]:
        """Every message held, ready or unacknowledged, with ``low <= seq < high``, in
        seq order (what a synchronising master sends its mirrors)."""
        found = [e for e in (*self._fresh, *self._requeued, *self.unacked.values())
                 if low <= e.seq < high]
        return sorted(found)

    def insert_old(self, entry: Entry) -> int:
        """A message from the master's sync, older than anything this mirror saw;
        returns the store LSN it waits for."""
        if entry.owner and entry.seq not in self.unacked:
            self.unacked[entry.seq] = entry
        elif not entry.owner:
            heapq.heappush(self._requeued, entry)
        self.message_bytes += len(entry.message.body)
        if self.log is not None and self._persists(entry.message):
            return self.log.stage_append(self.key, entry.seq, entry.message.encode())
        return 0

    def oldest_seq(self) -> int:
        """The lowest sequence id still held (ready or unacknowledged); ``next_seq`` when
        empty. A mirror that joined at seq J holds everything once this reaches J."""
        candidates = [self._next_seq]
        if self._fresh:
            candidates.append(self._fresh[0].seq)
        if self._requeued:
            candidates.append(self._requeued[0].seq)
        if self.unacked:
            candidates.append(min(self.unacked))
        return min(candidates)

    def purge(self) -> int:
        """Drop every ready message; unacknowledged ones stay."""
        dropped = list(self._fresh) + self._requeued
        self._fresh.clear()
        self._requeued = []
        self._forget(dropped)
        if self.observer is not None:
            self.observer.purged()
        return len(dropped)

    def drop_all(self) -> None:
        """The queue is being deleted: every message, acknowledged or not, goes."""
        for entry in [*self._fresh, *self._requeued, *self.unacked.values()]:
            self.message_bytes -= len(entry.message.body)
        self._fresh.clear()
        self._requeued = []
        self.unacked.clear()
        if self.log is not None and self.durable:
            self.log.stage_drop_queue(self.key)

    # -- a channel's requests (`HostedQueue`): the messages are here, so answered at once

    def publish(self, publishing: Publishing) -> int:
        """Enqueue a channel's publish; returns the store LSN it must wait for."""
        return self.enqueue(publishing.message)

    def ask_get(self, no_ack: bool, owner: str, reply: Reply[GetAnswer]) -> None:
        taken = self.take_next(no_ack, owner)
        entry, redelivered = taken if taken is not None else (None, False)
        reply(GetAnswer(entry, redelivered, self.ready_count))

    def ask_purge(self, reply: Reply[int]) -> None:
        reply(self.purge())

    def ask_counts(self, reply: Reply[Counts]) -> None:
        reply(Counts(self.ready_count, len(self.consumers)))

    def ask_consume(self, exclusive: bool, reply: Reply[Counts]) -> None:
        if in_exclusive_use(self.consumers, exclusive):
            reply(exclusive_use_error(self.vhost, self.name))
        else:
            reply(Counts(self.ready_count, len(self.consumers)))

    def ask_delete(self, if_unused: bool, if_empty: bool, delete_here: Callable[[], int],
                   reply: Reply[int]) -> None:
        reply(delete_here())

    # -- consumers ----------------------------------------------------------------------

    def add_consumer(self, consumer: Consumer) -> None:
        self.consumers.append(consumer)

    def remove_consumer(self, consumer: Consumer) -> bool:
        """True when ``consumer`` was the last of an auto-delete queue: it goes now (the
        caller deletes it)."""
        if consumer not in self.consumers:
            return False
        self.consumers.remove(consumer)
        return self.auto_delete and not self.consumers

    def cancel_consumers(self) -> None:
        """The queue was deleted: its consumers are cancelled."""
        consumers, self.consumers = self.consumers, []
        for consumer in consumers:
            consumer.queue_deleted()

    def dispatch(self) -> None:
        """Deliver ready messages to consumers with credit, round-robin."""
        consumers = self.consumers
        while consumers and (self._fresh or self._requeued) and not self.paused:
            count = len(consumers)
            start = self._round_robin % count
            for offset in range(count):
                consumer = consumers[(start + offset) % count]
                if consumer.can_take():
                    break
            else:
                return
            self._round_robin = (start + offset + 1) % count
            taken = self.take_next(consumer.no_ack, consumer.owner)
            assert taken is not None  # the loop condition saw a ready message
            consumer.take(self, taken[0], taken[1])
