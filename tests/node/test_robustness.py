"""Malformed and random input never takes the node down: thousands of
random, truncated, oversized, out-of-order and nonsense frames over hundreds of
connections, many at once, with and without a handshake. Every connection must end
with a ``connection.close`` carrying a protocol reply code, or just be closed; the node
must log no traceback and still serve a well-behaved client afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pamqp import commands
from pamqp.base import Frame as Method

from faults.process.node import NodeProcess
from tests.examples import examples
from tests.node.helpers import (
    PROTOCOL_HEADER,
    FrameParser,
    NodeFactory,
    RawClient,
    assert_no_traceback,
    assert_node_serves,
    body_frame,
    content_header_frame,
    method_frame,
    raw_frame,
    start_node,
    start_ok,
)

CONNECTION_CODES = {501, 502, 503, 504, 505, 530, 540, 403, 406}
CHANNEL_CODES = {403, 404, 405, 406}
SEED = 20261122
CONNECTIONS = 400
CONCURRENCY = 60

# The client's half of the handshake, pipelined; fuzz may start after any prefix of it.
HANDSHAKE_STEPS = [
    PROTOCOL_HEADER,
    method_frame(0, start_ok()),
    method_frame(0, commands.Connection.TuneOk(channel_max=16, frame_max=16384, heartbeat=0)),
    method_frame(0, commands.Connection.Open(virtual_host="/")),
    method_frame(1, commands.Channel.Open()),
]
CLIENT_CLOSE = method_frame(0, commands.Connection.Close(
    reply_code=200, reply_text="bye", class_id=0, method_id=0))
CLOSE_OK = method_frame(0, commands.Connection.CloseOk())


@pytest.fixture
def node(node_factory: NodeFactory) -> Iterator[NodeProcess]:
    node = start_node(node_factory)
    yield node
    assert_node_serves(node)
    assert_no_traceback(node)


# -- fuzz generators --------------------------------------------------------------------

def _channel(rng: random.Random) -> int:
    return rng.choice([0, 1, 1, 1, 2, rng.randrange(65536)])


def _random_bytes(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randint(1, 300))


def _random_payload_frame(rng: random.Random) -> bytes:
    frame_type = rng.choice([1, 2, 3, 8, rng.randrange(256)])
    return raw_frame(frame_type, _channel(rng), rng.randbytes(rng.randint(0, 200)))


def _method_with_random_arguments(rng: random.Random) -> bytes:
    index = rng.choice(list(commands.INDEX_MAPPING))
    payload = struct.pack(">I", index) + rng.randbytes(rng.randint(0, 60))
    return raw_frame(1, rng.choice([0, 1, 1, 2]), payload)


def _truncated(rng: random.Random) -> bytes:
    frame = rng.choice([_random_payload_frame, _plausible_method])(rng)
    return frame[: rng.randrange(1, len(frame))]


def _bad_frame_end(rng: random.Random) -> bytes:
    frame = _plausible_method(rng)
    return frame[:-1] + bytes([rng.randrange(0xCE)])


def _huge_size(rng: random.Random) -> bytes:
    size = rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 1 << 20, 16385])
    return struct.pack(">BHI", rng.choice([1, 2, 3]), _channel(rng), size) + rng.randbytes(50)


def _content_out_of_order(rng: random.Random) -> bytes:
    publish = method_frame(1, commands.Basic.Publish(exchange="", routing_key="q"))
    header = content_header_frame(1, 4)
    body = body_frame(1, b"body")
    return rng.choice([
        header, body, header + body, publish + body, publish + header + header,
        publish + header + body + body, publish + publish,
        publish + content_header_frame(1, 2) + body,
        publish + header + method_frame(1, commands.Basic.Qos(prefetch_count=1)),
        publish + raw_frame(2, 1, rng.randbytes(rng.randint(0, 30))),
    ])


def _name(rng: random.Random) -> str:
    return rng.choice(["q", "x", "", "amq.gen", "amq.direct", "zz", "q" * 120])


def _plausible_method(rng: random.Random, channel: int | None = None) -> bytes:
    """A well-formed method with arbitrary (often invalid) values: exercises the broker's
    semantics rather than its parser."""
    name, tag = _name(rng), rng.choice([0, 1, 2, rng.randrange(1 << 63)])
    methods: list[Callable[[], Method]] = [
        lambda: commands.Queue.Declare(queue=name, passive=rng.random() < 0.3,
                                       durable=rng.random() < 0.5,
                                       exclusive=rng.random() < 0.3,
                                       auto_delete=rng.random() < 0.3),
        lambda: commands.Queue.Bind(queue=name, exchange=_name(rng), routing_key=name),
        lambda: commands.Queue.Unbind(queue=name, exchange=_name(rng), routing_key=name),
        lambda: commands.Queue.Purge(queue=name),
        lambda: commands.Queue.Delete(queue=name, if_unused=rng.random() < 0.5),
        lambda: commands.Exchange.Declare(exchange=name, exchange_type=rng.choice(
            ["direct", "fanout", "topic", "direct", "fanout", "topic", "bogus"])),
        lambda: commands.Exchange.Delete(exchange=name),
        lambda: commands.Basic.Qos(prefetch_count=rng.randrange(5),
                                   global_=rng.random() < 0.5),
        lambda: commands.Basic.Consume(queue=name, consumer_tag=rng.choice(["", "", "", "t"]),
                                       no_ack=rng.random() < 0.5),
        lambda: commands.Basic.Cancel(consumer_tag=rng.choice(["", "t", "zz"])),
        lambda: commands.Basic.Get(queue=name, no_ack=rng.random() < 0.5),
        lambda: commands.Basic.Ack(delivery_tag=tag, multiple=rng.random() < 0.5),
        lambda: commands.Basic.Nack(delivery_tag=tag, requeue=rng.random() < 0.5),
        lambda: commands.Basic.Reject(delivery_tag=tag, requeue=rng.random() < 0.5),
        lambda: commands.Basic.Recover(requeue=rng.random() < 0.8),
        lambda: commands.Confirm.Select(),
        lambda: commands.Tx.Select(),
        lambda: commands.Tx.Commit(),
        lambda: commands.Tx.Rollback(),
        lambda: commands.Channel.Flow(active=rng.random() < 0.8),
        lambda: commands.Channel.Open(),
        lambda: commands.Channel.CloseOk(),
        lambda: commands.Connection.TuneOk(channel_max=1, frame_max=4096, heartbeat=0),
        lambda: commands.Connection.Blocked(reason="x"),
    ]
    if channel is None:
        channel = rng.choice([0, 1, 1, 1, 1, 2])
    return method_frame(channel, rng.choice(methods)())


def _publish(rng: random.Random, channel: int = 1) -> bytes:
    body = rng.randbytes(rng.randint(0, 40))
    properties = commands.Basic.Properties(delivery_mode=rng.choice([1, 2]))
    publish = commands.Basic.Publish(exchange=rng.choice(["", "amq.fanout"]),
                                     routing_key=_name(rng), mandatory=rng.random() < 0.5)
    return (method_frame(channel, publish) + content_header_frame(channel, len(body), properties)
            + body_frame(channel, body))


SEMANTIC_CHANNELS = 8


def _semantic(rng: random.Random) -> bytes:
    """Valid frames on one of the channels a semantic script opens."""
    channel = rng.randint(1, SEMANTIC_CHANNELS)
    if rng.random() < 0.3:
        return _publish(rng, channel)
    return _plausible_method(rng, channel)


GENERATORS: list[tuple[Callable[[random.Random], bytes], int]] = [
    (_random_bytes, 2), (_random_payload_frame, 3), (_method_with_random_arguments, 4),
    (_truncated, 1), (_bad_frame_end, 1), (_huge_size, 1), (_content_out_of_order, 2),
    (_plausible_method, 10), (_publish, 4),
]


def _malformed(rng: random.Random) -> bytes:
    functions, weights = zip(*GENERATORS, strict=True)
    return rng.choices(functions, weights)[0](rng)


def fuzz_script(rng: random.Random) -> tuple[int, list[bytes]]:
    """How much of the handshake to send, then the fuzz units: either a long conversation
    of valid frames on several channels (often ending in garbage), or garbage at once."""
    if rng.random() < 0.5:
        opens = [method_frame(c, commands.Channel.Open())
                 for c in range(2, SEMANTIC_CHANNELS + 1)]
        units = opens + [_semantic(rng) for _ in range(rng.randint(20, 80))]
        if rng.random() < 0.5:
            units.append(_malformed(rng))
        return 5, units
    return rng.choice([0, 1, 2, 3, 4, 5, 5, 5]), [
        _malformed(rng) for _ in range(rng.randint(1, 30))]


# -- running a connection ---------------------------------------------------------------

@dataclass
class Outcome:
    connection_code: int | None = None  # the broker's connection.close, if any
    channel_codes: list[int] = field(default_factory=list)
    closed_by_broker: bool = False
    frames_sent: int = 0


class _Reader:
    """Collects what the broker says until it closes the connection."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        self.parser = FrameParser()
        self.done = False
        self.replies: list[bytes] = []

    def feed(self, data: bytes) -> None:
        for _, value in self.parser.feed(data):
            if isinstance(value, commands.Channel.Close):
                self.outcome.channel_codes.append(value.reply_code or 0)
            elif isinstance(value, commands.Connection.Close):
                self.outcome.connection_code = value.reply_code
                self.replies.append(CLOSE_OK)
            elif isinstance(value, commands.Connection.CloseOk):
                self.done = True


