"""Definitions saves: off the event loop, one per batch of input, in the order their
snapshots were taken, and before the output that tells of them."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pamqp import commands, frame

from cluster.amqp import tablejson
from cluster.config import load_config
from cluster.definitions import DefinitionsFile
from cluster.node import Node
from cluster.settings import parse_args
from cluster.sockets import AMQPProtocol
from tests.amqp.memory_client import PLAIN
from tests.cluster.standalone import three_node


class Renames:
    """Every rename of a definitions file into place, with what it held; the first
    ``held`` of them wait for `release` (a worker thread busy with a slow disk)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, held: int = 0) -> None:
        self.saved: list[dict[str, Any]] = []
        self._held = held
        self._gate = threading.Event()
        replace: Callable[[Any, Any], None] = os.replace

        def rename(source: Any, target: Any) -> None:
            if Path(target).name == "definitions.json":
                self.saved.append(tablejson.loads(Path(source).read_text()))
                if len(self.saved) <= self._held:
                    self._gate.wait()
            replace(source, target)

        monkeypatch.setattr(os, "replace", rename)

    def release(self) -> None:
        self._gate.set()

    def versions(self) -> list[object]:
        return [saved["v"] for saved in self.saved]


def version(path: Path) -> object:
    saved = DefinitionsFile(path).load()
    assert saved is not None
    return saved["v"]


async def test_the_worker_writes_only_the_newest_snapshot_once_the_save_under_way_is_done(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    renames = Renames(monkeypatch, held=1)
    definitions = DefinitionsFile(tmp_path / "definitions.json")
    definitions.save_soon({"v": 1})
    await asyncio.sleep(0.05)  # the worker is writing 1
    definitions.save_soon({"v": 2})
    definitions.save_soon({"v": 3})
    assert definitions.pending
    renames.release()
    await definitions.saved()
    assert renames.versions() == [1, 3]  # 2 was moot before its turn came
    assert version(definitions.path) == 3 and not definitions.pending


async def test_a_stale_snapshot_never_lands_after_a_newer_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save that must be durable at once (a queue's succession) waits for the write
    under way; the worker's snapshot taken before it is then never written."""
    renames = Renames(monkeypatch, held=1)
    definitions = DefinitionsFile(tmp_path / "definitions.json")
    definitions.save_soon({"v": 1})
    await asyncio.sleep(0.05)  # the worker is writing 1
    definitions.save_soon({"v": 2})
    threading.Timer(0.1, renames.release).start()
    definitions.save({"v": 3})  # blocks until 1 is written
    assert version(definitions.path) == 3
    await definitions.saved()
    assert renames.versions() == [1, 3]
    assert version(definitions.path) == 3


# -- the node ---------------------------------------------------------------------------


class Socket(asyncio.Transport):
    """A client's socket: what the node writes to it, and whether it is open."""

    def __init__(self) -> None:
        super().__init__()
        self.written = b""
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written += bytes(data)

    def is_reading(self) -> bool:
        return True

    def pause_reading(self) -> None:
        return None

    def resume_reading(self) -> None:
        return None

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 50000) if name == "peername" else default

    def methods(self) -> list[object]:
        data = self.written.removeprefix(b"AMQP\x00\x00\x09\x01")
        found: list[object] = []
        while data:
            consumed, _, value = frame.unmarshal(data)
            data = data[consumed:]
            found.append(value)
        return found


async def client(node: Node) -> tuple[AMQPProtocol, Socket]:
    """A client with channel 1 open, its definitions saved."""
    protocol, socket = AMQPProtocol(node), Socket()
    protocol.connection_made(socket)
    handshake = (
        (0, commands.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                        response=PLAIN)),
        (0, commands.Connection.TuneOk(channel_max=100, frame_max=131072, heartbeat=0)),
        (0, commands.Connection.Open(virtual_host="/")),
        (1, commands.Channel.Open()))
    protocol.data_received(b"AMQP\x00\x00\x09\x01" + b"".join(
        frame.marshal(method, channel) for channel, method in handshake))
    await node.definitions.saved()
    return protocol, socket


def standalone(tmp_path: Path) -> Node:
    """A node with no peers: its durable queues need no record in a cluster layer
    (whose writer saves the definitions at once, `Broker.save_definitions`)."""
    settings = parse_args(["--name", "n1", "--amqp-port", "0", "--data-dir", str(tmp_path)])
    return Node(settings, load_config(None, "n1"))


def declares(count: int) -> bytes:
    """``count`` durable queues and as many durable exchanges."""
    return b"".join(
        frame.marshal(commands.Queue.Declare(queue=f"q{i}", durable=True), 1)
        + frame.marshal(commands.Exchange.Declare(exchange=f"x{i}", durable=True), 1)
        for i in range(count))


def declared(socket: Socket) -> int:
    return sum(isinstance(m, commands.Queue.DeclareOk | commands.Exchange.DeclareOk)
               for m in socket.methods())


def saved_queues(node: Node) -> set[str]:
    saved = DefinitionsFile(node.definitions.path).load()
    assert saved is not None
    return {queue["name"] for queue in saved["vhosts"]["/"]["queues"]}


async def test_one_batch_of_durable_declares_is_one_save_and_their_replies_wait_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = standalone(tmp_path)
    await node.start_app()
    protocol, socket = await client(node)
    renames = Renames(monkeypatch)
    protocol.data_received(declares(5))
    assert declared(socket) == 0  # told once they are on disk
    await node.definitions.saved()
    assert declared(socket) == 10
    assert len(renames.saved) == 1
    assert saved_queues(node) == {f"q{i}" for i in range(5)}
    await node.stop_app()


async def test_a_client_that_closed_its_end_still_gets_the_replies_held_for_it(
        tmp_path: Path) -> None:
    node = standalone(tmp_path)
    await node.start_app()
    protocol, socket = await client(node)
    protocol.data_received(declares(1))
    assert protocol.eof_received()  # kept open for what is held
    assert not socket.closed
    await node.definitions.saved()
    assert declared(socket) == 2 and socket.closed
    await node.stop_app()


async def test_a_stopping_app_saves_the_definitions_before_it_is_done(tmp_path: Path) -> None:
    node = standalone(tmp_path)
    await node.start_app()
    protocol, socket = await client(node)
    protocol.data_received(declares(2))
    await node.stop_app()
    assert declared(socket) == 4 and socket.closed
    assert saved_queues(node) == {"q0", "q1"}


async def test_a_clustered_node_saves_a_batch_of_durable_exchanges_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    node = three_node(tmp_path, "n1", "ignore")
    await node.start_app()
    protocol, socket = await client(node)
    renames = Renames(monkeypatch)
    protocol.data_received(b"".join(
        frame.marshal(commands.Exchange.Declare(exchange=f"x{i}", durable=True), 1)
        for i in range(5)))
    await node.definitions.saved()
    assert declared(socket) == 5 and len(renames.saved) == 1
    await node.stop_app()


async def test_a_failed_save_stops_the_app_as_a_failed_commit_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What waited for the save cannot be promised durable: the app stops."""
    node = standalone(tmp_path)
    await node.start_app()
    protocol, _ = await client(node)

    def disk_full(source: Any, target: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    protocol.data_received(declares(1))
    await node.definitions.saved()
    for _ in range(100):
        if node.broker is None:
            break
        await asyncio.sleep(0.01)
    assert node.broker is None
    assert '"store_failure"' in (tmp_path / "events.jsonl").read_text()
