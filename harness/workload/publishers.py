"""The publishing clients: confirmed publishes within a window of unconfirmed ones,
with mandatory probes no queue can take, publishes every queue must get, and
transactional batches, some rolled back."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Coroutine
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractExchange
from aio_pika.exceptions import DeliveryError
from aiormq.abc import DeliveredMessage

from harness.workload import content
from harness.workload.answers import CLIENT_ERRORS, answer_of, describe
from harness.workload.client import Client, ClientContext, ConnectionLost
from harness.workload.spec import (
    EVERY_QUEUE_EXCHANGE,
    EVERY_QUEUE_KEY,
    FANOUT_EXCHANGE,
    UNROUTABLE_KEY,
)
from harness.workload.waits import sleep_until


class Publisher(Client):
    """Publishes ``<id>-<seq>`` with confirms at the workload's rate, at most
    ``window`` unconfirmed at a time; sequences go on across reconnections."""

    probes = True  # whether it sends the workload's unroutable probes

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
        routes = await self.routes(channel)
        interval = 1.0 / self.spec.rate
        next_at = time.monotonic()
        try:
            while self.running():
                await sleep_until(next_at - time.monotonic(), self.stop, broken)
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
                exchange, key = routes[seq % len(routes)]
                self._spawn(self._publish(exchange, key or self.routing_key(msg), msg))
                every = self.spec.unroutable_every
                if every and self.probes and seq % every == 0:
                    probe = f"{self.id}-u{seq // every}"
                    self.record("unroutable", "invoke", probe=probe, key=UNROUTABLE_KEY)
                    self._spawn(self._probe(routes[0][0], probe))
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
            self.record("unroutable", "fail", probe=probe, error=describe(exc))
        except CLIENT_ERRORS as exc:
            self.record("unroutable", "info", probe=probe, error=describe(exc))
        else:
            self.record("unroutable", "ok", probe=probe,
                        returned=isinstance(answer, DeliveredMessage))

    async def _publish(self, exchange: AbstractExchange, routing_key: str, msg: str) -> None:
        try:
            await answer_of(exchange.publish(
                self.message(msg), routing_key=routing_key, mandatory=False,
                timeout=self.spec.confirm_timeout))
        except DeliveryError as exc:
            self.record("confirm", "fail", msg=msg, queue=self.queue, error=describe(exc))
        except CLIENT_ERRORS as exc:
            self.record("confirm", "info", msg=msg, queue=self.queue, error=describe(exc))
        else:
            self.record("confirm", "ok", msg=msg, queue=self.queue)
        finally:
            self.window.release()

    async def routes(self, channel: AbstractChannel) -> list[tuple[AbstractExchange, str]]:
        """The exchanges its messages go through in turn, each with the routing key every
        message gets there ("": its own, `routing_key`); probes go through the first."""
        return [(await self.exchange(channel), "")]

    def routing_key(self, msg: str) -> str:
        return content.routing_key(msg, self.queue, self.spec)


class FanoutPublisher(Publisher):
    """A `Publisher` whose every message must reach every queue: in turn through the
    workload's fanout exchange, with the message's id as its routing key (which no
    binding names), and through its direct exchange, which binds every queue by one
    key. It sends no unroutable probes (the fanout exchange would route them)."""

    probes = False

    async def routes(self, channel: AbstractChannel) -> list[tuple[AbstractExchange, str]]:
        return [(await channel.get_exchange(FANOUT_EXCHANGE, ensure=False), ""),
                (await channel.get_exchange(EVERY_QUEUE_EXCHANGE, ensure=False),
                 EVERY_QUEUE_KEY)]

    def routing_key(self, msg: str) -> str:
        return msg


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
                                error=describe(exc))
                raise
            for msg in batch:
                if rollback:
                    self.record("confirm", "fail", msg=msg, queue=self.queue,
                                rolled_back=True)
                else:
                    self.record("confirm", "ok", msg=msg, queue=self.queue)
            await sleep_until(interval, self.stop, broken)
