"""One proxied TCP connection: the client's socket, the upstream socket, and a link
for each direction between them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections.abc import Callable

from .address import AddressError, port_number, split_host_port
from .collection import ToxicCollection
from .link import ToxicLink
from .stream import Direction

log = logging.getLogger(__name__)

# SO_LINGER on, zero seconds: close() then discards unsent data and sends RST.
_LINGER_RESET = struct.pack("ii", 1, 0)


class _Endpoint(asyncio.Protocol):
    """One socket of the connection; it feeds the link reading from it and tells the
    link writing to it when its send buffer is full."""

    def __init__(self, connection: Connection) -> None:
        self._connection = connection
        self.transport: asyncio.Transport | None = None
        self.reads_into: ToxicLink | None = None
        self.writes_from: ToxicLink | None = None
        self.lost = False
        # What arrived before the links existed. Reading is paused until then, but some
        # Python versions (3.11.2) read a socket once even when paused in
        # connection_made; those bytes must not be lost.
        self._early: list[bytes] = []
        self._early_eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.pause_reading()  # until both sockets and both links exist
        self._connection.endpoint_made(self)

    def read_into(self, link: ToxicLink) -> None:
        self.reads_into = link
        for data in self._early:
            link.feed(data)
        self._early.clear()
        if self._early_eof:
            link.feed_eof()

    def data_received(self, data: bytes) -> None:
        if self.reads_into is not None:
            self.reads_into.feed(data)
        else:
            self._early.append(data)

    def eof_received(self) -> bool:
        if self.reads_into is not None:
            self.reads_into.feed_eof()
        else:
            self._early_eof = True
        return True  # keep the socket open: the other direction may still be sending

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.reads_into is not None:
            self.reads_into.feed_eof()
        self._connection.endpoint_lost()

    def pause_writing(self) -> None:
        if self.writes_from is not None:
            self.writes_from.set_dest_blocked(True)

    def resume_writing(self) -> None:
        if self.writes_from is not None:
            self.writes_from.set_dest_blocked(False)


class Connection:
    def __init__(
        self,
        connection_id: int,
        upstream: str,
        toxics: ToxicCollection,
        on_finished: Callable[[Connection], None],
    ) -> None:
        self._id = connection_id
        self._upstream = upstream
        self._toxics = toxics
        self._on_finished = on_finished
        self.client = _Endpoint(self)
        self._server = _Endpoint(self)
        self._dial: asyncio.Task[None] | None = None
        self._dialling = False
        self._links: list[ToxicLink] = []
        self._reset = False
        self._aborted = False
        self._finished = False

    @property
    def connection_id(self) -> int:
        """How many connections the proxy accepted before this one; it names this
        connection's random streams."""
        return self._id

    def endpoint_made(self, endpoint: _Endpoint) -> None:
        if endpoint is self.client:
            self._dialling = True
            self._dial = asyncio.get_running_loop().create_task(self._connect_upstream())

    async def _connect_upstream(self) -> None:
        try:
            await self._open_upstream()
        finally:
            self._dialling = False
            if self._aborted or self.client.lost:
                self._close(self._server, at_once=True)
            self._check_finished()

    async def _open_upstream(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            host, port = split_host_port(self._upstream)
            await loop.create_connection(
                lambda: self._server, host or "localhost", port_number(self._upstream, port)
            )
        except (OSError, AddressError) as exc:
            # As toxiproxy does: the client is accepted, then closed.
            log.warning("cannot reach upstream %s: %s", self._upstream, exc)
            self._close(self.client, at_once=False)
            return
        client, server = self.client.transport, self._server.transport
        if self.client.lost or self._aborted or client is None or server is None:
            return
        up = self._toxics.open_link(self, Direction.UPSTREAM, source=client, dest=server)
        down = self._toxics.open_link(self, Direction.DOWNSTREAM, source=server, dest=client)
        self._server.writes_from, self.client.writes_from = up, down
        self.client.read_into(up)
        self._server.read_into(down)
        self._links = [up, down]

    def arm_reset(self) -> None:
        """From now on closing either socket resets it (reset_peer)."""
        self._reset = True
        for endpoint in (self.client, self._server):
            if endpoint.transport is not None and not endpoint.lost:
                sock = endpoint.transport.get_extra_info("socket")
                # A socket the peer is tearing down may refuse; it is going anyway.
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)

    def close_transport(self, transport: asyncio.Transport) -> None:
        """End of stream reached a socket: close it, flushing what is buffered unless
        the connection is being reset."""
        if self._reset:
            transport.abort()
        else:
            transport.close()

    @staticmethod
    def _close(endpoint: _Endpoint, *, at_once: bool) -> None:
        if endpoint.transport is not None and not endpoint.lost:
            if at_once:
                endpoint.transport.abort()
            else:
                endpoint.transport.close()

    def abort(self) -> None:
        """Drop the connection at once (its proxy was disabled or deleted)."""
        self._aborted = True
        if self._dial is not None:
            self._dial.cancel()
        self._close(self.client, at_once=True)
        self._close(self._server, at_once=True)

    def endpoint_lost(self) -> None:
        self._check_finished()

    def _check_finished(self) -> None:
        if self._finished or self._dialling or not self.client.lost:
            return
        if self._server.transport is not None and not self._server.lost:
            return
        self._finished = True
        for link in self._links:
            self._toxics.close_link(link)
        self._on_finished(self)
