"""A proxy: a listening socket whose connections are relayed, through the proxy's
toxics, to an upstream address."""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from . import errors
from .address import (
    AddressError,
    format_sockname,
    is_wildcard,
    join_host_port,
    port_number,
    resolve_host,
    resolve_tcp_addr,
    split_host_port,
)
from .collection import ToxicCollection
from .connection import Connection


def _os_error_text(exc: OSError) -> str:
    # Go prints syscall errors in lower case ("address already in use").
    text = os.strerror(exc.errno) if exc.errno else str(exc)
    return text[:1].lower() + text[1:]


def _bind_any(port: int) -> socket.socket:
    """All interfaces, as Go does for an empty or wildcard host: one dual-stack socket
    (reported as ``[::]:port``), or IPv4 alone where the host has no IPv6."""
    if socket.has_dualstack_ipv6():
        try:
            return socket.create_server(("::", port), family=socket.AF_INET6, dualstack_ipv6=True)
        except OSError:
            pass
    try:
        return socket.create_server(("0.0.0.0", port))
    except OSError as exc:
        raise errors.server_error(f"listen tcp :{port}: bind: {_os_error_text(exc)}") from None


async def open_listener(listen: str) -> socket.socket:
    """A listening socket for a proxy's ``listen`` address, failing with toxiproxy's
    500 and Go's wording (``listen tcp 127.0.0.1:80: bind: address already in use``)."""
    try:
        host, port_text = split_host_port(listen) if listen else ("", "0")
        port = port_number(listen, port_text) if port_text else 0
        if is_wildcard(host):
            return _bind_any(port)
        family, ip = await resolve_host(host)
    except AddressError as exc:
        raise errors.server_error(f"listen tcp: {exc}") from None
    try:
        return socket.create_server((ip, port), family=family)
    except OSError as exc:
        where = join_host_port(ip, port)
        raise errors.server_error(f"listen tcp {where}: bind: {_os_error_text(exc)}") from None


class Proxy:
    def __init__(self, name: str, listen: str, upstream: str, seed: int) -> None:
        self.name = name
        self.listen = listen
        self.upstream = upstream
        self.enabled = False
        self.toxics = ToxicCollection(seed)
        self._server: asyncio.Server | None = None
        self._connections: dict[Connection, None] = {}
        self._accepted = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "toxics": [toxic.to_json() for toxic in self.toxics.all()],
        }

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def start(self) -> None:
        """Listen; the API then reports the bound address (a port of 0 becomes real)."""
        if self.enabled:
            return
        sock = await open_listener(self.listen)
        try:
            self._server = await asyncio.get_running_loop().create_server(self._accept, sock=sock)
        except BaseException:
            sock.close()
            raise
        self.listen = format_sockname(sock.getsockname())
        self.enabled = True

    def _accept(self) -> asyncio.Protocol:
        connection = Connection(self._accepted, self.upstream, self.toxics, self._forget)
        self._accepted += 1
        self._connections[connection] = None
        return connection.client

    def _forget(self, connection: Connection) -> None:
        self._connections.pop(connection, None)

    async def stop(self) -> None:
        """Stop listening and drop every connection."""
        if not self.enabled or self._server is None:
            return
        self.enabled = False
        server, self._server = self._server, None
        server.close()
        for connection in list(self._connections):
            connection.abort()
        await server.wait_closed()

    async def differs(self, listen: str, upstream: str) -> bool:
        """Whether these addresses would change the proxy, comparing resolved listen
        addresses as toxiproxy does (so ``localhost:80`` equals ``127.0.0.1:80``)."""
        try:
            resolved = await resolve_tcp_addr(listen)
        except AddressError as exc:
            raise errors.server_error(str(exc)) from None
        return self.listen != resolved or self.upstream != upstream

    async def update(self, listen: str | None, upstream: str | None, enabled: bool | None) -> None:
        """Toxiproxy's update: a new address restarts the proxy (dropping its
        connections); ``enabled`` then starts or stops it."""
        listen = self.listen if listen is None else listen
        upstream = self.upstream if upstream is None else upstream
        enabled = self.enabled if enabled is None else enabled
        if await self.differs(listen, upstream):
            await self.stop()
            self.listen = listen
            self.upstream = upstream
        if enabled and not self.enabled:
            await self.start()
        elif not enabled:
            await self.stop()
