"""The workload's clients: real aio-pika connections, one per logical process, each
through its own address (a toxiproxy link per client and node).

Every operation is recorded as docs/history-format.md says: ``invoke`` before the
client acts, ``ok`` when the broker answered, ``fail`` only when it definitely did
not happen, ``info`` when the outcome is unknown (a confirm that never came because
the connection dropped or timed out). A client that loses its connection records
``disconnect info`` and connects again (to the same node or the next one, as the
workload says; see `Client.run` for when) until it is told to stop.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import itertools
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
)
from aio_pika.exceptions import AMQPError, ChannelInvalidStateError, DeliveryError
from aiormq.abc import DeliveredMessage, FieldTable

from harness.workload import content
from harness.workload.recorder import Recorder
from harness.workload.spec import CHURN_PREFIX, UNROUTABLE_KEY, WorkloadSpec

# What a real client raises when the broker or the network misbehaves; anything else
# is a bug of ours and ends the run.
CLIENT_ERRORS: tuple[type[BaseException], ...] = (
    AMQPError, ChannelInvalidStateError, ConnectionError, OSError, TimeoutError)

Address = Callable[[str, str], Awaitable[tuple[str, int]]]
T = TypeVar("T")
CONNECT_TIMEOUT = 5.0


class ConnectionLost(Exception):
    """The session's connection or channel closed under it."""


SESSION_ENDS: tuple[type[BaseException], ...] = (ConnectionLost, *CLIENT_ERRORS)


class CancelledByLibrary(ConnectionError):
    """aiormq cancelled an operation of ours that waited on the broker: the reader of
    its connection stopped (the connection closed). Its outcome is unknown, like any
    other lost connection's; it is not our task being cancelled."""


async def answer_of(awaitable: Awaitable[T]) -> T:
    """The broker's answer to one client operation. A cancellation that is not aimed at
    the awaiting task comes from the client library (`CancelledByLibrary`)."""
    try:
        return await awaitable
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        raise CancelledByLibrary("cancelled by the client library: its connection "
                                 "closed") from None


def amqp_url(host: str, port: int, heartbeat: int) -> str:
    return f"amqp://guest:guest@{host}:{port}/%2F?heartbeat={heartbeat}"


@dataclass
class ClientContext:
    """What every client shares: the workload, the record, the cluster's nodes in
    order, how a client reaches a node, and the run's stop signals."""

    spec: WorkloadSpec
    recorder: Recorder
    nodes: list[str]
    address: Address
    stop_publishing: asyncio.Event  # set: publishers stop
    stop_all: asyncio.Event  # set: every client stops
    clock: Callable[[], float] = time.monotonic  # what reconnect_delay is measured by


