"""The rule prober: asks the broker, over and over, for what it must refuse and for
what it must do, on queues of its own, from a connection to its own node (A) and one
to a node that changes every cycle (B: the next node in the cluster's order, itself
every len(nodes)-th cycle, so each rule is asked both where the queue's master is and
across nodes).

A cycle, on the queues ``<own>`` (durable), ``<own>.auto`` (auto-delete) and
``<own>.own`` (exclusive to A), where ``<own>`` is ``CHURN_PREFIX<id>.<n>``:

1. A declares ``<own>`` and publishes one persistent message to it (confirmed).
   B: ``delete-if-empty`` (queue.delete if_empty) must be refused.
2. A takes the message back (basic.get no_ack) and consumes ``<own>`` exclusively.
   B: ``consume-exclusive-held`` (a plain basic.consume) must be refused, and
   ``delete-if-unused`` (queue.delete if_unused) too.
3. A declares ``<own>.auto`` and consumes it. B: ``consume-exclusive-shared`` (an
   exclusive basic.consume beside A's consumer) must be refused; ``consume-shared`` (a
   plain one) must be done.
4. A cancels its consumer: ``auto-delete-kept`` (A's passive declare, B's consumer
   still there) must be done, and then ``delete-if-unused-elsewhere`` (A's
   queue.delete if_unused, B's consumer in use) refused. B closes its consumer's channel:
   ``auto-delete-after-last`` (A's passive declare) must be refused, asked again for
   up to ``AUTO_DELETE_S``, since the cancel reaches the queue's master after B's
   channel close.
5. A declares ``<own>.own``. B, and another connection to A's node when B is on
   another one: ``exclusive-queue-locked`` (basic.consume) must be refused.
6. A deletes its three queues (one whose master is down stays for a later cycle).

Each ask is one ``rule`` line (docs/history-format.md): ``ok`` when the broker did
it, ``fail`` when it refused with a channel error (its ``code``), ``info`` when no
answer came; the checker's ``rule-broken`` judges it against ``expect``. The prober's
own messages are no workload messages, and are not recorded. A broken B connection
ends the cycle; a broken A connection the session, whose successor deletes what it
left (a delete of a missing queue is a no-op).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika
from aio_pika.abc import AbstractChannel, AbstractConnection
from aiormq.exceptions import (
    ChannelAccessRefused,
    ChannelLockedResource,
    ChannelNotFoundEntity,
    ChannelPreconditionFailed,
)

from harness.workload.answers import CLIENT_ERRORS, answer_of, describe
from harness.workload.client import (
    CONNECT_TIMEOUT,
    SESSION_ENDS,
    ClientContext,
    ConnectionLost,
    amqp_url,
    close_quietly,
)
from harness.workload.queue_ops import QueueOwner
from harness.workload.waits import sleep_until

# The channel errors that refuse what was asked, by their reply codes.
REFUSALS: dict[type[BaseException], int] = {
    ChannelAccessRefused: 403, ChannelNotFoundEntity: 404, ChannelLockedResource: 405,
    ChannelPreconditionFailed: 406}
# A consumer on another node reaches the queue's master after its consume-ok, and a
# cancel after its cancel-ok: the prober waits this long before acting on either.
SETTLE_S = 0.5
AUTO_DELETE_S = 2.0  # ``auto-delete-after-last`` is asked again until refused, this long
PROBE_BODY = b"mirrorchaos rule probe"

Ask = Callable[[AbstractChannel], Awaitable[Any]]


class CycleAbandoned(Exception):
    """B's connection broke, or an ask had no answer: the cycle ends there."""


