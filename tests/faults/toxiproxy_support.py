"""Helpers for the toxiproxy tests: TCP servers to proxy to, an API client, and a
server running in its own thread for the synchronous toxiproxy-python client."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Coroutine, Iterable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeVar

import aiohttp

from faults.toxiproxy import ToxiproxyServer

T = TypeVar("T")


def split_listen(listen: str) -> tuple[str, int]:
    host, port = listen.rsplit(":", 1)
    return host.strip("[]"), int(port)


async def connect(listen: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = split_listen(listen)
    return await asyncio.open_connection(host, port)


async def read_exactly(reader: asyncio.StreamReader, n: int, timeout: float = 5.0) -> bytes:
    return await asyncio.wait_for(reader.readexactly(n), timeout)


class EchoServer:
    """Echoes every byte back on the same connection."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> EchoServer:
        self._server = await asyncio.start_server(self._echo, "127.0.0.1", 0)
        return self

    @property
    def address(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def _echo(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def close(self) -> None:
        await _close_all(self._server, self._writers)


async def _close_all(
    server: asyncio.Server | None, writers: Iterable[asyncio.StreamWriter]
) -> None:
    if server is not None:
        server.close()
    for writer in writers:
        writer.close()
    await asyncio.sleep(0)  # let the transports finish closing


@dataclass
class PeerConnection:
    """The server end of one connection: what arrived (with loop times), and a writer."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    arrivals: asyncio.Queue[tuple[float, bytes]] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None

    async def _record(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while data := await self.reader.read(65536):
                self.arrivals.put_nowait((loop.time(), data))
        except ConnectionError:
            pass


class PeerServer:
    """A server the test drives: it records what arrives and sends on request."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._peers: list[PeerConnection] = []
        self.accepted: asyncio.Queue[PeerConnection] = asyncio.Queue()

    async def start(self) -> PeerServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    @property
    def address(self) -> str:
        assert self._server is not None
        host, port = self._server.sockets[0].getsockname()[:2]
        return f"{host}:{port}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = PeerConnection(reader, writer)
        peer.task = asyncio.current_task()
        self._peers.append(peer)
        self.accepted.put_nowait(peer)
        await peer._record()

    async def next_connection(self, timeout: float = 5.0) -> PeerConnection:
        return await asyncio.wait_for(self.accepted.get(), timeout)

    async def close(self) -> None:
        await _close_all(self._server, (peer.writer for peer in self._peers))


class Api:
    """Raw HTTP against the server, returning status and decoded body."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url

    async def call(
        self, method: str, path: str, body: Any = None, *, raw: bytes | None = None
    ) -> tuple[int, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        async with self.session.request(method, self.url + path, data=data) as response:
            text = await response.text()
            try:
                return response.status, json.loads(text) if text else None
            except ValueError:
                return response.status, text

    async def proxy(self, name: str, upstream: str, **fields: Any) -> dict[str, Any]:
        status, body = await self.call(
            "POST",
            "/proxies",
            {"name": name, "listen": "127.0.0.1:0", "upstream": upstream, **fields},
        )
        assert status == 201, body
        return dict(body)

    async def toxic(self, proxy: str, **fields: Any) -> dict[str, Any]:
        status, body = await self.call("POST", f"/proxies/{proxy}/toxics", fields)
        assert status == 200, body
        return dict(body)


class ServerThread:
    """A ToxiproxyServer and an echo server on an event loop in a background thread."""

    def __init__(self, seed: int = 7) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server = ToxiproxyServer("127.0.0.1", 0, seed)
        self.echo = EchoServer()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        self.run(self.server.start())
        self.run(self.echo.start())
        return self

    def stop_server(self) -> None:
        self.run(self.server.stop())

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_server()
        self.run(self.echo.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()