class Client(abc.ABC):
    """One logical process: connect, run a session until it ends, reconnect. Each kind
    of client says what a session does."""

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext) -> None:
        self.id = client_id
        self.queue = queue
        self.node = node
        self.ctx = ctx
        self.spec = ctx.spec

    @property
    def stop(self) -> asyncio.Event:
        return self.ctx.stop_all

    def running(self) -> bool:
        return not self.stop.is_set()

    def record(self, op: str, type: str, **fields: Any) -> None:
        self.ctx.recorder.record(self.id, op, type, node=self.node, **fields)

    async def run(self) -> None:
        """Connect attempts start at least ``reconnect_delay`` apart: a session that
        lived longer than that is followed at once (to the next node under ``reconnect
        = "next"``), as an application follows a failover; a refused or failed connect
        waits out the rest of the delay, so a dead node is not hammered."""
        while self.running():
            attempt_at = self.ctx.clock()
            connection = await self._connect()
            if connection is not None:
                await self._session(connection)
            if self.running():
                self._pick_node()
                await _sleep_until(attempt_at + self.spec.reconnect_delay - self.ctx.clock(),
                                   self.stop)

    def _pick_node(self) -> None:
        if self.spec.reconnect == "next":
            nodes = self.ctx.nodes
            self.node = nodes[(nodes.index(self.node) + 1) % len(nodes)]

    async def _connect(self) -> AbstractConnection | None:
        self.record("connect", "invoke")
        try:
            host, port = await self.ctx.address(self.id, self.node)
            connection = await aio_pika.connect(
                amqp_url(host, port, self.spec.heartbeat), timeout=CONNECT_TIMEOUT,
                client_properties={"connection_name": self.id})
        except CLIENT_ERRORS as exc:
            self.record("connect", "fail", error=_describe(exc))
            return None
        self.record("connect", "ok")
        return connection

    async def _session(self, connection: AbstractConnection) -> None:
        broken = asyncio.Event()
        connection.close_callbacks.add(lambda *_: broken.set())
        try:
            await answer_of(self.session(connection, broken))
        except SESSION_ENDS as exc:
            self.record("disconnect", "info", error=_describe(exc))
            await _close(connection)
            return
        if broken.is_set():
            self.record("disconnect", "info", error="connection closed by the broker or network")
            await _close(connection)
            return
        await _close(connection)
        self.record("disconnect", "ok")

    @abc.abstractmethod
    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        """Work until stopped (return) or until the connection breaks (raise or set
        ``broken``)."""

    async def declare(self, channel: AbstractChannel) -> AbstractQueue:
        return await channel.declare_queue(self.queue, durable=self.spec.durable,
                                           timeout=self.spec.confirm_timeout)

    async def channel(self, connection: AbstractConnection, *,
                      publisher_confirms: bool = False) -> AbstractChannel:
        # Every broker round trip is bounded: a broker that stops answering must not
        # hold a client (and the run's stop) forever.
        return await asyncio.wait_for(
            connection.channel(publisher_confirms=publisher_confirms),
            self.spec.confirm_timeout)

    async def exchange(self, channel: AbstractChannel) -> AbstractExchange:
        """Where publishes go: the workload's exchange (not declared again here, so a
        node that lost it refuses the publish), or the default exchange."""
        if self.spec.exchange is None:
            return channel.default_exchange
        return await channel.get_exchange(self.spec.exchange, ensure=False)

    def message(self, msg: str) -> aio_pika.Message:
        return content.message(msg, self.spec)

    def received(self, message: AbstractIncomingMessage) -> tuple[str, dict[str, Any]]:
        """A delivery's message id, and ``corrupt`` (what differs from what was
        published) for its line when it is not whole."""
        msg = content.message_id(message.body)
        corrupt = content.differences(msg, message.body, message, self.spec)
        return msg, {} if corrupt is None else {"corrupt": corrupt}


