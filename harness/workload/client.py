"""A workload client's life: one logical process with a real aio-pika connection
through its own address (a toxiproxy link per client and node), that connects, runs a
session, and reconnects; what every kind of client shares.

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
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
)

from harness.workload import content
from harness.workload.answers import CLIENT_ERRORS, answer_of, describe
from harness.workload.recorder import Recorder
from harness.workload.spec import WorkloadSpec
from harness.workload.waits import sleep_until

Address = Callable[[str, str], Awaitable[tuple[str, int]]]
CONNECT_TIMEOUT = 5.0


class ConnectionLost(Exception):
    """The session's connection or channel closed under it."""


SESSION_ENDS: tuple[type[BaseException], ...] = (ConnectionLost, *CLIENT_ERRORS)


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
                await sleep_until(attempt_at + self.spec.reconnect_delay - self.ctx.clock(),
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
            self.record("connect", "fail", error=describe(exc))
            return None
        self.record("connect", "ok")
        return connection

    async def _session(self, connection: AbstractConnection) -> None:
        broken = asyncio.Event()
        connection.close_callbacks.add(lambda *_: broken.set())
        try:
            await answer_of(self.session(connection, broken))
        except SESSION_ENDS as exc:
            self.record("disconnect", "info", error=describe(exc))
            await close_quietly(connection)
            return
        if broken.is_set():
            self.record("disconnect", "info", error="connection closed by the broker or network")
            await close_quietly(connection)
            return
        await close_quietly(connection)
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
        try:
            async with asyncio.timeout(self.spec.confirm_timeout):
                return await connection.channel(publisher_confirms=publisher_confirms)
        except RuntimeError as exc:
            # All the library raises it for: a connection not open, or closed under it
            # (also before its own is_closed says so).
            raise ConnectionLost(describe(exc)) from exc

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


async def close_quietly(closable: AbstractConnection | AbstractChannel) -> None:
    """Close a connection or channel a client is done with; one already closed, or
    whose connection went (the library raises a bare RuntimeError for some of those),
    is fine as it is."""
    if closable.is_closed:
        return
    with contextlib.suppress(*CLIENT_ERRORS, RuntimeError, asyncio.CancelledError):
        async with asyncio.timeout(CONNECT_TIMEOUT):
            await closable.close()
