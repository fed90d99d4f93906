"""An in-memory AMQP client for driving the I/O-free `Connection` with no sockets."""

from __future__ import annotations

from typing import Any

from pamqp import commands, frame, header
from pamqp.base import Frame as Method
from pamqp.body import ContentBody
from pamqp.heartbeat import Heartbeat

from cluster.events import NodeEvent
from cluster.session.broker import Broker
from cluster.session.connection import Connection

PLAIN = "\x00guest\x00guest"


class RecordedEvents:
    """A broker's event sink that keeps what was emitted, in order."""

    def __init__(self) -> None:
        self.emitted: list[NodeEvent] = []

    def emit(self, event: NodeEvent) -> None:
        self.emitted.append(event)

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The fields of every emitted ``kind`` event."""
        return [e.fields() for e in self.emitted if e.kind == kind]


def publish_frames(channel: int, body: bytes, routing_key: str, exchange: str = "",
                   persistent: bool = False, mandatory: bool = False,
                   body_size: int | None = None) -> bytes:
    """basic.publish, its content header and body, as bytes on the wire. ``body_size``:
    what the header announces, if more than ``body`` (the rest still to come)."""
    properties = commands.Basic.Properties(delivery_mode=2 if persistent else 1)
    announced = len(body) if body_size is None else body_size
    return (
        frame.marshal(commands.Basic.Publish(exchange=exchange, routing_key=routing_key,
                                             mandatory=mandatory), channel)
        + frame.marshal(header.ContentHeader(0, announced, properties), channel)
        + (frame.marshal(ContentBody(body), channel) if body else b"")
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class MemoryClient:
    """Sends frames straight into a `Connection` and decodes what it queued back."""

    def __init__(self, broker: Broker, capabilities: dict[str, Any] | None = None,
                 peer: str = "127.0.0.1:50000") -> None:
        """``peer``: the client's address as the node would give it (loopback by
        default, where guest may log in)."""
        self.broker = broker
        self.connection: Connection = broker.open_connection(peer)
        self.capabilities = capabilities or {"consumer_cancel_notify": True,
                                             "connection.blocked": True,
                                             "authentication_failure_close": True}
        self.received: list[tuple[int, Any]] = []
        self._buffer = b""

    # -- sending ------------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.connection.receive_data(data)
        self.broker.after_input()
        self._collect()

    def send(self, channel: int, method: Method) -> None:
        self.send_raw(frame.marshal(method, channel))

    def publish(self, channel: int, body: bytes, routing_key: str, exchange: str = "",
                persistent: bool = False, mandatory: bool = False) -> None:
        self.send_raw(publish_frames(channel, body, routing_key, exchange, persistent,
                                     mandatory))

    def handshake(self, password_response: str = PLAIN, heartbeat: int = 0) -> None:
        self.send_raw(b"AMQP\x00\x00\x09\x01")
        self.send(0, commands.Connection.StartOk(
            client_properties={"capabilities": self.capabilities},
            mechanism="PLAIN", response=password_response))
        self.send(0, commands.Connection.TuneOk(channel_max=100, frame_max=131072,
                                                heartbeat=heartbeat))
        self.send(0, commands.Connection.Open(virtual_host="/"))

    def open_channel(self, channel: int = 1) -> None:
        self.send(channel, commands.Channel.Open())

    # -- receiving ----------------------------------------------------------------------

    def _collect(self) -> None:
        """Take the output as the node's shell does: written at once, which makes room
        for deliveries held back."""
        connection = self.connection
        self.broker.dirty.discard(connection)
        while connection.outbox:
            self._buffer += connection.take_output()
            connection.output_written()
        while self._buffer:
            if self._buffer.startswith(b"AMQP"):
                self.received.append((0, self._buffer[:8]))
                self._buffer = self._buffer[8:]
                continue
            try:
                consumed, channel, value = frame.unmarshal(self._buffer)
            except Exception:  # a partial frame: wait for more bytes
                return
            self._buffer = self._buffer[consumed:]
            self.received.append((channel, value))

    def drain(self) -> list[tuple[int, Any]]:
        self._collect()
        out, self.received = self.received, []
        return out

    def methods(self) -> list[Method]:
        return [v for _, v in self.drain() if isinstance(v, Method)]

    def deliveries(self) -> list[tuple[commands.Basic.Deliver, bytes]]:
        """Group Deliver + header + body frames into (method, body) pairs."""
        out: list[tuple[commands.Basic.Deliver, bytes]] = []
        current: commands.Basic.Deliver | None = None
        body = b""
        size = 0
        for _, value in self.drain():
            if isinstance(value, commands.Basic.Deliver):
                current, body = value, b""
            elif isinstance(value, header.ContentHeader) and current is not None:
                size = value.body_size
                if size == 0:
                    out.append((current, b""))
                    current = None
            elif isinstance(value, ContentBody) and current is not None:
                body += value.value
                if len(body) >= size:
                    out.append((current, body))
                    current = None
            elif isinstance(value, Heartbeat):
                continue
        return out