async def run_connection(host: str, port: int, depth: int, units: list[bytes],
                         half_close: bool = False) -> Outcome:
    """Send the first ``depth`` handshake steps, then the fuzz (then, after a full
    handshake, a polite connection.close), and report how the broker reacted. With
    ``half_close`` the client also ends its output at once."""
    outcome = Outcome(frames_sent=len(units))
    reader, writer = await asyncio.open_connection(host, port)
    state = _Reader(outcome)
    try:
        with contextlib.suppress(ConnectionError):
            writer.write(b"".join(HANDSHAKE_STEPS[:depth]) + b"".join(units))
            if depth >= 4:
                writer.write(CLIENT_CLOSE)
            if half_close:
                writer.write_eof()
            await writer.drain()
        await _read_until_closed(reader, writer, state, outcome, half_close)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    return outcome


async def _read_until_closed(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                             state: _Reader, outcome: Outcome, half_closed: bool) -> None:
    """Read until the broker closes the socket. If it waits for more input (the fuzz
    ended inside a frame, or before the handshake did), half-close: the end of the input
    must end the connection too."""
    while True:
        try:
            data = await asyncio.wait_for(reader.read(65536), 10.0 if half_closed else 2.0)
        except TimeoutError:
            if half_closed or state.done:
                raise AssertionError("the broker neither answered nor closed") from None
            with contextlib.suppress(OSError):
                writer.write_eof()
            half_closed = True
            continue
        except ConnectionError:
            data = b""
        if not data:
            outcome.closed_by_broker = not state.done
            return
        state.feed(data)
        if not half_closed:
            with contextlib.suppress(ConnectionError):
                writer.write(b"".join(state.replies))
        state.replies.clear()