class Publisher(Client):
    """Publishes ``<id>-<seq>`` with confirms at the workload's rate, at most
    ``window`` unconfirmed at a time; sequences go on across reconnections."""

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.seq = itertools.count(1)
        self.window = asyncio.Semaphore(ctx.spec.window)
        self.pending: set[asyncio.Task[None]] = set()

    @property
    def stop(self) -> asyncio.Event:
        return self.ctx.stop_publishing

    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        channel = await self.channel(connection, publisher_confirms=True)
        await self.declare(channel)
        exchange = await self.exchange(channel)
        interval = 1.0 / self.spec.rate
        next_at = time.monotonic()
        try:
            while self.running():
                await _sleep_until(next_at - time.monotonic(), self.stop, broken)
                next_at = max(next_at + interval, time.monotonic() - interval)
                await self.window.acquire()
                if broken.is_set() or channel.is_closed:
                    self.window.release()
                    raise ConnectionLost("channel closed")
                if not self.running():
                    self.window.release()
                    break
                seq = next(self.seq)
                msg = f"{self.id}-{seq}"
                self.record("publish", "invoke", msg=msg, queue=self.queue,
                            **content.publish_fields(msg, self.spec))
                self._spawn(self._publish(exchange, msg))
                every = self.spec.unroutable_every
                if every and seq % every == 0:
                    probe = f"{self.id}-u{seq // every}"
                    self.record("unroutable", "invoke", probe=probe, key=UNROUTABLE_KEY)
                    self._spawn(self._probe(exchange, probe))
        finally:
            # Outstanding confirms end as ok, fail or info before the session does.
            await asyncio.gather(*self.pending)

    def _spawn(self, publish: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(publish)
        self.pending.add(task)
        task.add_done_callback(self.pending.discard)

    async def _probe(self, exchange: AbstractExchange, probe: str) -> None:
        """A mandatory publish no queue can take: ``unroutable ok`` says whether it came
        back (basic.return) before its confirm. The client library matches a return to
        its publish by message id."""
        try:
            answer = await answer_of(exchange.publish(
                aio_pika.Message(probe.encode(), message_id=probe), routing_key=UNROUTABLE_KEY,
                mandatory=True, timeout=self.spec.confirm_timeout))
        except DeliveryError as exc:
            self.record("unroutable", "fail", probe=probe, error=_describe(exc))
        except CLIENT_ERRORS as exc:
            self.record("unroutable", "info", probe=probe, error=_describe(exc))
        else:
            self.record("unroutable", "ok", probe=probe,
                        returned=isinstance(answer, DeliveredMessage))

    async def _publish(self, exchange: AbstractExchange, msg: str) -> None:
        try:
            await answer_of(exchange.publish(
                self.message(msg), routing_key=content.routing_key(msg, self.queue, self.spec),
                mandatory=False, timeout=self.spec.confirm_timeout))
        except DeliveryError as exc:
            self.record("confirm", "fail", msg=msg, queue=self.queue, error=_describe(exc))
        except CLIENT_ERRORS as exc:
            self.record("confirm", "info", msg=msg, queue=self.queue, error=_describe(exc))
        else:
            self.record("confirm", "ok", msg=msg, queue=self.queue)
        finally:
            self.window.release()


class TxPublisher(Client):
    """Publishes batches in transactions: ``tx.commit-ok`` confirms the batch. Every
    ``tx_rollback_every``-th batch is rolled back instead: ``tx.rollback-ok`` says its
    messages were never published (``confirm fail`` with ``rolled_back``), so none may
    ever be delivered."""

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.seq = itertools.count(1)
        self.batches = itertools.count(1)

    @property
    def stop(self) -> asyncio.Event:
        return self.ctx.stop_publishing

    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        channel = await self.channel(connection)
        await self.declare(channel)
        exchange = await self.exchange(channel)
        tx = channel.transaction()
        await tx.select()
        interval = self.spec.tx_batch / self.spec.rate
        while self.running():
            if broken.is_set():
                raise ConnectionLost("connection closed")
            # Only what was published gets an outcome: a batch cut short by a lost
            # connection has no confirm line for ids it never used.
            batch: list[str] = []
            every = self.spec.tx_rollback_every
            rollback = every > 0 and next(self.batches) % every == 0
            try:
                for _ in range(self.spec.tx_batch):
                    msg = f"{self.id}-{next(self.seq)}"
                    self.record("publish", "invoke", msg=msg, queue=self.queue,
                                **content.publish_fields(msg, self.spec))
                    batch.append(msg)
                    await answer_of(exchange.publish(
                        self.message(msg), mandatory=False,
                        routing_key=content.routing_key(msg, self.queue, self.spec)))
                    self.record("publish", "ok", msg=msg, queue=self.queue)
                if rollback:
                    await answer_of(tx.rollback(timeout=self.spec.confirm_timeout))
                else:
                    await answer_of(tx.commit(timeout=self.spec.confirm_timeout))
            except CLIENT_ERRORS as exc:
                for msg in batch:
                    self.record("confirm", "info", msg=msg, queue=self.queue,
                                error=_describe(exc))
                raise
            for msg in batch:
                if rollback:
                    self.record("confirm", "fail", msg=msg, queue=self.queue,
                                rolled_back=True)
                else:
                    self.record("confirm", "ok", msg=msg, queue=self.queue)
            await _sleep_until(interval, self.stop, broken)


class Consumer(Client):
    """``basic.consume`` with manual acks and a prefetch (or no-ack), asking for
    ``x-cancel-on-ha-failover`` or not; a consumer the broker cancels consumes again at
    once."""

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext, *,
                 no_ack: bool = False, cancel_on_failover: bool = False) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.no_ack = no_ack
        self.mode = "no-ack" if no_ack else "ack"
        self.cancel_on_failover = cancel_on_failover
        self.prefetch = ctx.spec.prefetch
        self.leaving = asyncio.Event()  # set: close the connection now, holding what it has

    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        channel = await self.channel(connection)
        channel.close_callbacks.add(lambda *_: broken.set())
        cancelled = asyncio.Event()
        (await channel.get_underlay_channel()).on_consumer_cancel_callbacks.add(
            lambda _frame: cancelled.set())
        await channel.set_qos(prefetch_count=self.prefetch, timeout=self.spec.confirm_timeout)
        queue = await self.declare(channel)
        arguments: FieldTable | None = (
            {"x-cancel-on-ha-failover": True} if self.cancel_on_failover else None)
        while True:
            tag = await queue.consume(self._on_message, no_ack=self.no_ack, arguments=arguments,
                                      timeout=self.spec.confirm_timeout)
            self.record("consume", "ok", queue=self.queue, mode=self.mode,
                        cancel_on_failover=self.cancel_on_failover, prefetch=self.prefetch)
            ended = await _first(broken, cancelled, self.stop, self.leaving)
            if ended is broken:
                raise ConnectionLost("connection or channel closed")
            if ended is self.leaving:
                self.leaving.clear()
                return
            if ended is cancelled:
                self.record("cancel", "info", queue=self.queue, mode=self.mode,
                            error="cancelled by the broker")
                cancelled.clear()
                continue
            await queue.cancel(tag, timeout=self.spec.confirm_timeout)
            self.record("cancel", "ok", queue=self.queue, mode=self.mode)
            return

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        msg, corrupt = self.received(message)
        self.record("deliver", "ok", msg=msg, queue=self.queue,
                    redelivered=bool(message.redelivered), mode=self.mode, **corrupt)
        if self.no_ack:
            return
        if self.spec.ack_delay:
            await asyncio.sleep(self.spec.ack_delay)
        await self.settle(message, msg)

    async def settle(self, message: AbstractIncomingMessage, msg: str) -> None:
        """Answer one delivery: an ack."""
        try:
            await answer_of(message.ack())
        except CLIENT_ERRORS as exc:
            self.record("ack", "fail", msg=msg, queue=self.queue, error=_describe(exc))
        else:
            self.record("ack", "ok", msg=msg, queue=self.queue)


