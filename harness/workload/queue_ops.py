"""The clients that act on queues rather than on messages: a churner that declares and
deletes queues of its own, and a purger that empties a queue while it is published to."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque

from aio_pika.abc import AbstractChannel, AbstractConnection

from harness.workload.answers import CLIENT_ERRORS, answer_of, describe
from harness.workload.client import Client, ClientContext, ConnectionLost
from harness.workload.spec import CHURN_PREFIX
from harness.workload.waits import sleep_until


class QueueOwner(Client):
    """A client that declares queues of its own (named ``CHURN_PREFIX<id>.<...>``, matched
    by the run's policy) and deletes them again, each ``declare`` and ``delete``
    recorded. A queue is in ``live`` from its declare until a delete of it is answered
    (an exclusive or auto-delete one may go by itself, and a delete of a missing queue
    is a no-op); what a session leaves behind is deleted at the start of the next."""

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.seq = itertools.count(1)
        self.live: deque[str] = deque()  # declared (or maybe), oldest first

    def own_queue(self, n: int) -> str:
        return f"{CHURN_PREFIX}{self.id}.{n}"

    async def delete_oldest(self, channel: AbstractChannel, keep: int = 0) -> None:
        while len(self.live) > keep:
            await self.queue_op(channel, "delete", self.live[0])

    async def queue_op(self, channel: AbstractChannel, op: str, name: str, *,
                       exclusive: bool = False, auto_delete: bool = False) -> None:
        """``queue.declare`` (durable unless exclusive or auto-delete) or
        ``queue.delete`` of ``name``, recorded as ``op``."""
        marks = {"exclusive": True} if exclusive else {}
        if auto_delete:
            marks["auto_delete"] = True
        self.record(op, "invoke", queue=name, **marks)
        if op == "declare":
            self.live.append(name)
        try:
            if op == "declare":
                await answer_of(channel.declare_queue(
                    name, durable=not (exclusive or auto_delete), exclusive=exclusive,
                    auto_delete=auto_delete, timeout=self.spec.confirm_timeout))
            else:
                await answer_of(channel.queue_delete(name, timeout=self.spec.confirm_timeout))
        except CLIENT_ERRORS as exc:
            self.record(op, "info", queue=name, error=describe(exc))
            raise
        self.record(op, "ok", queue=name)
        if op == "delete":
            self.live.remove(name)


class Churner(QueueOwner):
    """Declares a queue of its own at the workload's churn rate, durable and every other
    one exclusive (which the design never mirrors), and deletes each once ``churn_keep``
    newer ones exist, so every queue lives a few seconds: long enough for a node to go
    down holding it and miss its delete. Queues whose declare or delete had no answer
    are deleted again on the next connection; when the run stops, every queue it holds
    is deleted."""

    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        channel = await self.channel(connection)
        interval = 1.0 / self.spec.churn_rate
        while self.running():
            if broken.is_set():
                raise ConnectionLost("connection closed")
            await self.delete_oldest(channel, keep=self.spec.churn_keep)
            n = next(self.seq)
            await self.queue_op(channel, "declare", self.own_queue(n), exclusive=n % 2 == 0)
            await sleep_until(interval, self.stop, broken)
        await self.delete_oldest(channel)


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
            await sleep_until(self.spec.purge_interval, self.stop, broken)
            if broken.is_set():
                raise ConnectionLost("connection closed")
            if not self.running():
                break
            self.record("purge", "invoke", queue=self.queue)
            try:
                purged = await answer_of(queue.purge(timeout=self.spec.confirm_timeout))
            except CLIENT_ERRORS as exc:
                self.record("purge", "info", queue=self.queue, error=describe(exc))
                raise
            self.record("purge", "ok", queue=self.queue,
                        count=purged.message_count if purged is not None else None)
