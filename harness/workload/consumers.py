"""The consuming clients: ``basic.consume`` with acks (or none), and the consumers that
answer some deliveries otherwise: acking several at once, requeueing or rejecting,
leaving without acking, recovering."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from typing import Any

from aio_pika.abc import AbstractConnection, AbstractIncomingMessage
from aio_pika.exceptions import ChannelInvalidStateError
from aiormq.abc import FieldTable

from harness.workload import content
from harness.workload.answers import CLIENT_ERRORS, answer_of, describe
from harness.workload.client import Client, ClientContext, ConnectionLost
from harness.workload.waits import first_set


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
            ended = await first_set(broken, cancelled, self.stop, self.leaving)
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
            self.record("ack", "fail", msg=msg, queue=self.queue, error=describe(exc))
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
                            multiple=True, error=describe(exc))
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
                        error=describe(exc))
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
                        error=describe(exc))
        else:
            self.record("recover", "ok", queue=self.queue, requeue=True)