class RuleProber(QueueOwner):
    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.held: list[AbstractChannel] = []  # B's channels whose consumers stay a while

    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        channel = await self.channel(connection, publisher_confirms=True)
        while self.running():
            if broken.is_set():
                raise ConnectionLost("connection closed")
            n = next(self.seq)  # the cycle's queues are named by it too
            nodes = self.ctx.nodes
            b_node = nodes[(nodes.index(self.node) + n) % len(nodes)]
            b = await self._connect_to(b_node)
            if b is not None:
                try:
                    await self._cycle(connection, channel, b, b_node, n)
                except CycleAbandoned:
                    if broken.is_set():
                        raise ConnectionLost("connection closed") from None
                finally:
                    self.held.clear()
                    await close_quietly(b)
            await sleep_until(self.spec.rule_interval, self.stop, broken)
        await self._delete_own(connection)

    async def _delete_own(self, connection: AbstractConnection) -> None:
        """Delete every queue of its own, each on a channel of its own: one the broker
        cannot delete now (its master's node is down) stays for a later cycle, and the
        prober goes on asking meanwhile."""
        for name in list(self.live):
            channel = await self.channel(connection)
            try:
                await self.queue_op(channel, "delete", name)
            except CLIENT_ERRORS as exc:
                if connection.is_closed:
                    raise ConnectionLost(describe(exc)) from exc
            finally:
                await close_quietly(channel)

    async def _connect_to(self, node: str) -> AbstractConnection | None:
        """A second connection (B, or one to A's node), through this client's own link to
        ``node``; None when it cannot connect (what it was for is not asked)."""
        try:
            host, port = await self.ctx.address(self.id, node)
            return await aio_pika.connect(
                amqp_url(host, port, self.spec.heartbeat), timeout=CONNECT_TIMEOUT,
                client_properties={"connection_name": f"{self.id}-{node}"})
        except CLIENT_ERRORS:
            return None

    async def _cycle(self, a: AbstractConnection, channel: AbstractChannel,
                     b: AbstractConnection, b_node: str, n: int) -> None:
        own = self.own_queue(n)
        auto, exclusive = f"{own}.auto", f"{own}.own"
        timeout = self.spec.confirm_timeout
        try:
            await self._delete_own(a)  # what an abandoned cycle or session left
            await self.queue_op(channel, "declare", own)
            await answer_of(channel.default_exchange.publish(
                aio_pika.Message(PROBE_BODY, delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                routing_key=own, timeout=timeout))
            await self._ask(b, b_node, "delete-if-empty", own, False,
                            lambda ch: ch.queue_delete(own, if_empty=True, timeout=timeout))
            queue = await channel.get_queue(own, ensure=False)
            await answer_of(queue.get(no_ack=True, fail=False, timeout=timeout))
            tag = await answer_of(queue.consume(_ignore, exclusive=True, timeout=timeout))
            await self._ask(b, b_node, "consume-exclusive-held", own, False,
                            lambda ch: self._consume(ch, own, exclusive=False))
            await self._ask(b, b_node, "delete-if-unused", own, False,
                            lambda ch: ch.queue_delete(own, if_unused=True, timeout=timeout))
            await answer_of(queue.cancel(tag, timeout=timeout))

            await self.queue_op(channel, "declare", auto, auto_delete=True)
            auto_queue = await channel.get_queue(auto, ensure=False)
            tag = await answer_of(auto_queue.consume(_ignore, timeout=timeout))
            await self._ask(b, b_node, "consume-exclusive-shared", auto, False,
                            lambda ch: self._consume(ch, auto, exclusive=True))
            await self._ask(b, b_node, "consume-shared", auto, True,
                            lambda ch: self._consume(ch, auto, exclusive=False, hold=True))
            await asyncio.sleep(SETTLE_S)
            await answer_of(auto_queue.cancel(tag, timeout=timeout))
            if await self._ask(a, self.node, "auto-delete-kept", auto, True,
                               lambda ch: ch.declare_queue(auto, passive=True,
                                                           timeout=timeout)):
                await self._ask(a, self.node, "delete-if-unused-elsewhere", auto, False,
                                lambda ch: ch.queue_delete(auto, if_unused=True,
                                                           timeout=timeout))
            for held in self.held:
                await close_quietly(held)
            self.held.clear()
            await asyncio.sleep(SETTLE_S)
            await self._ask(a, self.node, "auto-delete-after-last", auto, False,
                            lambda ch: ch.declare_queue(auto, passive=True, timeout=timeout),
                            again_for=AUTO_DELETE_S)

            await self.queue_op(channel, "declare", exclusive, exclusive=True)
            await self._ask(b, b_node, "exclusive-queue-locked", exclusive, False,
                            lambda ch: self._consume(ch, exclusive, exclusive=False))
            if b_node != self.node:
                await self._ask_on_own_node("exclusive-queue-locked", exclusive,
                                            lambda ch: self._consume(ch, exclusive,
                                                                     exclusive=False))
            await self._delete_own(a)
        except CLIENT_ERRORS as exc:
            # A's own steps (declares, the publish, its consumer): A's connection broke
            # or its queue is gone; the next session deletes what is left.
            raise ConnectionLost(describe(exc)) from exc

    async def _ask_on_own_node(self, rule: str, queue: str, ask: Ask) -> None:
        """A rule that holds between connections of one node (an exclusive queue exists
        on its connection's node only) is asked every cycle, on a connection to A's node
        of its own, besides B's."""
        other = await self._connect_to(self.node)
        if other is not None:
            try:
                await self._ask(other, self.node, rule, queue, False, ask)
            finally:
                await close_quietly(other)

    async def _consume(self, channel: AbstractChannel, name: str, *, exclusive: bool,
                       hold: bool = False) -> str:
        queue = await channel.get_queue(name, ensure=False)
        tag = await queue.consume(_ignore, exclusive=exclusive,
                                  timeout=self.spec.confirm_timeout)
        if hold:
            self.held.append(channel)
        return str(tag)

    async def _ask(self, connection: AbstractConnection, node: str, rule: str, queue: str,
                   must_do: bool, ask: Ask, again_for: float = 0.0) -> bool:
        """One ``rule`` line: ``ask`` on a channel of its own (a refusal closes it); one
        that must be refused is asked again while it is granted, until ``again_for``
        passed. Whether the broker did it."""
        fields = {"rule": rule, "expect": "done" if must_do else "refused", "queue": queue}
        self.ctx.recorder.record(self.id, "rule", "invoke", node=node, **fields)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + again_for
        while True:
            error = await self._once(connection, ask)
            if error is None:  # granted: asked again until the deadline
                if loop.time() < deadline:
                    await asyncio.sleep(0.1)
                    continue
                self.ctx.recorder.record(self.id, "rule", "ok", node=node, **fields)
                return True
            code = REFUSALS.get(type(error))
            if code is None:
                self.ctx.recorder.record(self.id, "rule", "info", node=node, **fields,
                                         error=describe(error))
                raise CycleAbandoned(describe(error))
            self.ctx.recorder.record(self.id, "rule", "fail", node=node, **fields, code=code,
                                     error=describe(error))
            return False

    async def _once(self, connection: AbstractConnection,
                    ask: Ask) -> BaseException | None:
        """One ask: None when the broker did it, else the error it raised."""
        try:
            channel = await self.channel(connection)
        except SESSION_ENDS as exc:
            return exc
        try:
            await answer_of(ask(channel))
        except CLIENT_ERRORS as exc:
            return exc
        except RuntimeError as exc:  # the library's word for a channel or connection gone
            return ConnectionLost(describe(exc))
        finally:
            if channel not in self.held:
                await close_quietly(channel)
        return None


async def _ignore(message: aio_pika.abc.AbstractIncomingMessage) -> None:
    """B's consumers and A's never get a message: their queues hold none by then."""