async def run_campaign(node: NodeProcess, rng: random.Random) -> list[Outcome]:
    limit = asyncio.Semaphore(CONCURRENCY)
    scripts = [fuzz_script(rng) for _ in range(CONNECTIONS)]

    async def one(depth: int, units: list[bytes]) -> Outcome:
        async with limit:
            return await run_connection(node.host, node.amqp_port, depth, units)

    return await asyncio.gather(*(one(depth, units) for depth, units in scripts))


def assert_outcomes(outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        assert outcome.connection_code is None or outcome.connection_code in CONNECTION_CODES, \
            outcome
        assert set(outcome.channel_codes) <= CHANNEL_CODES, outcome


# -- tests ------------------------------------------------------------------------------

def test_hundreds_of_concurrent_fuzzed_connections(node: NodeProcess) -> None:
    rng = random.Random(SEED)
    outcomes = asyncio.run(run_campaign(node, rng))
    assert_outcomes(outcomes)
    assert sum(o.frames_sent for o in outcomes) > 5000
    codes = {o.connection_code for o in outcomes}
    assert {501, 502, 505} <= codes  # the fuzz really hit the frame-level checks
    assert any(o.closed_by_broker and o.connection_code is None for o in outcomes)


def _sync_run(node: NodeProcess, depth: int, units: list[bytes]) -> Outcome:
    return asyncio.run(run_connection(node.host, node.amqp_port, depth, units,
                                      half_close=True))


frames = st.one_of(
    st.binary(min_size=1, max_size=64),
    st.builds(raw_frame, st.sampled_from([1, 2, 3, 8, 0, 255]), st.sampled_from([0, 1, 2]),
              st.binary(max_size=64)),
    st.builds(lambda index, args: raw_frame(1, 1, struct.pack(">I", index) + args),
              st.sampled_from(sorted(commands.INDEX_MAPPING)), st.binary(max_size=40)),
    st.integers(min_value=0, max_value=2**31).map(lambda seed: _plausible_method(
        random.Random(seed))),
)


@settings(max_examples=examples(150), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.integers(min_value=0, max_value=5), units=st.lists(frames, max_size=8))
def test_hypothesis_frames_get_a_protocol_answer(node: NodeProcess, depth: int,
                                                 units: list[bytes]) -> None:
    assert_outcomes([_sync_run(node, depth, units)])
    assert node.running


def test_many_half_handshakes_then_silence_are_cleaned_up(node: NodeProcess) -> None:
    """Connections that stop mid-handshake hold nothing up and are closed by the
    handshake timeout (10 s, as RabbitMQ's)."""
    sockets = []
    for depth in range(4):  # nothing, header, + start-ok, + tune-ok
        for _ in range(10):
            sock = socket.create_connection((node.host, node.amqp_port), timeout=30.0)
            sock.sendall(b"".join(HANDSHAKE_STEPS[:depth]))
            sockets.append(sock)
    assert_node_serves(node)
    for sock in sockets:
        with sock:
            while sock.recv(65536):  # the broker's start/tune frames, then end of stream
                pass


# -- field tables nested past the decoder's depth limit ---------------------------------

# Levels in a frame of the frame_max HANDSHAKE_STEPS asks for (16384 bytes), and in one
# before tune-ok (4096): far more than the nesting the decoder takes either way.
DEPTH = 2000
PRE_TUNE_DEPTH = 500


def _deep_table(depth: int = DEPTH) -> bytes:
    """An encoded field table holding a table holding a table ... ``depth`` levels."""
    table = struct.pack(">I", 0)
    for _ in range(depth):
        entry = b"\x01k" + b"F" + table
        table = struct.pack(">I", len(entry)) + entry
    return table


def _short(text: str) -> bytes:
    return bytes([len(text)]) + text.encode()


def _long(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _method(channel: int, class_id: int, method_id: int, arguments: bytes) -> bytes:
    return raw_frame(1, channel, struct.pack(">HH", class_id, method_id) + arguments)


def _close_after(client: RawClient, frames: list[bytes]) -> commands.Connection.Close:
    client.send(b"".join(frames))
    return client.expect_connection_close()


def test_field_tables_nested_too_deeply_are_refused_cleanly(node: NodeProcess) -> None:
    """Before authentication (start-ok's client properties, an AMQPLAIN response) and
    after it (queue.declare's arguments, a message's headers): each is closed with the
    protocol's reply code and a reason, and the node logs no traceback (the fixture
    checks that, and that a well-behaved client is still served)."""
    deep, pre_tune = _deep_table(), _deep_table(PRE_TUNE_DEPTH)
    plain = _long(b"\x00guest\x00guest")
    start_ok_deep = _method(0, 10, 11, pre_tune + _short("PLAIN") + plain + _short("en_US"))
    amqplain = _method(0, 10, 11, struct.pack(">I", 0) + _short("AMQPLAIN")
                       + _long(pre_tune[4:]) + _short("en_US"))
    declare = _method(1, 50, 10, struct.pack(">H", 0) + _short("deep") + b"\x00" + deep)
    headers = raw_frame(2, 1, struct.pack(">HHQH", 60, 0, 1, 0x2000) + deep)
    cases = [
        ([PROTOCOL_HEADER, start_ok_deep], 501),
        ([PROTOCOL_HEADER, amqplain], 403),
        ([*HANDSHAKE_STEPS, declare], 501),
        ([*HANDSHAKE_STEPS, method_frame(1, commands.Basic.Publish(routing_key="q")),
          headers], 502),
    ]
    for frames, code in cases:
        with RawClient(node) as client:
            close = _close_after(client, frames)
        assert (close.reply_code, "nested too deeply" in close.reply_text) == (code, True), \
            close
