"""One AMQP channel: content assembly, publishing, consumers, deliveries, acks, confirms,
transactions.

I/O-free: methods come in through `handle_method` / `handle_header` / `handle_body`
(what each method does is in `cluster.session.methods`), frames go out through the
owning connection's outbox. Queues see the channel as a `ClientChannel`: the queues of
the cluster layer number its publishes and call it back as their replicas confirm.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from pamqp import commands
from pamqp.base import Frame as Method

from cluster.amqp import framing
from cluster.amqp.errors import (
    ACCESS_REFUSED,
    COMMAND_INVALID,
    NOT_FOUND,
    NOT_IMPLEMENTED,
    PRECONDITION_FAILED,
    UNEXPECTED_FRAME,
    AMQPError,
    ChannelError,
    ConnectionError_,
)
from cluster.core.clients import Publishing, ReplicaWait, channel_ref
from cluster.core.hosted import HostedQueue
from cluster.core.message import Message
from cluster.core.queue import Entry, GetAnswer, Reply
from cluster.core.users import Access
from cluster.session.consumer import ChannelConsumer, Delivery
from cluster.session.methods import HANDLERS

if TYPE_CHECKING:
    from cluster.core.vhost import VirtualHost
    from cluster.session.broker import Broker
    from cluster.session.connection import Connection

T = TypeVar("T")


@dataclass(slots=True)
class _PendingContent:
    publish: framing.Publish
    head: framing.ContentHead | None = None
    parts: list[bytes] = field(default_factory=list)
    remaining: int = 0


class Channel:
    def __init__(self, connection: Connection, channel_id: int) -> None:
        self.connection = connection
        # A channel opens on an open connection: its broker and vhost are settled.
        self.broker: Broker = connection.broker
        self.vhost: VirtualHost = connection.vhost
        self.id = channel_id
        # The channel's name across the cluster: owner of its deliveries, sender of its
        # publishes.
        self.ref = channel_ref(connection.broker.config.node_name, connection.id, channel_id)
        self._next_pubid = 1
        self.closing = False
        self.consumers: dict[str, ChannelConsumer] = {}
        self.unacked: dict[int, Delivery] = {}
        self._next_delivery_tag = 1
        self.prefetch_count = 0
        self.global_prefetch = 0
        self.flow_active = True
        self.confirm = False
        self._next_publish_tag = 1
        # (publish tag, store LSN it waits for, other nodes' confirms it waits for), in
        # publish order.
        self.pending_confirms: deque[tuple[int, int, ReplicaWait | None]] = deque()
        self.transactional = False
        self._tx_publishes: list[tuple[framing.Publish, Message]] = []
        self._tx_settlements: list[tuple[int, bool, bool | None]] = []
        self.pending_commits: deque[tuple[int, list[ReplicaWait]]] = deque()
        self._content: _PendingContent | None = None
        # Bytes of bodies this channel holds outside any queue (counted by the broker's
        # memory alarm): content still arriving, and uncommitted transactions.
        self.held_bytes = 0
        # What queue methods naming no queue mean (RabbitMQ's "last declared queue").
        self.last_queue = ""

    # -- output -------------------------------------------------------------------------

    def send(self, method: Method) -> None:
        self.connection.send(framing.method_frame(self.id, method))

    def _send_content(self, method_frame: bytes, message: Message) -> None:
        self.connection.send_many(
            [
                method_frame,
                *framing.content_frames(
                    self.id, message.header, message.body, self.connection.frame_max
                ),
            ]
        )

    # -- frames in ----------------------------------------------------------------------

    def handle_method(self, method: Method | framing.Publish | framing.Ack) -> None:
        if self._content is not None:
            raise ConnectionError_(
                UNEXPECTED_FRAME,
                f"expected content header for class 60, got non content header frame "
                f"instead on channel {self.id}",
            )
        if isinstance(method, framing.Publish):
            self._content = _PendingContent(method)
            # A publisher from its first publish on: under a memory alarm its body is
            # not read either.
            self.connection.note_publish()
            return
        if isinstance(method, framing.Ack):
            self.settle(method.delivery_tag, method.multiple, None, method_id=80)
            return
        handler = HANDLERS.get(type(method))
        if handler is None:
            raise ConnectionError_(
                COMMAND_INVALID, f"method {method.name} is not valid from a client on a channel"
            )
        try:
            handler(self, method)
        except ChannelError as error:
            if not error.class_id:
                error.class_id, error.method_id = divmod(method.index, 0x10000)
            raise

    def handle_header(self, head: framing.ContentHead) -> None:
        content = self._content
        if content is None or content.head is not None:
            raise ConnectionError_(
                UNEXPECTED_FRAME, f"unexpected content header frame on channel {self.id}"
            )
        if head.class_id != framing.BASIC_CLASS:
            raise ConnectionError_(
                UNEXPECTED_FRAME,
                f"expected content header for class 60, got one for class {head.class_id}",
            )
        if head.body_size > self.broker.config.max_message_size:
            self._content = None
            raise ChannelError(
                PRECONDITION_FAILED,
                f"message size {head.body_size} is larger than configured max size "
                f"{self.broker.config.max_message_size}",
                60,
                40,
            )
        content.head = head
        content.remaining = head.body_size
        if head.body_size == 0:
            self._complete_content()

    def handle_body(self, payload: bytes) -> None:
        content = self._content
        if content is None or content.head is None:
            raise ConnectionError_(
                UNEXPECTED_FRAME, f"unexpected content body frame on channel {self.id}"
            )
        content.remaining -= len(payload)
        if content.remaining < 0:
            raise ConnectionError_(
                UNEXPECTED_FRAME,
                f"content body on channel {self.id} is longer than its header's body size",
            )
        content.parts.append(payload)
        self._hold(len(payload))
        if content.remaining == 0:
            self._complete_content()

    def _complete_content(self) -> None:
        content = self._content
        assert content is not None and content.head is not None
        self._content = None
        publish, head = content.publish, content.head
        body = content.parts[0] if len(content.parts) == 1 else b"".join(content.parts)
        self._hold(-len(body))
        message = Message(publish.exchange, publish.routing_key, head.raw, body, head.persistent)
        try:
            self._publish(publish, message)
        except ChannelError as error:
            error.class_id, error.method_id = 60, 40
            raise

    def _hold(self, size: int) -> None:
        self.held_bytes += size
        self.broker.held_bytes += size

    # -- permissions --------------------------------------------------------------------

    def check(self, access: Access, kind: str, resource: str) -> None:
        self.broker.check_access(self.connection.user, self.vhost, access, kind, resource)

    def queue_name(self, name: str) -> str:
        if name:
            return name
        if not self.last_queue:
            raise ChannelError(NOT_FOUND, "no previously declared queue")
        return self.last_queue

    # -- publishing ---------------------------------------------------------------------

    def _publish(self, publish: framing.Publish, message: Message) -> None:
        vhost = self.vhost
        exchange = vhost.exchange(publish.exchange)
        self.check("write", "exchange", publish.exchange)
        if exchange.internal:
            raise ChannelError(
                ACCESS_REFUSED,
                f"cannot publish to internal {vhost.describe('exchange', exchange.name)}",
            )
        if publish.immediate:
            raise ConnectionError_(NOT_IMPLEMENTED, "immediate=true", 60, 40)
        if self.transactional:
            self._tx_publishes.append((publish, message))
            self._hold(len(message.body))
            return
        lsn, wait = self._route(publish, message, self.confirm)
        if self.confirm:
            tag = self._next_publish_tag
            self._next_publish_tag = tag + 1
            self.pending_confirms.append((tag, lsn, wait))
            self.broker.confirm_dirty.add(self)

    def _confirms_early(self, message: Message) -> bool:
        """Planted bugs early-confirm and transient-early-confirm: no wait for the
        mirrors."""
        breaks = self.broker.config.breaks
        return breaks.early_confirm or (breaks.transient_early_confirm and not message.persistent)

    def _route(self, publish: framing.Publish, message: Message,
               confirmed: bool) -> tuple[int, ReplicaWait | None]:
        """Enqueue on every matching queue; returns the store LSN to wait for and, when
        queues on other nodes got it, their confirms to wait for."""
        queues = self.vhost.route(self.vhost.exchanges[publish.exchange], publish.routing_key)
        publishing = Publishing(message, self, confirmed and not self._confirms_early(message))
        lsn = 0
        for queue in queues:
            lsn = max(lsn, queue.publish(publishing))
            queue.dispatch()
        if not queues and publish.mandatory and not self.broker.config.breaks.mandatory_ignored:
            self._send_content(
                framing.return_frame(
                    self.id, 312, "NO_ROUTE", publish.exchange, publish.routing_key
                ),
                message,
            )
        return lsn, publishing.wait

    def next_pubid(self) -> int:
        pubid = self._next_pubid
        self._next_pubid = pubid + 1
        return pubid

    def replicas_confirmed(self) -> None:
        self.broker.confirm_dirty.add(self)

    def release_confirms(self, durable_lsn: int) -> None:
        """Send one ``basic.ack`` (multiple) for every run of publishes whose data is
        durable and held by every replica (a ``basic.nack`` for a run no replica kept),
        and ``tx.commit-ok`` for commits that are."""
        pending = self.pending_confirms
        last = 0
        count = 0
        ack = True
        while pending:
            tag, lsn, wait = pending[0]
            if lsn > durable_lsn or (wait is not None and not wait.done):
                break
            fate = wait is None or not wait.failed
            if count and fate != ack:
                self.connection.send(framing.confirm_frame(self.id, last, count > 1, ack))
                count = 0
            ack = fate
            last = tag
            count += 1
            pending.popleft()
        if count:
            self.connection.send(framing.confirm_frame(self.id, last, count > 1, ack))
        commits = self.pending_commits
        while commits and commits[0][0] <= durable_lsn and all(w.done for w in commits[0][1]):
            commits.popleft()
            self.send(commands.Tx.CommitOk())

    def fail_confirms(self) -> None:
        """The store could not make pending messages durable: nack them."""
        if self.pending_confirms:
            last = self.pending_confirms[-1][0]
            multiple = len(self.pending_confirms) > 1
            self.pending_confirms.clear()
            self.connection.send(framing.confirm_frame(self.id, last, multiple, ack=False))

    # -- transactions -------------------------------------------------------------------

    def commit(self) -> None:
        """tx.commit: the settlements, then the publishes; commit-ok once they are
        durable (``release_confirms``)."""
        publishes = self._take_tx_publishes()
        settlements, self._tx_settlements = self._tx_settlements, []
        for delivery_tag, multiple, requeue in settlements:
            self._apply_settlement(
                self._take_deliveries(delivery_tag, multiple, 10), requeue
            )
        lsn = 0
        waits = []
        # Committed means on every replica: commit-ok waits for the mirrors' confirms.
        replicated = not self.broker.config.breaks.early_tx_commit
        for publish, message in publishes:
            routed, wait = self._route(publish, message, replicated)
            lsn = max(lsn, routed)
            if wait is not None:
                waits.append(wait)
        self.pending_commits.append((lsn, waits))
        self.broker.confirm_dirty.add(self)

    def rollback(self) -> None:
        if not self.broker.config.breaks.tx_rollback_kept:
            self._take_tx_publishes()
        self._tx_settlements.clear()

    def _take_tx_publishes(self) -> list[tuple[framing.Publish, Message]]:
        publishes, self._tx_publishes = self._tx_publishes, []
        self._hold(-sum(len(message.body) for _, message in publishes))
        return publishes

    # -- delivering ---------------------------------------------------------------------

    def can_deliver(self) -> bool:
        return (
            self.flow_active
            and not self.closing
            and self.connection.writable
            and (self.global_prefetch == 0 or len(self.unacked) < self.global_prefetch)
        )

    def deliver(
        self, consumer: ChannelConsumer, queue: HostedQueue, entry: Entry, redelivered: bool
    ) -> None:
        tag = self._next_delivery_tag
        self._next_delivery_tag = tag + 1
        if not consumer.no_ack:
            self.unacked[tag] = Delivery(queue, entry.seq, consumer)
            consumer.unacked += 1
        if self.broker.config.breaks.unflagged_redelivery:
            redelivered = False
        message = entry.message
        self.connection.send_many(
            [
                framing.deliver_frame(
                    self.id, consumer.tag, tag, redelivered, message.exchange,
                    message.routing_key,
                ),
                *framing.content_frames(
                    self.id, message.header, message.body, self.connection.frame_max
                ),
            ]
        )

    def answer_get(self, queue: HostedQueue, no_ack: bool, answer: GetAnswer) -> None:
        """basic.get's answer: get-ok with the message, or get-empty."""
        entry = answer.entry
        if entry is None:
            self.send(commands.Basic.GetEmpty())
            return
        tag = self._next_delivery_tag
        self._next_delivery_tag = tag + 1
        if not no_ack:
            self.unacked[tag] = Delivery(queue, entry.seq, None)
        message = entry.message
        self._send_content(
            framing.get_ok_frame(self.id, tag, answer.redelivered, message.exchange,
                                 message.routing_key, answer.remaining),
            message,
        )

    def _take_deliveries(self, delivery_tag: int, multiple: bool, method_id: int) -> list[Delivery]:
        unacked = self.unacked
        if multiple:
            tags = [t for t in unacked if delivery_tag == 0 or t <= delivery_tag]
        elif delivery_tag in unacked:
            tags = [delivery_tag]
        else:
            tags = []
        if not tags and not (multiple and delivery_tag == 0):
            raise ChannelError(
                PRECONDITION_FAILED, f"unknown delivery tag {delivery_tag}", 60, method_id
            )
        taken = [unacked.pop(t) for t in tags]
        for delivery in taken:
            if delivery.consumer is not None:
                delivery.consumer.unacked -= 1
        return taken

    def settle(
        self, delivery_tag: int, multiple: bool, requeue: bool | None, method_id: int
    ) -> None:
        """Ack (``requeue`` None), or reject/nack with or without requeue."""
        if self.transactional:
            if not multiple and delivery_tag not in self.unacked:
                raise ChannelError(
                    PRECONDITION_FAILED, f"unknown delivery tag {delivery_tag}", 60, method_id
                )
            self._tx_settlements.append((delivery_tag, multiple, requeue))
            return
        self._apply_settlement(self._take_deliveries(delivery_tag, multiple, method_id), requeue)

    def _apply_settlement(self, deliveries: list[Delivery], requeue: bool | None) -> None:
        by_queue: dict[HostedQueue, list[int]] = {}
        for delivery in deliveries:
            by_queue.setdefault(delivery.queue, []).append(delivery.seq)
        for queue, seqs in by_queue.items():
            if requeue:
                queue.requeue(seqs, self.ref)
            else:
                queue.settle(seqs, self.ref)
        self._dispatch_after_credit(by_queue)

    def _dispatch_after_credit(self, queues: dict[HostedQueue, list[int]]) -> None:
        targets = set(queues)
        if self.global_prefetch:
            targets.update(c.queue for c in self.consumers.values())
        for queue in targets:
            queue.dispatch()

    def settle_all(self, *, requeue: bool) -> None:
        """Settle every unacknowledged delivery at once, in delivery order: give each
        back to its queue, or (``requeue=False``) drop it as if acked."""
        deliveries = list(self.unacked.values())
        self.unacked.clear()
        for delivery in deliveries:
            if delivery.consumer is not None:
                delivery.consumer.unacked -= 1
        self._apply_settlement(deliveries, requeue=requeue)

    def cancel_by_server(self, consumer: ChannelConsumer) -> None:
        """The queue went away: drop the consumer and tell clients that can hear it."""
        if self.consumers.pop(consumer.tag, None) is None:
            return
        if self.connection.capabilities.get("consumer_cancel_notify") and not self.closing:
            self.send(commands.Basic.Cancel(consumer.tag, nowait=True))

    def close(self) -> None:
        """The channel ends (closed, or its connection is gone): cancel consumers first so
        requeued messages go to others, then requeue what was unacknowledged."""
        self.closing = True
        for consumer in list(self.consumers.values()):
            self.remove_consumer(consumer)
        if not self.broker.config.breaks.no_requeue_on_close:
            self.settle_all(requeue=True)
        self.broker.confirm_dirty.discard(self)
        self._content = None
        self._tx_publishes.clear()
        self._hold(-self.held_bytes)
        if self.broker.cluster is not None:
            self.broker.cluster.channel_closed(self)

    def remove_consumer(self, consumer: ChannelConsumer) -> None:
        self.consumers.pop(consumer.tag, None)
        queue = consumer.queue
        if queue.remove_consumer(consumer) and not self.broker.config.breaks.auto_delete_kept:
            self.broker.delete_queue(self.vhost, queue.name)

    # -- requests to queues -------------------------------------------------------------

    def when_answered(self, ask: Callable[[Reply[T]], None],
                      then: Callable[[T], None]) -> None:
        """``ask`` a queue, and go on with ``then`` once it answers. A queue whose master
        is on another node answers later: the connection is parked until then, so that
        replies keep the order of requests."""
        connection = self.connection
        parked = answered_at_once = False

        def answered(answer: T | ChannelError) -> None:
            nonlocal answered_at_once
            answered_at_once = not parked
            try:
                if isinstance(answer, ChannelError):
                    raise answer
                if not self.closing:
                    then(answer)
            except AMQPError as error:
                connection.channel_failed(self, error)
            if parked:
                connection.resume()

        ask(answered)
        if not answered_at_once:
            parked = True
            connection.park()