class MultipleAcker(Consumer):
    """A consumer that acks in pairs, with one ``basic.ack`` (multiple=true) for every
    second delivery: it covers each delivery of the channel up to it that is not yet
    answered, and the history gets one ack line per message it covered. A delivery
    with none older unanswered waits for the next."""

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext) -> None:
        super().__init__(client_id, queue, node, ctx)
        # deliveries not yet answered, in delivery order, each with its channel (open
        # when it arrived)
        self.unanswered: list[tuple[AbstractIncomingMessage, Any]] = []

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        with contextlib.suppress(ChannelInvalidStateError):  # closed: nothing to answer
            self.unanswered.append((message, message.channel))
        await super()._on_message(message)

    async def settle(self, message: AbstractIncomingMessage, msg: str) -> None:
        # a closed channel's deliveries went back to the queue with it
        self.unanswered = [(m, c) for m, c in self.unanswered if not c.is_closed]
        channel = next((c for m, c in self.unanswered if m is message), None)
        if channel is None:
            return  # a later delivery's ack covered it, or its channel closed
        tag = message.delivery_tag
        assert tag is not None  # every delivery in ack mode has one
        covered = [m for m, c in self.unanswered if c is channel
                   and m.delivery_tag is not None and m.delivery_tag <= tag]
        if len(covered) < 2:
            return
        self.unanswered = [(m, c) for m, c in self.unanswered if m not in covered]
        try:
            await answer_of(message.ack(multiple=True))
        except CLIENT_ERRORS as exc:
            for m in covered:
                self.record("ack", "fail", msg=content.message_id(m.body), queue=self.queue,
                            multiple=True, error=_describe(exc))
        else:
            for m in covered:
                self.record("ack", "ok", msg=content.message_id(m.body), queue=self.queue,
                            multiple=True)


