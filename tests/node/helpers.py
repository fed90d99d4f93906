"""Shared helpers for the node tests: starting nodes with a config, pika and aio-pika
connections, and a raw-socket AMQP client that speaks hand-built frames (pamqp)."""

from __future__ import annotations

import base64
import json
import socket
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import aio_pika
import pika
from pamqp import commands, frame, header
from pamqp.base import Frame as Method
from pamqp.exceptions import UnmarshalingException
from pika.adapters.blocking_connection import BlockingChannel

from faults.process.node import NodeProcess

NodeFactory = Callable[..., NodeProcess]

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_END = 0xCE
HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"
PERSISTENT = pika.BasicProperties(delivery_mode=2)


# -- nodes ------------------------------------------------------------------------------

def start_node(node_factory: NodeFactory, config_text: str | None = None) -> NodeProcess:
    """A node speaking AMQP only: these tests do not need the management listener."""
    return node_factory(config_text=config_text, mgmt=False)


def _toml_value(value: object) -> str:
    return json.dumps(value)  # ints, strings and lists of strings are valid TOML this way


def config_toml(
    node: Mapping[str, object] | None = None,
    users: Iterable[Mapping[str, object]] = (),
    vhosts: Iterable[str] = (),
    permissions: Iterable[Mapping[str, object]] = (),
) -> str:
    """A node config file: ``[node]`` limits, ``[[users]]``, ``[[vhosts]]``,
    ``[[permissions]]``."""
    lines: list[str] = []
    if node:
        lines.append("[node]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in node.items()]
    for table, rows in (("users", users), ("permissions", permissions)):
        for row in rows:
            lines.append(f"[[{table}]]")
            lines += [f"{key} = {_toml_value(value)}" for key, value in row.items()]
    for name in vhosts:
        lines += ["[[vhosts]]", f"name = {_toml_value(name)}"]
    return "\n".join(lines) + "\n"


def node_log(node: NodeProcess) -> str:
    return node.log_path.read_text(encoding="utf-8", errors="replace")


def assert_no_traceback(node: NodeProcess) -> None:
    text = node_log(node)
    assert "Traceback" not in text, f"the node logged a traceback:\n{text[-4000:]}"


def read_events(node: NodeProcess) -> list[dict[str, Any]]:
    path = node.data_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, what: str = "",
               step: Callable[[], object] = lambda: time.sleep(0.02)) -> None:
    """Call ``step`` until ``predicate()`` is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or predicate}")
        step()


# -- the management API -----------------------------------------------------------------

@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str]


def api(node: NodeProcess, method: str, path: str, body: Any = None, *,
        user: str | None = "guest", password: str = "guest", raw: bytes | None = None) -> Answer:
    """One HTTP request; ``user=None`` sends no credentials, ``raw`` a body as is."""
    headers = {"Content-Type": "application/json"}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(
            f"{user}:{password}".encode()).decode()
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(node.mgmt_url + path, data=data, method=method,
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text, reply_headers = response.status, response.read(), response.headers
    except urllib.error.HTTPError as error:
        status, text, reply_headers = error.code, error.read(), error.headers
    return Answer(status, json.loads(text) if text else None, dict(reply_headers))


def ok(node: NodeProcess, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
    answer = api(node, method, path, body, **kwargs)
    assert answer.status < 300, f"{method} {path}: {answer.status} {answer.body}"
    return answer.body


def assert_error(answer: Answer, status: int, *words: str) -> None:
    assert answer.status == status, answer
    assert set(answer.body) == {"error", "reason"}, answer.body
    for word in words:
        assert word in answer.body["reason"], answer.body


# -- pika -------------------------------------------------------------------------------

def pika_params(
    node: NodeProcess,
    *,
    user: str = "guest",
    password: str = "guest",
    vhost: str = "/",
    **kwargs: Any,
) -> pika.ConnectionParameters:
    kwargs.setdefault("connection_attempts", 1)
    kwargs.setdefault("blocked_connection_timeout", None)
    return pika.ConnectionParameters(
        host=node.host, port=node.amqp_port, virtual_host=vhost,
        credentials=pika.PlainCredentials(user, password), **kwargs,
    )


def connect(node: NodeProcess, **kwargs: Any) -> pika.BlockingConnection:
    return pika.BlockingConnection(pika_params(node, **kwargs))


@contextmanager
def pika_channel(node: NodeProcess, **kwargs: Any) -> Iterator[BlockingChannel]:
    """A channel on a fresh connection, closed afterwards (whatever state it is in)."""
    connection = connect(node, **kwargs)
    try:
        yield connection.channel()
    finally:
        if connection.is_open:
            connection.close()


def publish_bodies(
    channel: BlockingChannel,
    routing_key: str,
    bodies: Iterable[bytes],
    *,
    exchange: str = "",
    properties: pika.BasicProperties | None = None,
) -> None:
    for body in bodies:
        channel.basic_publish(exchange, routing_key, body, properties)


def numbered(count: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(count)]


def get_bodies(channel: BlockingChannel, queue: str) -> list[bytes]:
    """Drain a queue with ``basic.get`` (auto-ack) and return the bodies in order."""
    bodies: list[bytes] = []
    while True:
        method, _, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            return bodies
        bodies.append(body)


def queue_count(channel: BlockingChannel, queue: str) -> int:
    return int(channel.queue_declare(queue, passive=True).method.message_count)


def pump_until(connection: pika.BlockingConnection, predicate: Callable[[], object],
               timeout: float = 10.0, what: str = "") -> None:
    """Process pika's I/O until ``predicate()`` is true."""
    wait_until(predicate, timeout, what, lambda: connection.process_data_events(time_limit=0.05))


