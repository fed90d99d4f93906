"""One AMQP channel: content assembly, consumers, deliveries, acks, confirms, transactions.

I/O-free: methods come in through `handle_method` / `handle_header` / `handle_body`,
frames go out through the owning connection's outbox.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pamqp import commands
from pamqp.base import Frame as Method

from cluster.amqp import framing
from cluster.amqp.errors import (
    ACCESS_REFUSED,
    COMMAND_INVALID,
    NOT_ALLOWED,
    NOT_FOUND,
    NOT_IMPLEMENTED,
    PRECONDITION_FAILED,
    UNEXPECTED_FRAME,
    AMQPError,
    ChannelError,
    ConnectionError_,
)
from cluster.core.message import Message
from cluster.core.queue import Entry, Queue
from cluster.core.users import Access
from cluster.ha.confirms import ConfirmWait
from cluster.ha.queue import ClusterQueue

if TYPE_CHECKING:
    from cluster.amqp.connection import Connection
    from cluster.core.broker import Broker
    from cluster.core.vhost import VirtualHost

AnyQueue = Queue | ClusterQueue


@dataclass(eq=False)
class ChannelConsumer:
    channel: Channel
    queue: AnyQueue
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
        # must go through the ClusterQueue so that mirrors hear of them.
        self.channel.deliver(self, self.queue, entry, redelivered)

    def queue_deleted(self) -> None:
        self.channel.cancel_by_server(self)


@dataclass(slots=True)
class Delivery:
    queue: AnyQueue
    seq: int
    consumer: ChannelConsumer | None


@dataclass(slots=True)
class _PendingContent:
    publish: framing.Publish
    head: framing.ContentHead | None = None
    parts: list[bytes] = field(default_factory=list)
    remaining: int = 0


class Channel:
    def __init__(self, connection: Connection, channel_id: int) -> None:
        self.connection = connection
        self.id = channel_id
        # The channel's name across the cluster: owner of its deliveries, sender of its
        # publishes.
        self.ref = f"{connection.broker.config.node_name}|{connection.id}|{channel_id}"
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
        self.pending_confirms: deque[tuple[int, int, ConfirmWait | None]] = deque()
        self.transactional = False
        self._tx_publishes: list[tuple[framing.Publish, Message]] = []
        self._tx_settlements: list[tuple[int, bool, bool | None]] = []
        self.pending_commits: deque[tuple[int, list[ConfirmWait]]] = deque()
        self._content: _PendingContent | None = None
        # Bytes of bodies this channel holds outside any queue (counted by the broker's
        # memory alarm): content still arriving, and uncommitted transactions.
        self.held_bytes = 0
        self._last_queue = ""
        self._consumer_counter = 0

    @property
    def broker(self) -> Broker:
        return self.connection.broker

    @property
    def vhost(self) -> VirtualHost:
        return self.connection.vhost

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
            self._settle(method.delivery_tag, method.multiple, None, method_id=80)
            return
        handler = _HANDLERS.get(type(method))
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

    def _queue_name(self, name: str) -> str:
        if name:
            return name
        if not self._last_queue:
            raise ChannelError(NOT_FOUND, "no previously declared queue")
        return self._last_queue

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
               confirmed: bool) -> tuple[int, ConfirmWait | None]:
        """Enqueue on every matching queue; returns the store LSN to wait for and, when
        queues on other nodes got it, their confirms to wait for."""
        queues = self.vhost.route(self.vhost.exchanges[publish.exchange], publish.routing_key,
                                  self.broker.config.breaks.topic_hash_needs_a_word)
        lsn = 0
        wait = None
        for queue in queues:
            if queue.replicated:
                assert isinstance(queue, ClusterQueue)
                pubid = self._next_pubid
                self._next_pubid = pubid + 1
                if confirmed and wait is None and not self._confirms_early(message):
                    wait = self.broker.cluster_wait(self.ref, pubid)
                lsn = max(lsn, queue.publish(message, self.ref, pubid, wait))
            else:
                assert isinstance(queue, Queue)
                lsn = max(lsn, queue.enqueue(message))
            queue.dispatch()
        if not queues and publish.mandatory and not self.broker.config.breaks.mandatory_ignored:
            self._send_content(
                framing.return_frame(
                    self.id, 312, "NO_ROUTE", publish.exchange, publish.routing_key
                ),
                message,
            )
        return lsn, wait

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

    # -- delivering ---------------------------------------------------------------------

    def can_deliver(self) -> bool:
        return (
            self.flow_active
            and not self.closing
            and self.connection.writable
            and (self.global_prefetch == 0 or len(self.unacked) < self.global_prefetch)
        )

    def deliver(
        self, consumer: ChannelConsumer, queue: AnyQueue, entry: Entry, redelivered: bool
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

    def _settle(
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
        by_queue: dict[AnyQueue, list[int]] = {}
        for delivery in deliveries:
            by_queue.setdefault(delivery.queue, []).append(delivery.seq)
        for queue, seqs in by_queue.items():
            if requeue:
                queue.requeue(seqs, self.ref)
            else:
                queue.settle(seqs, self.ref)
        self._dispatch_after_credit(by_queue)

    def _dispatch_after_credit(self, queues: dict[AnyQueue, list[int]]) -> None:
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
            self._remove_consumer(consumer)
        if not self.broker.config.breaks.no_requeue_on_close:
            self.settle_all(requeue=True)
        self.broker.confirm_dirty.discard(self)
        self._content = None
        self._tx_publishes.clear()
        self._hold(-self.held_bytes)
        if self.broker.cluster is not None:
            self.broker.cluster.channel_closed(self)

    def _remove_consumer(self, consumer: ChannelConsumer) -> None:
        self.consumers.pop(consumer.tag, None)
        queue = consumer.queue
        queue.remove_consumer(consumer)
        if queue.auto_delete and not queue.consumers and queue.had_consumers:
            self.broker.delete_queue(self.vhost, queue.name)

    # -- method handlers ----------------------------------------------------------------

    def _channel_close(self, method: commands.Channel.Close) -> None:
        self.close()
        self.send(commands.Channel.CloseOk())
        self.connection.forget_channel(self.id)

    def _channel_flow(self, method: commands.Channel.Flow) -> None:
        if not method.active:
            raise ConnectionError_(NOT_IMPLEMENTED, "active=false", 20, 20)
        self.send(commands.Channel.FlowOk(active=True))

    def _exchange_declare(self, method: commands.Exchange.Declare) -> None:
        self.check("configure", "exchange", method.exchange)
        self.vhost.declare_exchange(
            method.exchange,
            method.exchange_type,
            passive=method.passive,
            durable=method.durable,
            auto_delete=method.auto_delete,
            internal=method.internal,
            arguments=method.arguments or {},
        )
        if not method.passive:
            self.broker.definitions_changed()
        if not method.nowait:
            self.send(commands.Exchange.DeclareOk())

    def _exchange_delete(self, method: commands.Exchange.Delete) -> None:
        self.check("configure", "exchange", method.exchange)
        self.vhost.delete_exchange(method.exchange, method.if_unused)
        self.broker.definitions_changed()
        if not method.nowait:
            self.send(commands.Exchange.DeleteOk())

    def _queue_declare(self, method: commands.Queue.Declare) -> None:
        name = method.queue or self.broker.generated_name("amq.gen-")
        if not method.passive:
            self.check("configure", "queue", name)
        queue = self.vhost.declare_queue(
            name,
            connection_id=self.connection.id,
            passive=method.passive,
            durable=method.durable,
            exclusive=method.exclusive,
            auto_delete=method.auto_delete,
            arguments=method.arguments or {},
            server_named=not method.queue,
        )
        if not method.passive and queue.durable:
            self.broker.definitions_changed()
        self._last_queue = name
        if method.nowait:
            return
        if isinstance(queue, ClusterQueue) and not queue.is_master:
            def counted(answer: dict[str, Any], payload: bytes) -> None:
                self.connection.send(framing.declare_ok_frame(
                    self.id, name, answer["count"], answer["consumers"]))

            self._ask_master(queue, "status", {}, counted)
            return
        self.connection.send(framing.declare_ok_frame(
            self.id, name, queue.ready_count, len(queue.consumers)))

    def _queue_bind(self, method: commands.Queue.Bind) -> None:
        name = self._queue_name(method.queue)
        self.check("write", "queue", name)
        self.check("read", "exchange", method.exchange)
        self.vhost.queue(name, self.connection.id)
        self.vhost.bind(name, method.exchange, method.routing_key)
        self.broker.definitions_changed()
        if not method.nowait:
            self.send(commands.Queue.BindOk())

    def _queue_unbind(self, method: commands.Queue.Unbind) -> None:
        name = self._queue_name(method.queue)
        self.check("write", "queue", name)
        self.check("read", "exchange", method.exchange)
        queue = self.vhost.queues.get(name)
        if queue is not None:  # unbinding a missing queue succeeds, as in RabbitMQ
            self.vhost.check_exclusive(queue, self.connection.id)
        self.vhost.unbind(name, method.exchange, method.routing_key)
        self.broker.definitions_changed()
        self.send(commands.Queue.UnbindOk())

    def _queue_purge(self, method: commands.Queue.Purge) -> None:
        name = self._queue_name(method.queue)
        self.check("read", "queue", name)
        queue = self.vhost.queue(name, self.connection.id)
        nowait = method.nowait
        if isinstance(queue, ClusterQueue) and not queue.is_master:
            def purged(answer: dict[str, Any], payload: bytes) -> None:
                if not nowait:
                    self.send(commands.Queue.PurgeOk(answer["count"]))

            self._ask_master(queue, "purge", {}, purged)
            return
        count = queue.purge()
        if not nowait:
            self.send(commands.Queue.PurgeOk(count))

    def _queue_delete(self, method: commands.Queue.Delete) -> None:
        name = self._queue_name(method.queue)
        self.check("configure", "queue", name)
        queue = self.vhost.queues.get(name)
        if queue is not None:
            self.vhost.check_exclusive(queue, self.connection.id)
        nowait = method.nowait
        if isinstance(queue, ClusterQueue) and not queue.is_master:
            def deleted(answer: dict[str, Any], payload: bytes) -> None:
                if not nowait:
                    self.send(commands.Queue.DeleteOk(answer["count"]))

            self._ask_master(queue, "delete", {"if_unused": method.if_unused,
                                               "if_empty": method.if_empty}, deleted)
            return
        count = self.broker.delete_queue(
            self.vhost, name, if_unused=method.if_unused, if_empty=method.if_empty
        )
        if not method.nowait:
            self.send(commands.Queue.DeleteOk(count))

    def _basic_qos(self, method: commands.Basic.Qos) -> None:
        if method.prefetch_size:
            raise ConnectionError_(
                NOT_IMPLEMENTED, f"prefetch_size!=0 ({method.prefetch_size})", 60, 10
            )
        if method.global_:
            self.global_prefetch = method.prefetch_count
        else:
            self.prefetch_count = method.prefetch_count
        self.send(commands.Basic.QosOk())
        for consumer in self.consumers.values():
            consumer.queue.dispatch()

    def _basic_consume(self, method: commands.Basic.Consume) -> None:
        name = self._queue_name(method.queue)
        self.check("read", "queue", name)
        queue = self.vhost.queue(name, self.connection.id)
        tag = method.consumer_tag
        if not tag:
            tag = self.broker.generated_name("amq.ctag-")
        if tag in self.consumers:
            raise ConnectionError_(
                NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'", 60, 20
            )
        if queue.consumers and (
            method.exclusive or any(c.exclusive for c in queue.consumers)
        ):
            raise ChannelError(
                ACCESS_REFUSED, f"{self.vhost.describe('queue', name)} in exclusive use"
            )
        consumer = ChannelConsumer(
            self, queue, tag, method.no_ack, method.exclusive, self.prefetch_count,
            dict(method.arguments or {}),
        )
        self.consumers[tag] = consumer
        if not method.nowait:
            self.send(commands.Basic.ConsumeOk(tag))
        queue.add_consumer(consumer)
        queue.dispatch()

    def _basic_cancel(self, method: commands.Basic.Cancel) -> None:
        tag = method.consumer_tag or ""
        consumer = self.consumers.get(tag)
        if not method.nowait:
            self.send(commands.Basic.CancelOk(tag))
        if consumer is not None:
            self._remove_consumer(consumer)

    def _basic_get(self, method: commands.Basic.Get) -> None:
        name = self._queue_name(method.queue)
        self.check("read", "queue", name)
        queue = self.vhost.queue(name, self.connection.id)
        no_ack = method.no_ack
        # the queue's own reading of the get: settled at once, or held for an ack
        settled = no_ack and not self.broker.config.breaks.no_ack_get_unsettled
        if isinstance(queue, ClusterQueue) and not queue.is_master:
            def got(answer: dict[str, Any], payload: bytes) -> None:
                entry = Entry(answer["seq"], Message.decode(payload)) if "seq" in answer else None
                self._get_answer(queue, no_ack, entry, answer.get("redelivered", False),
                                 answer["count"])

            self._ask_master(queue, "get", {"no_ack": settled, "owner": self.ref}, got)
            return
        taken = queue.take_next(settled, self.ref)
        entry, redelivered = taken if taken is not None else (None, False)
        self._get_answer(queue, no_ack, entry, redelivered, queue.ready_count)

    def _get_answer(self, queue: AnyQueue, no_ack: bool, entry: Entry | None,
                    redelivered: bool, remaining: int) -> None:
        if entry is None:
            self.send(commands.Basic.GetEmpty())
            return
        tag = self._next_delivery_tag
        self._next_delivery_tag = tag + 1
        if not no_ack:
            self.unacked[tag] = Delivery(queue, entry.seq, None)
        message = entry.message
        self._send_content(
            framing.get_ok_frame(
                self.id, tag, redelivered, message.exchange, message.routing_key, remaining
            ),
            message,
        )

    def _ask_master(self, queue: ClusterQueue, op: str, args: dict[str, Any],
                    then: Callable[[dict[str, Any], bytes], None]) -> None:
        """The queue's master is on another node: park the connection until it answers,
        so that replies keep the order of requests."""
        connection = self.connection
        connection.park()

        def answered(answer: dict[str, Any], payload: bytes) -> None:
            try:
                if "error" in answer:
                    raise _master_error(queue, answer)
                if not self.closing:
                    then(answer, payload)
            except AMQPError as error:
                connection.channel_failed(self, error)
            connection.resume()

        cluster = self.broker.cluster
        assert cluster is not None
        cluster.call(queue, op, args, answered)

    def _basic_reject(self, method: commands.Basic.Reject) -> None:
        self._settle(method.delivery_tag or 0, False, method.requeue, method_id=90)

    def _basic_nack(self, method: commands.Basic.Nack) -> None:
        self._settle(method.delivery_tag, method.multiple, method.requeue, method_id=120)

    def _basic_recover(self, method: commands.Basic.Recover) -> None:
        if not method.requeue:
            raise ConnectionError_(NOT_IMPLEMENTED, "requeue=false", 60, 110)
        self.settle_all(requeue=not self.broker.config.breaks.recover_drops)
        self.send(commands.Basic.RecoverOk())

    def _confirm_select(self, method: commands.Confirm.Select) -> None:
        if self.transactional:
            raise ChannelError(
                PRECONDITION_FAILED, "cannot switch from tx to confirm mode"
            )
        self.confirm = True
        if not method.nowait:
            self.send(commands.Confirm.SelectOk())

    def _tx_select(self, method: commands.Tx.Select) -> None:
        if self.confirm:
            raise ChannelError(
                PRECONDITION_FAILED, "cannot switch from confirm to tx mode"
            )
        self.transactional = True
        self.send(commands.Tx.SelectOk())

    def _tx_commit(self, method: commands.Tx.Commit) -> None:
        if not self.transactional:
            raise ChannelError(PRECONDITION_FAILED, "channel is not transactional")
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

    def _take_tx_publishes(self) -> list[tuple[framing.Publish, Message]]:
        publishes, self._tx_publishes = self._tx_publishes, []
        self._hold(-sum(len(message.body) for _, message in publishes))
        return publishes

    def _tx_rollback(self, method: commands.Tx.Rollback) -> None:
        if not self.transactional:
            raise ChannelError(PRECONDITION_FAILED, "channel is not transactional")
        if not self.broker.config.breaks.tx_rollback_kept:
            self._take_tx_publishes()
        self._tx_settlements.clear()
        self.send(commands.Tx.RollbackOk())


def _master_error(queue: ClusterQueue, answer: dict[str, Any]) -> ChannelError:
    if answer["error"] == "precondition":
        return ChannelError(PRECONDITION_FAILED, answer["text"])
    return ChannelError(
        NOT_FOUND,
        f"home node '{queue.master_node}' of queue '{queue.name}' in vhost "
        f"'{queue.vhost}' is down or inaccessible",
    )


_HANDLERS: dict[type, Any] = {
    commands.Channel.Close: Channel._channel_close,
    commands.Channel.Flow: Channel._channel_flow,
    commands.Exchange.Declare: Channel._exchange_declare,
    commands.Exchange.Delete: Channel._exchange_delete,
    commands.Queue.Declare: Channel._queue_declare,
    commands.Queue.Bind: Channel._queue_bind,
    commands.Queue.Unbind: Channel._queue_unbind,
    commands.Queue.Purge: Channel._queue_purge,
    commands.Queue.Delete: Channel._queue_delete,
    commands.Basic.Qos: Channel._basic_qos,
    commands.Basic.Consume: Channel._basic_consume,
    commands.Basic.Cancel: Channel._basic_cancel,
    commands.Basic.Get: Channel._basic_get,
    commands.Basic.Reject: Channel._basic_reject,
    commands.Basic.Nack: Channel._basic_nack,
    commands.Basic.Recover: Channel._basic_recover,
    commands.Confirm.Select: Channel._confirm_select,
    commands.Tx.Select: Channel._tx_select,
    commands.Tx.Commit: Channel._tx_commit,
    commands.Tx.Rollback: Channel._tx_rollback,
}