class Requeuer(Consumer):
    """A consumer with prefetch 1 that answers every third delivery with ``basic.nack``
    (requeue=true), ``basic.reject`` (requeue=true) or ``basic.reject`` (requeue=false),
    the three in turn, and acks the rest: the broker must put each requeued one back
    where it was, ahead of later messages, and drop each rejected one for good."""

    EVERY = 3
    ANSWERS = (("nack", True), ("reject", True), ("reject", False))

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.prefetch = 1
        self.deliveries = itertools.count(1)
        self.requeues = itertools.count()

    async def settle(self, message: AbstractIncomingMessage, msg: str) -> None:
        if next(self.deliveries) % self.EVERY:
            await super().settle(message, msg)
            return
        op, requeue = self.ANSWERS[next(self.requeues) % len(self.ANSWERS)]
        try:
            if op == "nack":
                await answer_of(message.nack(requeue=requeue))
            else:
                await answer_of(message.reject(requeue=requeue))
        except CLIENT_ERRORS as exc:
            self.record(op, "fail", msg=msg, queue=self.queue, requeue=requeue,
                        error=_describe(exc))
        else:
            self.record(op, "ok", msg=msg, queue=self.queue, requeue=requeue)


class Leaver(Consumer):
    """A consumer that leaves at every tenth delivery: it closes its connection without
    acking that delivery (nor any other it holds), and comes back. The broker must
    requeue what it held, each to its place ahead of the later messages."""

    EVERY = 10

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.deliveries = itertools.count(1)

    async def settle(self, message: AbstractIncomingMessage, msg: str) -> None:
        if self.leaving.is_set():
            return  # on its way out: hold it
        if next(self.deliveries) % self.EVERY:
            await super().settle(message, msg)
            return
        self.leaving.set()


class Recoverer(Consumer):
    """A consumer with prefetch 1 that answers every third delivery with
    ``basic.recover`` (requeue=true) instead of an ack: the broker must give the
    unacknowledged delivery back (it comes again, flagged redelivered)."""

    EVERY = 3

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.prefetch = 1
        self.deliveries = itertools.count(1)

    async def settle(self, message: AbstractIncomingMessage, msg: str) -> None:
        if next(self.deliveries) % self.EVERY:
            await super().settle(message, msg)
            return
        try:
            await answer_of(message.channel.basic_recover(
                requeue=True, timeout=self.spec.confirm_timeout))
        except CLIENT_ERRORS as exc:
            self.record("recover", "fail", queue=self.queue, requeue=True,
                        error=_describe(exc))
        else:
            self.record("recover", "ok", queue=self.queue, requeue=True)


class Getter(Client):
    """Polls with ``basic.get`` at the workload's get rate: manual ack, or with
    ``no_ack`` (settled as the broker sends it)."""

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext, *,
                 no_ack: bool = False) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.no_ack = no_ack

    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        channel = await self.channel(connection)
        queue = await self.declare(channel)
        interval = 1.0 / self.spec.get_rate
        while self.running():
            if broken.is_set():
                raise ConnectionLost("connection closed")
            await get_one(self, queue, no_ack=self.no_ack)
            await _sleep_until(interval, self.stop, broken)


class Churner(Client):
    """Declares a queue of its own (``CHURN_PREFIX<id>.<n>``, matched by the run's
    policy: durable, and every other one exclusive, which the design never mirrors) at
    the workload's churn rate and deletes each once ``churn_keep`` newer ones exist, so
    every queue lives a few seconds: long enough for a node to go down holding it and
    miss its delete. Queues whose declare or delete had no answer
    are deleted again on the next connection (a delete of a missing queue is a no-op);
    when the run stops, every queue it holds is deleted."""

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.seq = itertools.count(1)
        self.live: deque[str] = deque()  # declared (or maybe), oldest first

    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        channel = await self.channel(connection)
        interval = 1.0 / self.spec.churn_rate
        while self.running():
            if broken.is_set():
                raise ConnectionLost("connection closed")
            while len(self.live) > self.spec.churn_keep:
                await self._queue_op(channel, "delete", self.live[0])
            n = next(self.seq)
            await self._queue_op(channel, "declare", f"{CHURN_PREFIX}{self.id}.{n}",
                                 exclusive=n % 2 == 0)
            await _sleep_until(interval, self.stop, broken)
        while self.live:
            await self._queue_op(channel, "delete", self.live[0])

    async def _queue_op(self, channel: AbstractChannel, op: str, name: str, *,
                        exclusive: bool = False) -> None:
        """``queue.declare`` or ``queue.delete`` of ``name``, recorded as ``op``; a queue
        is in ``live`` from its declare until a delete of it is answered (an exclusive
        one goes with its connection, and a delete of a missing queue is a no-op)."""
        self.record(op, "invoke", queue=name, **({"exclusive": True} if exclusive else {}))
        if op == "declare":
            self.live.append(name)
        try:
            if op == "declare":
                await answer_of(channel.declare_queue(
                    name, durable=not exclusive, exclusive=exclusive,
                    timeout=self.spec.confirm_timeout))
            else:
                await answer_of(channel.queue_delete(name, timeout=self.spec.confirm_timeout))
        except CLIENT_ERRORS as exc:
            self.record(op, "info", queue=name, error=_describe(exc))
            raise
        self.record(op, "ok", queue=name)
        if op == "delete":
            self.live.remove(name)


