"""The broker of one node with its AMQP clients, I/O-free: the broker model
(`cluster.core.broker`) and the client connections it serves, their channels'
confirms, the memory alarm, flow control while a peer link is backlogged, and the
event log's share of client errors.

The asyncio shell (`cluster.node`) feeds it sockets' bytes, time and the store's
durable LSN, and drains `dirty` connections' outboxes.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from cluster.amqp.errors import AMQPError, ChannelError, ConnectionError_
from cluster.core.broker import PRODUCT, VERSION, BrokerConfig, BrokerModel, EventSink
from cluster.core.queue import MessageLog
from cluster.events import (
    ChannelErrorReported,
    ClientErrorsSuppressed,
    ConnectionErrorReported,
    MemoryAlarm,
)
from cluster.session.channel import Channel
from cluster.session.connection import Connection, State
from cluster.session.error_log import ErrorLogLimit


class Broker(BrokerModel):
    def __init__(
        self,
        config: BrokerConfig,
        *,
        log: MessageLog | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        events: EventSink | None = None,
        save_definitions: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        super().__init__(config, log=log, clock=clock, rng=rng, events=events,
                         save_definitions=save_definitions)
        self.connections: dict[int, Connection] = {}
        self._next_connection_id = 1
        self.dirty: set[Connection] = set()
        self.confirm_dirty: set[Channel] = set()
        self.alarm = False
        self.peer_flow = False  # set_peer_flow
        # Bodies channels hold outside any queue: content still arriving, messages
        # published in a transaction not yet committed.
        self.held_bytes = 0
        self.error_log_limit = ErrorLogLimit()

    def server_properties(self) -> dict[str, Any]:
        return {
            "product": PRODUCT,
            "version": VERSION,
            "platform": "Python",
            "cluster_name": self.config.cluster_name,
            "capabilities": {
                "publisher_confirms": True,
                "exchange_exchange_bindings": False,
                "basic.nack": True,
                "consumer_cancel_notify": True,
                "connection.blocked": True,
                "consumer_priorities": False,
                "authentication_failure_close": True,
                "per_consumer_qos": True,
                "direct_reply_to": False,
            },
        }

    def delete_vhost(self, name: str) -> bool:
        """Its clients are told why their connections close, then it goes."""
        vhost = self.vhosts.get(name)
        if vhost is not None:
            for connection in list(self.connections.values()):
                if connection.state is State.OPEN and connection.vhost is vhost:
                    connection.force_close(f"vhost '{name}' is deleted")
        return super().delete_vhost(name)

    # -- connections --------------------------------------------------------------------

    def open_connection(self, peer: str) -> Connection:
        connection_id = self._next_connection_id
        self._next_connection_id += 1
        connection = Connection(self, connection_id, peer)
        self.connections[connection_id] = connection
        return connection

    def forget_connection(self, connection: Connection) -> None:
        self.connections.pop(connection.id, None)
        self.dirty.discard(connection)
        for vhost in self.vhosts.values():
            for queue in list(vhost.queues.values()):
                if queue.exclusive_owner == connection.id:
                    self.delete_queue(vhost, queue.name)

    def record_connection_error(self, connection: Connection, error: ConnectionError_) -> None:
        self._record_error(ConnectionErrorReported, connection, 0, error)

    def record_channel_error(
        self, connection: Connection, channel: int, error: ChannelError
    ) -> None:
        self._record_error(ChannelErrorReported, connection, channel, error)

    def _record_error(self, event: type[ConnectionErrorReported],
                      connection: Connection, channel: int, error: AMQPError) -> None:
        if self.error_log_limit.admit(connection.peer_host, self.now()):
            self.events.emit(event(connection=connection.id, peer=connection.peer,
                                   channel=channel, code=error.code, text=error.reply_text))

    def _report_suppressed_errors(self) -> None:
        limit = self.error_log_limit
        for host, count in limit.ended(self.now()):
            self.events.emit(ClientErrorsSuppressed(host=host, count=count,
                                                    window=limit.window, burst=limit.burst))

    # -- confirms -----------------------------------------------------------------------

    def after_input(self) -> None:
        """Called by the shell once per batch of input: confirms for transient publishes
        go out in one ``basic.ack multiple``, and the memory alarm is re-evaluated."""
        super().after_input()
        self.release_confirms()
        self.check_memory()

    def release_confirms(self) -> None:
        if not self.confirm_dirty:
            return
        durable = self.durable_lsn
        still_waiting = set()
        for channel in self.confirm_dirty:
            channel.release_confirms(durable)
            if channel.pending_confirms or channel.pending_commits:
                still_waiting.add(channel)
        self.confirm_dirty = still_waiting

    def on_durable(self, lsn: int) -> None:
        super().on_durable(lsn)
        self.release_confirms()

    def on_store_failure(self, error: Exception) -> None:
        """Nothing staged can be promised durable, so every pending confirm is nacked
        rather than leave publishers waiting for ever."""
        super().on_store_failure(error)
        for channel in self.confirm_dirty:
            channel.fail_confirms()
        self.confirm_dirty.clear()

    # -- memory and flow ----------------------------------------------------------------

    def message_bytes(self) -> int:
        """What the memory alarm counts: bodies in queues and bodies channels hold."""
        return self.held_bytes + sum(
            q.message_bytes for v in self.vhosts.values() for q in v.queues.values())

    def set_peer_flow(self, backlogged: bool) -> None:
        """A link to a peer holds more than the peer takes: publishers are not read until
        it drains (RabbitMQ's connection state "flow"), so that the link is never cut
        for being slow."""
        self.peer_flow = backlogged
        self.dirty.update(c for c in self.connections.values() if c.has_published)

    def check_memory(self) -> None:
        used = self.message_bytes()
        if not self.alarm and used > self.config.memory_high_watermark:
            self.alarm = True
            self.events.emit(MemoryAlarm(state="set", used=used,
                                         limit=self.config.memory_high_watermark))
            for connection in self.connections.values():
                connection.block()
        elif self.alarm and used <= self.config.memory_high_watermark:
            self.alarm = False
            self.events.emit(MemoryAlarm(state="cleared", used=used,
                                         limit=self.config.memory_high_watermark))
            for connection in self.connections.values():
                connection.unblock()

    def tick(self) -> None:
        for connection in list(self.connections.values()):
            connection.tick()
        self.check_memory()
        self._report_suppressed_errors()

    def shutdown(self, reason: str) -> None:
        for connection in list(self.connections.values()):
            connection.force_close(reason)
