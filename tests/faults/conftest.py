from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
import pytest_asyncio
import toxiproxy
from toxiproxy.api import APIConsumer

from faults.toxiproxy import ToxiproxyServer
from tests.faults.toxiproxy_support import Api, EchoServer, PeerServer, ServerThread

SEED = 20240611


@pytest_asyncio.fixture
async def server() -> AsyncIterator[ToxiproxyServer]:
    async with ToxiproxyServer("127.0.0.1", 0, seed=SEED) as running:
        yield running


@pytest_asyncio.fixture
async def api(server: ToxiproxyServer) -> AsyncIterator[Api]:
    async with aiohttp.ClientSession() as session:
        yield Api(session, server.url)


@pytest_asyncio.fixture
async def echo() -> AsyncIterator[EchoServer]:
    running = await EchoServer().start()
    yield running
    await running.close()


@pytest_asyncio.fixture
async def peer() -> AsyncIterator[PeerServer]:
    running = await PeerServer().start()
    yield running
    await running.close()


@pytest.fixture
def threaded() -> Iterator[ServerThread]:
    with ServerThread(seed=SEED) as running:
        yield running


@pytest.fixture
def client(threaded: ServerThread) -> Iterator[toxiproxy.Toxiproxy]:
    """The unmodified toxiproxy-python client, pointed at the threaded server through
    its class attributes (it has no other way to be configured)."""
    saved = APIConsumer.host, APIConsumer.port
    APIConsumer.host, APIConsumer.port = "127.0.0.1", threaded.server.port
    try:
        yield toxiproxy.Toxiproxy()
    finally:
        APIConsumer.host, APIConsumer.port = saved