class Purger(Client):
    """Purges its queue, one that only publishers use, every ``purge_interval`` seconds
    while they publish: what a purge removed must never be delivered again, also not
    by a mirror promoted later (the master broadcasts the purge to its mirrors)."""

    @property
    def stop(self) -> asyncio.Event:
        return self.ctx.stop_publishing

    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        channel = await self.channel(connection)
        queue = await self.declare(channel)
        while self.running():
            await _sleep_until(self.spec.purge_interval, self.stop, broken)
            if broken.is_set():
                raise ConnectionLost("connection closed")
            if not self.running():
                break
            self.record("purge", "invoke", queue=self.queue)
            try:
                purged = await answer_of(queue.purge(timeout=self.spec.confirm_timeout))
            except CLIENT_ERRORS as exc:
                self.record("purge", "info", queue=self.queue, error=_describe(exc))
                raise
            self.record("purge", "ok", queue=self.queue,
                        count=purged.message_count if purged is not None else None)


async def get_one(client: Client, queue: AbstractQueue, *, no_ack: bool = False) -> str | None:
    """One recorded ``basic.get`` and, unless ``no_ack``, its ack; the message id, or
    None when empty."""
    mode = "no-ack" if no_ack else "ack"
    client.record("get", "invoke", queue=client.queue, mode=mode)
    try:
        message = await answer_of(queue.get(no_ack=no_ack, fail=False,
                                            timeout=client.spec.confirm_timeout))
    except CLIENT_ERRORS as exc:
        client.record("get", "info", queue=client.queue, mode=mode, error=_describe(exc))
        raise
    if message is None:
        client.record("get", "ok", queue=client.queue, mode=mode)
        return None
    msg, corrupt = client.received(message)
    client.record("get", "ok", msg=msg, queue=client.queue, mode=mode,
                  redelivered=bool(message.redelivered), **corrupt)
    if no_ack:
        return msg
    try:
        await answer_of(message.ack())
    except CLIENT_ERRORS as exc:
        client.record("ack", "fail", msg=msg, queue=client.queue, error=_describe(exc))
        raise
    client.record("ack", "ok", msg=msg, queue=client.queue)
    return msg


# -- small asyncio helpers ---------------------------------------------------------------

def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _close(connection: AbstractConnection) -> None:
    with contextlib.suppress(*CLIENT_ERRORS, asyncio.CancelledError):
        await asyncio.wait_for(connection.close(), CONNECT_TIMEOUT)


async def _sleep_until(seconds: float, *wake: asyncio.Event) -> None:
    """Sleep, but return early once any of ``wake`` is set: a session's pauses wake on
    its connection breaking too, so a client follows a failover at once, not at its
    next tick."""
    if seconds > 0 and not any(event.is_set() for event in wake):
        await _first(*wake, timeout=seconds)


async def _first(*events: asyncio.Event, timeout: float | None = None) -> asyncio.Event | None:
    """The first of ``events`` to be set; None when ``timeout`` passes first."""
    tasks = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        done, _ = await asyncio.wait(tasks, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
    return next((event for event, task in zip(events, tasks, strict=True) if task in done),
                None)
