"""The node's client sockets: bytes from each client into its `Connection`, the output
the broker queued back out, and the sockets' reading and closing.

Output taken while a definitions save is under way may tell of a change being saved (a
durable queue's declare-ok, a confirm of a publish to it): it is held, in order, tagged
with the newest snapshot taken by then, and written once that snapshot is on disk, so
that a client finds after a crash what it was told exists. The node's shell (`Shell`)
runs the broker; this module only moves bytes.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from typing import Protocol

from cluster.amqp.errors import INTERNAL_ERROR, ConnectionError_
from cluster.definitions import DefinitionsFile
from cluster.reads import BufferedReader
from cluster.session.broker import Broker
from cluster.session.connection import Connection

log = logging.getLogger("mirrorchaos.node")


class Shell(Protocol):
    """The node as its client sockets see it."""

    @property
    def broker(self) -> Broker | None: ...

    @property
    def sockets(self) -> ClientSockets: ...

    def pump(self) -> None: ...

    def flush(self) -> None: ...


class AMQPProtocol(BufferedReader):
    """Bytes in → `Connection.receive_data`; the node writes what the broker queued."""

    def __init__(self, node: Shell) -> None:
        self.node = node
        self.connection: Connection | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername") or ("?", 0)
        broker = self.node.broker
        assert broker is not None
        self.connection = broker.open_connection(f"{peer[0]}:{peer[1]}")
        self.node.sockets.transports[self.connection] = transport

    def data_received(self, data: bytes) -> None:
        connection = self.connection
        broker = self.node.broker
        if connection is None or broker is None:
            return
        try:
            connection.receive_data(data)
            self.node.pump()
        except Exception as error:  # a broker bug must cost one connection, not the node
            log.exception("internal error on connection %s", connection.peer)
            connection.close_with_error(_internal_error(error))
            self.node.flush()

    def eof_received(self) -> bool:
        """The client sends no more. Output held for it still goes out, the socket
        closing after it; otherwise it closes now."""
        return self.connection is not None and self.node.sockets.close_after_held_output(
            self.connection)

    def connection_lost(self, exc: Exception | None) -> None:
        connection = self.connection
        if connection is None:
            return
        self.node.sockets.transports.pop(connection, None)
        if self.node.broker is not None:
            connection.connection_lost()
            self.node.pump()

    def pause_writing(self) -> None:
        if self.connection is not None:
            self.connection.output_stalled()

    def resume_writing(self) -> None:
        if self.connection is not None and self.node.broker is not None:
            self.connection.output_resumed()
            self.node.flush()


class ClientSockets:
    """Every client socket of the running app, and the output held for the
    definitions save (see the module's header)."""

    def __init__(self, definitions: DefinitionsFile) -> None:
        self.definitions = definitions
        self.transports: dict[Connection, asyncio.Transport] = {}
        # (newest snapshot taken when it was taken, connection, bytes, close after)
        self._held: deque[tuple[int, Connection, bytes, bool]] = deque()

    def write_output(self, broker: Broker) -> None:
        """Write every dirty connection's output (or hold it) and apply its socket
        state."""
        settled = self.definitions.settled
        while self._held and self._held[0][0] <= settled:
            _, connection, data, closing = self._held.popleft()
            transport = self.transports.get(connection)
            if transport is not None:
                _write(connection, transport, data, closing)
        while broker.dirty:
            connection = broker.dirty.pop()
            transport = self.transports.get(connection)
            data = connection.take_output()
            if transport is None:
                continue
            closing = connection.should_close
            if self._held or self.definitions.pending:
                self._held.append((self.definitions.taken, connection, data, closing))
            else:
                _write(connection, transport, data, closing)
            if not closing and connection.reading_paused != (not transport.is_reading()):
                if connection.reading_paused:
                    transport.pause_reading()
                else:
                    transport.resume_reading()

    def close_after_held_output(self, connection: Connection) -> bool:
        """Close the socket of ``connection`` once the output held for it is written;
        False when none is held."""
        if not any(held[1] is connection for held in self._held):
            return False
        self._held.append((self.definitions.taken, connection, b"", True))
        return True

    def drop_vanished(self) -> None:
        """A socket we do not read (memory alarm, output stalled) never reports that its
        client went away; without this, a flood's connections would hold their bodies
        and the alarm for ever. A client that closed its end with output held for it is
        closed once that is written (`close_after_held_output`)."""
        held = {connection for _, connection, _, _ in self._held}
        for connection, transport in list(self.transports.items()):
            if (connection not in held and not transport.is_reading()
                    and _peer_has_closed(transport)):
                transport.abort()

    def close_all(self) -> None:
        """The app stops: every client's socket closes (the held output was written)."""
        for transport in list(self.transports.values()):
            transport.close()
        self.transports.clear()


# The first byte of Linux's tcp_info is the connection's state: the peer's FIN leaves
# it CLOSE_WAIT, a reset CLOSE.
_TCP_CLOSE, _TCP_CLOSE_WAIT = 7, 8


def _peer_has_closed(transport: asyncio.Transport) -> bool:
    sock = transport.get_extra_info("socket")
    if sock is None or not hasattr(socket, "TCP_INFO"):
        return False
    try:
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0]
    except OSError:
        return True
    return state in (_TCP_CLOSE, _TCP_CLOSE_WAIT)


def _write(connection: Connection, transport: asyncio.Transport, data: bytes,
           closing: bool) -> None:
    """Write output taken from ``connection``, then close its socket if it was closing."""
    if data:
        transport.write(data)
        connection.output_written()
    if closing:
        if connection.output_stalled_since is None:
            transport.close()
        else:  # close() would wait for ever to write what the client does not read
            transport.abort()


def _internal_error(error: Exception) -> ConnectionError_:
    return ConnectionError_(INTERNAL_ERROR, f"internal error: {type(error).__name__}: {error}")