def consume_events(
    connection: pika.BlockingConnection, channel: BlockingChannel, queue: str, count: int,
    *, timeout: float = 5.0, auto_ack: bool = False,
) -> list[tuple[Any, bytes]]:
    """Start a consumer and collect ``count`` deliveries as (method, body); fails when
    fewer arrive within ``timeout``."""
    received: list[tuple[Any, bytes]] = []
    channel.basic_consume(queue, lambda _ch, method, _props, body: received.append(
        (method, body)), auto_ack=auto_ack)
    pump_until(connection, lambda: len(received) >= count, timeout,
               f"{count} deliveries (got {len(received)})")
    return received


def settle_quietly(connection: pika.BlockingConnection, seconds: float = 0.3) -> None:
    """Let the broker send whatever it would send next (to check that it sends nothing)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        connection.process_data_events(time_limit=0.05)


# -- aio-pika ---------------------------------------------------------------------------

def amqp_url(node: NodeProcess, user: str = "guest", password: str = "guest",
             vhost: str = "%2F") -> str:
    return f"amqp://{user}:{password}@{node.host}:{node.amqp_port}/{vhost}"


async def aconnect(node: NodeProcess, **kwargs: Any) -> aio_pika.abc.AbstractConnection:
    """A plain (not robust) aio-pika connection: reconnecting would hide broker errors."""
    return await aio_pika.connect(amqp_url(node, **kwargs))


# -- raw frames -------------------------------------------------------------------------

def raw_frame(frame_type: int, channel: int, payload: bytes, end: int = FRAME_END) -> bytes:
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + bytes((end,))


def method_frame(channel: int, method: Method) -> bytes:
    return frame.marshal(method, channel)


def content_header_frame(channel: int, body_size: int,
                         properties: commands.Basic.Properties | None = None) -> bytes:
    head = header.ContentHeader(0, body_size, properties or commands.Basic.Properties())
    return frame.marshal(head, channel)


def body_frame(channel: int, body: bytes) -> bytes:
    return raw_frame(3, channel, body)


def start_ok(user: str = "guest", password: str = "guest") -> commands.Connection.StartOk:
    return commands.Connection.StartOk(
        client_properties={"product": "raw-test", "capabilities": {"connection.blocked": True}},
        mechanism="PLAIN", response=f"\x00{user}\x00{password}", locale="en_US",
    )


class FrameParser:
    """Splits received bytes into pamqp frame objects."""

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> list[tuple[int, Any]]:
        self.buffer += data
        frames = []
        while self.buffer:
            try:
                used, channel, value = frame.unmarshal(self.buffer)
            except UnmarshalingException:
                break  # partial frame: wait for more bytes
            self.buffer = self.buffer[used:]
            frames.append((channel, value))
        return frames


class RawClient:
    """A blocking socket that speaks AMQP frame by frame."""

    def __init__(self, node: NodeProcess, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((node.host, node.amqp_port), timeout=timeout)
        self.parser = FrameParser()
        self.pending: list[tuple[int, Any]] = []

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_method(self, channel: int, method: Method) -> None:
        self.send(method_frame(channel, method))

    def recv_raw(self) -> bytes:
        """The next chunk of bytes; b"" once the broker has closed the socket."""
        try:
            return self.sock.recv(65536)
        except ConnectionResetError:
            return b""

    def read_frame(self, skip_heartbeats: bool = True) -> tuple[int, Any]:
        while True:
            while not self.pending:
                data = self.recv_raw()
                if not data:
                    raise EOFError("the broker closed the connection")
                self.pending.extend(self.parser.feed(data))
            channel, value = self.pending.pop(0)
            if not (skip_heartbeats and value.name == "Heartbeat"):
                return channel, value

    def expect(self, kind: type) -> Any:
        channel, value = self.read_frame()
        assert isinstance(value, kind), f"expected {kind.__name__}, got {value!r} on {channel}"
        return value

    def handshake(self, *, frame_max: int = 0, channel_max: int = 0, heartbeat: int = 0,
                  user: str = "guest", password: str = "guest",
                  vhost: str = "/") -> commands.Connection.Tune:
        """Header → start-ok → tune-ok (with the given values, 0 meaning the broker's)
        → open; returns the broker's tune."""
        self.send(PROTOCOL_HEADER)
        self.expect(commands.Connection.Start)
        self.send_method(0, start_ok(user, password))
        tune: commands.Connection.Tune = self.expect(commands.Connection.Tune)
        self.send_method(0, commands.Connection.TuneOk(
            channel_max=channel_max or tune.channel_max,
            frame_max=frame_max or tune.frame_max,
            heartbeat=heartbeat,
        ))
        self.send_method(0, commands.Connection.Open(virtual_host=vhost))
        self.expect(commands.Connection.OpenOk)
        return tune

    def open_channel(self, channel: int = 1) -> None:
        self.send_method(channel, commands.Channel.Open())
        self.expect(commands.Channel.OpenOk)

    def expect_connection_close(self) -> commands.Connection.Close:
        """Read until the broker's ``connection.close`` (ignoring other frames), answer
        close-ok, and check that the broker then closes the socket."""
        while True:
            channel, value = self.read_frame()
            if isinstance(value, commands.Connection.Close):
                assert channel == 0
                self.send_method(0, commands.Connection.CloseOk())
                self.expect_eof()
                return value

    def expect_eof(self) -> None:
        while self.recv_raw():
            pass


# -- expected errors --------------------------------------------------------------------

@contextmanager
def channel_error(code: int) -> Iterator[None]:
    """The block must end with the broker closing the channel with ``code``."""
    try:
        yield
    except pika.exceptions.ChannelClosedByBroker as error:
        assert error.reply_code == code, f"expected {code}, got {error!r}"
    else:
        raise AssertionError(f"expected channel.close {code}, nothing was raised")


@contextmanager
def connection_error(code: int) -> Iterator[None]:
    """The block must end with the broker closing the connection with ``code``."""
    try:
        yield
    except pika.exceptions.ConnectionClosedByBroker as error:
        assert error.reply_code == code, f"expected {code}, got {error!r}"
    else:
        raise AssertionError(f"expected connection.close {code}, nothing was raised")


@contextmanager
def refused_at_open(code: int) -> Iterator[None]:
    """pika wraps a close during the handshake; the broker's reply code is in the text."""
    try:
        yield
    except pika.exceptions.AMQPConnectionError as error:
        assert f"({code})" in str(error), f"expected {code}, got {error!r}"
    else:
        raise AssertionError(f"expected the connection to be refused with {code}")


def assert_node_serves(node: NodeProcess, queue: str = "health-check") -> None:
    """The node is alive and a well-behaved client can publish with confirms and
    consume what it published."""
    assert node.running, f"the node died; log tail:\n{node.log_tail()}"
    bodies = numbered(20, "health")
    connection = connect(node)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.queue_declare(queue, auto_delete=True)
    publish_bodies(channel, queue, bodies)
    events = consume_events(connection, channel, queue, len(bodies), auto_ack=True)
    assert [body for _, body in events] == bodies
    connection.close()
