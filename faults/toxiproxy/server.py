"""The toxiproxy-compatible server: the HTTP API plus its proxies, in one event loop."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from types import TracebackType

from aiohttp import web

from faults import seeds

from .api import VERSION, build_app
from .proxies import ProxyCollection

log = logging.getLogger(__name__)


class ToxiproxyServer:
    """Run in-process with ``await start()`` / ``await stop()`` (or ``async with``).

    ``port=0`` picks a free port; ``url`` then tells which. Without a seed one is
    drawn and exposed as ``seed`` so the run can be replayed.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 8474, seed: int | None = None) -> None:
        self.host = host
        self.port = port
        self.seed = seeds.fresh_seed() if seed is None else seed
        self.proxies = ProxyCollection(self.seed)
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> None:
        runner = web.AppRunner(
            build_app(self.proxies), access_log=None, handle_signals=False, shutdown_timeout=5
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("toxiproxy API %s on %s, seed %d", VERSION, self.url, self.seed)

    async def stop(self) -> None:
        await self.proxies.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> ToxiproxyServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()


async def _serve_until_signalled(server: ToxiproxyServer) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    async with server:
        print(f"toxiproxy {VERSION} on {server.url} seed={server.seed}", flush=True)
        await stopping.wait()


def _port(text: str) -> int:
    port = int(text) if text.isdigit() else -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (0..65535): {text!r}")
    return port


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The server's options, for ``python -m faults.toxiproxy`` and the harness's
    ``mirrorchaos toxiproxy serve`` alike."""
    parser.add_argument("--host", default="127.0.0.1",
                        help="address of the API (default %(default)s; 0.0.0.0 in a container)")
    parser.add_argument("--port", type=_port, default=8474,
                        help="port of the API, 0 for a free one (default %(default)s)")
    parser.add_argument("--seed", type=int, default=None,
                        help="root seed of every random stream (default: drawn and printed)")


def serve(host: str, port: int, seed: int | None) -> None:
    """Serve until SIGINT or SIGTERM."""
    asyncio.run(_serve_until_signalled(ToxiproxyServer(host, port, seed)))
