"""`mirrorchaos bench`: the same workload, with the same client, against AMQP brokers.

Each broker URL is measured in turn by a series of stages (a small registry, so
failover and cluster figures can be added as further stages). A stage turns one
target into flat, named figures; figures of the first URL are the reference and
every other URL gets the ratio of its figures to the first one's.

The publisher is a lean AMQP 0-9-1 client written here on pamqp and an asyncio
protocol: pre-marshalled publish frames, confirms parsed without building pamqp
objects. A general-purpose Python client costs more CPU per message than a
Python broker does, and on a small machine it would share cores with the broker
and become what is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import platform
import statistics
import struct
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Literal, Protocol
from urllib.parse import quote, unquote, urlsplit

from pamqp import commands, frame, header
from pamqp import exceptions as pamqp_exceptions
from pamqp.body import ContentBody

Delivery = Literal["persistent", "transient"]
DELIVERIES: tuple[Delivery, ...] = ("persistent", "transient")
CLIENT_NAME = "mirrorchaos-lean-amqp"


# --------------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least q% of samples <= it."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ratios(first: Mapping[str, float], other: Mapping[str, float]) -> dict[str, float | None]:
    """other / first for every figure both have; None where the reference is zero."""
    out: dict[str, float | None] = {}
    for name, reference in first.items():
        if name not in other:
            continue
        out[name] = None if reference == 0 else round(other[name] / reference, 3)
    return out


@dataclass(frozen=True)
class ConfirmGaps:
    longest: float  # the longest pause between consecutive confirms, kill or not
    longest_before_kill: float  # the same, among confirms that came before the kill
    kill_to_first_confirm: float | None  # None: no confirm came after the kill


def confirm_gaps(ack_times: Sequence[float], kill_at: float) -> ConfirmGaps:
    """Pauses in a run's confirm stream (times in seconds, in arrival order); a kill
    that falls inside a pause is measured from kill_at to the end of that pause."""
    if not ack_times:
        raise ValueError("no confirms at all")
    times = list(ack_times)
    if any(b < a for a, b in itertools.pairwise(times)):
        raise ValueError("confirm times are not in arrival order")
    longest = longest_before = 0.0
    first_after: float | None = None
    for previous, current in itertools.pairwise(times):
        longest = max(longest, current - previous)
        if current <= kill_at:
            longest_before = max(longest_before, current - previous)
    after = [t for t in times if t > kill_at]
    if after:
        first_after = after[0] - kill_at
    return ConfirmGaps(longest, longest_before, first_after)


# --------------------------------------------------------------------------- targets and errors


class BrokerError(Exception):
    """The broker at `url` could not be reached or misbehaved; `url` has no password."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"{url}: {message}")
        self.url = url
        self.message = message


class ConnectionDropped(BrokerError):
    """The socket closed without an AMQP Connection.Close explaining why."""


@dataclass(frozen=True)
class AmqpUrl:
    host: str
    port: int
    user: str
    password: str
    vhost: str

    @property
    def display(self) -> str:
        """The URL with the password masked, for output and error messages."""
        vhost = "" if self.vhost == "/" else quote(self.vhost, safe="")
        return f"amqp://{self.user}:***@{self.host}:{self.port}/{vhost}"


def parse_amqp_url(url: str) -> AmqpUrl:
    """Parse amqp://user:pass@host:port/vhost with RabbitMQ's defaults; ValueError if bad."""
    parts = urlsplit(url)
    if parts.scheme != "amqp":
        raise ValueError(f"{url!r}: only amqp:// URLs are supported")
    if not parts.hostname:
        raise ValueError(f"{url!r}: no host")
    try:
        port = parts.port or 5672
    except ValueError as err:
        raise ValueError(f"{url!r}: bad port") from err
    # As in RabbitMQ's URI spec: no path means "/", "/%2F" means "/", "/x" means "x".
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    vhost = unquote(path) if path else "/"
    return AmqpUrl(
        host=parts.hostname,
        port=port,
        user=unquote(parts.username or "guest"),
        password=unquote(parts.password or "guest"),
        vhost=vhost,
    )


# --------------------------------------------------------------------------- lean AMQP client

_FRAME_HEADER = struct.Struct(">BHI")
_METHOD_ID = struct.Struct(">HH")
_CONFIRM = struct.Struct(">QB")
_NUMBER = struct.Struct(">Q")
_FRAME_END = 0xCE
_BASIC_ACK = (60, 80)
_BASIC_NACK = (60, 120)


class _ConfirmRun:
    """Delivery tags of one publishing run, with their send times and confirm times."""

    def __init__(self, first_tag: int, count: int, loop: asyncio.AbstractEventLoop) -> None:
        self.first_tag = first_tag
        self.count = count
        self.sent_at = [0.0] * count
        self.latencies: list[float] = []
        self.published = 0
        self.confirmed = 0
        self.nacked = 0
        self.finished: asyncio.Future[None] = loop.create_future()
        # When each batch of acks arrived (one entry per settle call that acked any).
        self.ack_times: list[float] = []
        self._settled = bytearray(count)  # 0 unsettled, 1 acked, 2 nacked
        self._lowest = 0  # index of the lowest unsettled tag

    @property
    def outstanding(self) -> int:
        return self.published - self.confirmed - self.nacked

    def acked_indices(self) -> list[int]:
        """Offsets (tag - first_tag) of the acked messages."""
        return [i for i, state in enumerate(self._settled) if state == 1]

    def mark_sent(self, k: int, now: float) -> None:
        self.sent_at[self.published : self.published + k] = [now] * k
        self.published += k

    def settle(self, tag: int, multiple: bool, ack: bool, now: float) -> None:
        index = tag - self.first_tag
        if not 0 <= index < self.published:
            return  # a tag from before this run (e.g. warm-up) or a broker bug
        start = self._lowest if multiple else index
        settled, sent_at, latencies = self._settled, self.sent_at, self.latencies
        acked_before = self.confirmed
        for i in range(start, index + 1):
            if settled[i]:
                continue
            if ack:
                settled[i] = 1
                self.confirmed += 1
                latencies.append(now - sent_at[i])
            else:
                settled[i] = 2
                self.nacked += 1
        if self.confirmed > acked_before:
            self.ack_times.append(now)
        while self._lowest < self.published and settled[self._lowest]:
            self._lowest += 1
        if self.confirmed + self.nacked == self.count and not self.finished.done():
            self.finished.set_result(None)


class LeanConnection(asyncio.Protocol):
    """One AMQP connection with one confirm-mode channel, driven step by step."""

    CHANNEL = 1

    def __init__(self, url: AmqpUrl) -> None:
        self.url = url
        self.server_properties: dict[str, Any] = {}
        self.frame_max = 131072
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._buffer = bytearray()
        self._waiter: tuple[type, asyncio.Future[Any]] | None = None
        self._error: BrokerError | None = None
        self._next_tag = 1
        self._run: _ConfirmRun | None = None
        self._on_confirm: Callable[[], None] | None = None
        # Consuming (only to drain a queue): the first 8 body bytes of each delivery.
        self.delivered: list[bytes] = []
        self.last_delivery_at = 0.0
        self._body: bytearray | None = None
        self._body_size = 0
        self._delivery_tag = 0

    # -- opening and closing

    @classmethod
    async def open(cls, url: AmqpUrl, timeout: float) -> LeanConnection:
        loop = asyncio.get_running_loop()
        conn = cls(url)
        try:
            await asyncio.wait_for(
                loop.create_connection(lambda: conn, url.host, url.port), timeout
            )
        except TimeoutError as err:
            raise conn._broker_error(f"no TCP connection within {timeout:g}s") from err
        except OSError as err:
            reason = err.strerror or str(err)
            raise conn._broker_error(f"cannot connect: {reason}") from err
        try:
            await asyncio.wait_for(conn._handshake(), timeout)
        except TimeoutError as err:
            conn.abort()
            raise conn._broker_error(f"no AMQP handshake within {timeout:g}s") from err
        except BrokerError:
            conn.abort()
            raise
        return conn

    async def _handshake(self) -> None:
        start = self._expect(commands.Connection.Start)
        self._write_raw(header.ProtocolHeader().marshal())
        try:
            server_start = await start
        except ConnectionDropped as err:
            raise self._broker_error(
                "connection closed before the AMQP handshake (not an AMQP 0-9-1 port?)"
            ) from err
        self.server_properties = dict(server_start.server_properties or {})
        mechanisms = str(server_start.mechanisms).split()
        if "PLAIN" not in mechanisms:
            raise self._broker_error(f"broker offers no PLAIN authentication ({mechanisms})")
        tune = self._expect(commands.Connection.Tune)
        self._send(
            commands.Connection.StartOk(
                client_properties={
                    "product": CLIENT_NAME,
                    "capabilities": {
                        "authentication_failure_close": True,
                        "publisher_confirms": True,
                        "basic.nack": True,
                        "connection.blocked": True,
                    },
                },
                mechanism="PLAIN",
                response=f"\0{self.url.user}\0{self.url.password}",
            ),
            channel=0,
        )
        try:
            server_tune = await tune
        except ConnectionDropped as err:
            # Brokers that ignore authentication_failure_close just drop the socket.
            raise self._broker_error(
                f"connection dropped during login as {self.url.user!r} (bad credentials?)"
            ) from err
        self.frame_max = server_tune.frame_max or self.frame_max
        # Heartbeats off: a bench run is short and must not spend time on them.
        self._send(
            commands.Connection.TuneOk(
                channel_max=server_tune.channel_max, frame_max=self.frame_max, heartbeat=0
            ),
            channel=0,
        )
        await self.call(
            commands.Connection.Open(virtual_host=self.url.vhost),
            commands.Connection.OpenOk,
            channel=0,
        )
        await self.call(commands.Channel.Open(), commands.Channel.OpenOk)
        await self.call(commands.Confirm.Select(), commands.Confirm.SelectOk)

    async def close(self) -> None:
        if self._transport is None or self._error is not None:
            self.abort()
            return
        with contextlib.suppress(BrokerError, TimeoutError):
            await asyncio.wait_for(
                self.call(
                    commands.Connection.Close(200, "bench done", 0, 0),
                    commands.Connection.CloseOk,
                    channel=0,
                ),
                5,
            )
        self.abort()

    def abort(self) -> None:
        """Drop the socket at once, with whatever is still unsent: a broker that is not
        reading us would otherwise keep the connection open."""
        if self._transport is not None:
            self._transport.abort()

    # -- writing without reading (harness.flood's greedy clients)

    def stop_reading(self) -> None:
        """Read nothing more: what the broker sends piles up on its side."""
        assert self._transport is not None
        self._transport.pause_reading()

    def write(self, data: bytes) -> None:
        self._write_raw(data)

    def buffered(self) -> int:
        """Bytes written that the broker has not taken yet."""
        return self._transport.get_write_buffer_size() if self._transport is not None else 0

    @property
    def closed(self) -> bool:
        return self._error is not None

    @property
    def error_text(self) -> str:
        return self._error.message if self._error is not None else ""

    # -- synchronous methods

    async def call(self, method: Any, reply: type, channel: int = CHANNEL) -> Any:
        waiter = self._expect(reply)
        self._send(method, channel)
        return await waiter

    def _expect(self, reply: type) -> asyncio.Future[Any]:
        self._check()
        future: asyncio.Future[Any] = self._loop.create_future()
        self._waiter = (reply, future)
        return future

    def _send(self, method: Any, channel: int = CHANNEL) -> None:
        self._write_raw(frame.marshal(method, channel))

    def _write_raw(self, data: bytes) -> None:
        self._check()
        assert self._transport is not None
        self._transport.write(data)

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._transport is None:
            raise self._broker_error("not connected")

    def _broker_error(self, message: str) -> BrokerError:
        return BrokerError(self.url.display, message)

    # -- publishing

    def publish_frames(self, queue: str, body: bytes, persistent: bool,
                       mandatory: bool = False) -> bytes:
        """The frames of one publish to `queue` via the default exchange, marshalled once."""
        properties = commands.Basic.Properties(delivery_mode=2 if persistent else 1)
        publish = commands.Basic.Publish(exchange="", routing_key=queue, mandatory=mandatory)
        parts = [
            frame.marshal(publish, self.CHANNEL),
            frame.marshal(header.ContentHeader(0, len(body), properties), self.CHANNEL),
        ]
        chunk = self.frame_max - 8  # a body frame's payload is frame_max less its overhead
        parts += [
            frame.marshal(ContentBody(body[i : i + chunk]), self.CHANNEL)
            for i in range(0, len(body), chunk)
        ]
        return b"".join(parts)

    def numbered_publish_frames(
        self, queue: str, size: int, persistent: bool
    ) -> tuple[bytes, bytes]:
        """Frames of one publish whose body starts with an 8-byte number, split around
        that number: publish_numbered() puts each message's delivery tag there, so
        a drained queue says which confirmed messages it still holds."""
        size = max(size, _NUMBER.size)
        if size > self.frame_max - 8:
            raise ValueError(f"a numbered body of {size} bytes needs more than one frame")
        frames = self.publish_frames(queue, b"\0" * _NUMBER.size + b"x" * (size - 8), persistent)
        at = len(frames) - size - 1  # the body is the last frame's payload, then frame-end
        return frames[:at], frames[at + _NUMBER.size :]

    def publish_numbered(self, frames: tuple[bytes, bytes], k: int) -> None:
        run = self._run
        assert run is not None
        k = min(k, run.count - run.published)
        if k <= 0:
            return
        head, tail = frames
        first, pack = self._next_tag, _NUMBER.pack
        self._write_raw(b"".join(head + pack(first + j) + tail for j in range(k)))
        run.mark_sent(k, time.perf_counter())
        self._next_tag += k

    async def drain(self, queue: str, idle: float) -> tuple[int, list[int]]:
        """Consume `queue`, acking every delivery, until nothing arrives for `idle`
        seconds (after at least the queue's message count arrived, or for 3 * idle
        otherwise); returns that count and the numbers of every delivered message.
        Acks rather than no-ack: a broker may hold back a no-ack consumer's credit
        until something else happens on the queue."""
        ok = await self.call(
            commands.Queue.Declare(queue=queue, passive=True), commands.Queue.DeclareOk
        )
        count = int(ok.message_count)
        self.delivered = []
        self.last_delivery_at = time.perf_counter()
        await self.call(commands.Basic.Qos(prefetch_count=1000), commands.Basic.QosOk)
        await self.call(
            commands.Basic.Consume(queue=queue, consumer_tag="drain"), commands.Basic.ConsumeOk
        )
        while True:
            await asyncio.sleep(idle / 10)
            self._check()
            quiet = time.perf_counter() - self.last_delivery_at
            if quiet >= (idle if len(self.delivered) >= count else 3 * idle):
                break
        await self.call(commands.Basic.Cancel(consumer_tag="drain"), commands.Basic.CancelOk)
        return count, [_NUMBER.unpack_from(b)[0] for b in self.delivered if len(b) >= 8]

    def begin_run(self, count: int, on_confirm: Callable[[], None] | None) -> _ConfirmRun:
        self._check()
        self._run = _ConfirmRun(self._next_tag, count, self._loop)
        self._on_confirm = on_confirm
        return self._run

    def publish(self, frames: bytes, k: int) -> None:
        run = self._run
        assert run is not None
        k = min(k, run.count - run.published)
        if k <= 0:
            return
        self._write_raw(frames * k)
        run.mark_sent(k, time.perf_counter())
        self._next_tag += k

    def end_run(self) -> None:
        self._run = None
        self._on_confirm = None

    async def wait_run(self, stall_timeout: float) -> None:
        """Wait until every message of the run is settled; fail on a stall or a nack."""
        run = self._run
        assert run is not None
        last = -1
        while not run.finished.done():
            settled = run.confirmed + run.nacked
            if settled == last:
                raise self._broker_error(
                    f"no publisher confirm for {stall_timeout:g}s "
                    f"({settled}/{run.published} settled)"
                )
            last = settled
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(run.finished), stall_timeout)
        run.finished.result()
        if run.nacked:
            raise self._broker_error(f"broker nacked {run.nacked} of {run.count} publishes")

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        reason = f": {exc}" if exc else ""
        self._fail(ConnectionDropped(self.url.display, f"connection closed{reason}"))

    def data_received(self, data: bytes) -> None:
        buf = self._buffer
        buf += data
        if buf[:4] == b"AMQP":
            self._fail(self._broker_error(f"broker rejected AMQP 0-9-1 (answered {buf[:8]!r})"))
            return
        pos, end_of_data, confirmed = 0, len(buf), False
        while end_of_data - pos >= 8:
            kind, channel, size = _FRAME_HEADER.unpack_from(buf, pos)
            end = pos + 8 + size
            if end > end_of_data:
                break
            if buf[end - 1] != _FRAME_END:
                self._fail(self._broker_error("malformed frame from broker"))
                return
            # Confirms are most of the traffic: decode them without pamqp objects.
            method = _METHOD_ID.unpack_from(buf, pos + 7) if kind == 1 and size == 13 else None
            if method in (_BASIC_ACK, _BASIC_NACK):
                tag, bits = _CONFIRM.unpack_from(buf, pos + 11)
                if self._run is not None:
                    self._run.settle(tag, bool(bits & 1), method == _BASIC_ACK, time.perf_counter())
                confirmed = True
            else:
                try:
                    _, channel, value = frame.unmarshal(bytes(buf[pos:end]))
                except pamqp_exceptions.UnmarshalingException as err:
                    self._fail(self._broker_error(f"undecodable frame from broker: {err}"))
                    return
                self._dispatch(channel, value)
            pos = end
        del buf[:pos]
        if confirmed and self._on_confirm is not None and self._error is None:
            self._on_confirm()

    def _dispatch(self, channel: int, value: Any) -> None:
        """Closes fail the connection; anything not waited for is ignored (a blocked
        broker shows up as confirms that stop coming)."""
        if isinstance(value, commands.Connection.Close):
            with contextlib.suppress(BrokerError):
                self._send(commands.Connection.CloseOk(), channel=0)
            self._fail(
                self._broker_error(
                    f"broker closed the connection: {value.reply_code} {value.reply_text}"
                )
            )
        elif isinstance(value, commands.Channel.Close):
            with contextlib.suppress(BrokerError):
                self._send(commands.Channel.CloseOk(), channel=channel)
            self._fail(
                self._broker_error(
                    f"broker closed the channel: {value.reply_code} {value.reply_text}"
                )
            )
        elif isinstance(value, commands.Basic.Deliver):
            self._body = bytearray()
            self._delivery_tag = value.delivery_tag or 0
        elif isinstance(value, header.ContentHeader) and self._body is not None:
            self._body_size = value.body_size
            self._delivery_part(b"")
        elif isinstance(value, ContentBody) and self._body is not None:
            self._delivery_part(value.value)
        elif self._waiter is not None and isinstance(value, self._waiter[0]):
            _, future = self._waiter
            self._waiter = None
            if not future.done():
                future.set_result(value)

    def _delivery_part(self, data: bytes) -> None:
        assert self._body is not None
        self._body += data
        if len(self._body) >= self._body_size:
            self.delivered.append(bytes(self._body[: _NUMBER.size]))
            self.last_delivery_at = time.perf_counter()
            self._body = None
            self._send(commands.Basic.Ack(self._delivery_tag))

    def _fail(self, error: BrokerError) -> None:
        if self._error is None:
            self._error = error
        if self._waiter is not None:
            _, future = self._waiter
            self._waiter = None
            if not future.done():
                future.set_exception(self._error)
        if self._run is not None and not self._run.finished.done():
            self._run.finished.set_exception(self._error)
        if self._transport is not None:
            self._transport.close()


# --------------------------------------------------------------------------- workload


@dataclass(frozen=True)
class Workload:
    messages: int = 20000
    size: int = 1024
    window: int = 256
    rate: float | None = None  # None: half the lowest throughput measured across the URLs
    deliveries: tuple[Delivery, ...] = DELIVERIES
    queue: str = "mirrorchaos-bench"
    warmup: int = 1000
    repeat: int = 3
    timeout: float = 30.0
    failover_before: float = 3.0  # seconds of steady publishing before the kill
    failover_after: float = 5.0  # and after it

    def as_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "size": self.size,
            "window": self.window,
            "rate": self.rate,
            "deliveries": list(self.deliveries),
            "queue": self.queue,
            "warmup": self.warmup,
            "repeat": self.repeat,
            "timeout": self.timeout,
            "failover_before_s": self.failover_before,
            "failover_after_s": self.failover_after,
            "durable_queue": True,
            "consumers": 0,
        }


@dataclass(frozen=True)
class Figure:
    unit: str
    better: Literal["higher", "lower"]


@dataclass
class TargetResult:
    url: AmqpUrl
    # The queue is declared (so its master placed) and deleted through master_url when
    # set, and published to through url; kill_command SIGKILLs master_url's node.
    master_url: AmqpUrl | None = None
    kill_command: str | None = None
    server: dict[str, str] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchContext:
    workload: Workload
    results: list[TargetResult]
    log: Callable[[str], None]


class Stage(Protocol):
    """One kind of measurement, run on every target before the next stage starts."""

    name: str

    def figures(self, workload: Workload) -> dict[str, Figure]: ...

    async def measure(self, target: TargetResult, ctx: BenchContext) -> dict[str, Any]:
        """Fill target.figures; return the details to keep under the stage's name."""
        ...


async def _declare_through_master(target: TargetResult, ctx: BenchContext) -> None:
    """Declare and purge the queue through the master's URL, then wait until the
    publishing node knows it (cluster metadata may reach it a moment later, and a
    publish to an unknown queue is confirmed and dropped)."""
    assert target.master_url is not None
    w = ctx.workload
    master = await LeanConnection.open(target.master_url, w.timeout)
    try:
        await master.call(
            commands.Queue.Declare(queue=w.queue, durable=True), commands.Queue.DeclareOk
        )
        await master.call(commands.Queue.Purge(queue=w.queue), commands.Queue.PurgeOk)
    finally:
        await master.close()
    deadline = time.monotonic() + w.timeout
    while True:
        probe = await LeanConnection.open(target.url, w.timeout)
        try:
            await probe.call(
                commands.Queue.Declare(queue=w.queue, passive=True), commands.Queue.DeclareOk
            )
            return
        except BrokerError:
            if time.monotonic() > deadline:
                raise
        finally:
            await probe.close()
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def _fresh_queue(
    target: TargetResult, ctx: BenchContext, delivery: Delivery
) -> AsyncIterator[tuple[LeanConnection, bytes]]:
    """A connection and an empty durable queue, deleted afterwards."""
    queue = ctx.workload.queue
    if target.master_url is not None:
        await _declare_through_master(target, ctx)
    conn = await LeanConnection.open(target.url, ctx.workload.timeout)
    try:
        target.server = _server_info(conn.server_properties)
        if target.master_url is None:
            # Declare-then-purge also empties a queue an interrupted run left behind.
            await conn.call(
                commands.Queue.Declare(queue=queue, durable=True), commands.Queue.DeclareOk
            )
            await conn.call(commands.Queue.Purge(queue=queue), commands.Queue.PurgeOk)
        frames = conn.publish_frames(queue, b"x" * ctx.workload.size, delivery == "persistent")
        yield conn, frames
        await conn.call(commands.Queue.Delete(queue=queue), commands.Queue.DeleteOk)
    finally:
        await conn.close()


async def _publish_windowed(
    conn: LeanConnection, frames: bytes, count: int, window: int, timeout: float
) -> _ConfirmRun:
    """Publish `count` messages keeping `window` unconfirmed; refill on every confirm."""

    def refill() -> None:
        conn.publish(frames, window - confirms.outstanding)

    confirms = conn.begin_run(count, refill)
    try:
        refill()
        await conn.wait_run(timeout)
    finally:
        conn.end_run()
    return confirms


async def _publish_at_rate(
    conn: LeanConnection, frames: bytes, count: int, rate: float, timeout: float
) -> _ConfirmRun:
    """Publish `count` messages on a fixed schedule, open loop: confirms never hold it back."""
    run = conn.begin_run(count, None)
    try:
        start = time.perf_counter()
        while run.published < count:
            due = min(count, int((time.perf_counter() - start) * rate) + 1)
            conn.publish(frames, due - run.published)
            next_at = start + run.published / rate
            await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
        await conn.wait_run(timeout)
    finally:
        conn.end_run()
    return run


async def _warm_up(conn: LeanConnection, frames: bytes, workload: Workload) -> None:
    if workload.warmup:
        await _publish_windowed(conn, frames, workload.warmup, workload.window, workload.timeout)
        await conn.call(commands.Queue.Purge(queue=workload.queue), commands.Queue.PurgeOk)


class ThroughputStage:
    """Confirmed-publish throughput with a window of outstanding confirms (median of runs)."""

    name = "throughput"

    def figures(self, workload: Workload) -> dict[str, Figure]:
        return {f"throughput_{d}": Figure("msg/s", "higher") for d in workload.deliveries}

    async def measure(self, target: TargetResult, ctx: BenchContext) -> dict[str, Any]:
        w = ctx.workload
        details: dict[str, Any] = {}
        for delivery in w.deliveries:
            runs: list[float] = []
            async with _fresh_queue(target, ctx, delivery) as (conn, frames):
                await _warm_up(conn, frames, w)
                for i in range(w.repeat):
                    started = time.perf_counter()
                    await _publish_windowed(conn, frames, w.messages, w.window, w.timeout)
                    runs.append(w.messages / (time.perf_counter() - started))
                    ctx.log(
                        f"{target.url.display}: throughput {delivery} "
                        f"run {i + 1}/{w.repeat}: {runs[-1]:.0f} msg/s"
                    )
                    # Purge so every run sees the same queue length, not a growing one.
                    await conn.call(commands.Queue.Purge(queue=w.queue), commands.Queue.PurgeOk)
            target.figures[f"throughput_{delivery}"] = round(statistics.median(runs), 1)
            details[delivery] = {"runs_msgs_per_s": [round(r, 1) for r in runs]}
        return details


class LatencyStage:
    """Confirm latency p50/p99 at one fixed publish rate, the same for every URL.

    By default the rate is half the lowest throughput measured across the URLs, so
    every broker is compared under the same offered load and none is overloaded.
    """

    name = "latency"

    def figures(self, workload: Workload) -> dict[str, Figure]:
        out: dict[str, Figure] = {}
        for d in workload.deliveries:
            out[f"latency_p50_ms_{d}"] = Figure("ms", "lower")
            out[f"latency_p99_ms_{d}"] = Figure("ms", "lower")
        return out

    def rate(self, ctx: BenchContext, delivery: Delivery) -> float:
        if ctx.workload.rate is not None:
            return ctx.workload.rate
        return min(r.figures[f"throughput_{delivery}"] for r in ctx.results) / 2

    async def measure(self, target: TargetResult, ctx: BenchContext) -> dict[str, Any]:
        w = ctx.workload
        details: dict[str, Any] = {}
        for delivery in w.deliveries:
            rate = self.rate(ctx, delivery)
            async with _fresh_queue(target, ctx, delivery) as (conn, frames):
                await _warm_up(conn, frames, w)
                started = time.perf_counter()
                run = await _publish_at_rate(conn, frames, w.messages, rate, w.timeout)
                elapsed = time.perf_counter() - started
            ms = [s * 1000 for s in run.latencies]
            p50, p99 = percentile(ms, 50), percentile(ms, 99)
            target.figures[f"latency_p50_ms_{delivery}"] = round(p50, 3)
            target.figures[f"latency_p99_ms_{delivery}"] = round(p99, 3)
            details[delivery] = {
                "rate_msgs_per_s": round(rate, 1),
                "achieved_msgs_per_s": round(w.messages / elapsed, 1),
                "max_ms": round(max(ms), 3),
            }
            ctx.log(
                f"{target.url.display}: latency {delivery} at {rate:.0f} msg/s: "
                f"p50 {p50:.2f} ms, p99 {p99:.2f} ms"
            )
        return details


class FailoverStage:
    """SIGKILL the queue's master while publishing with confirms at a steady rate
    through a node that stays up; the pause in confirms, and whether every confirmed
    message is still in the queue afterwards (drained and counted).

    Needs a master URL and a kill command per target; it kills a node, so it runs
    last and each target must be a different cluster. One delivery mode: the first
    of the workload's. Rate: --rate, else half the target's own throughput.
    """

    name = "failover"

    def figures(self, workload: Workload) -> dict[str, Figure]:
        return {
            "failover_gap_ms": Figure("ms", "lower"),
            "failover_kill_to_confirm_ms": Figure("ms", "lower"),
            "failover_confirmed_lost": Figure("messages", "lower"),
        }

    def rate(self, target: TargetResult, ctx: BenchContext, delivery: Delivery) -> float:
        if ctx.workload.rate is not None:
            return ctx.workload.rate
        measured = target.figures.get(f"throughput_{delivery}")
        if measured is None:
            raise BrokerError(target.url.display, "failover needs --rate or a throughput stage")
        return measured / 2

    async def measure(self, target: TargetResult, ctx: BenchContext) -> dict[str, Any]:
        w = ctx.workload
        if target.master_url is None or target.kill_command is None:
            raise BrokerError(target.url.display, "failover needs a master URL and a kill command")
        delivery = w.deliveries[0]
        rate = self.rate(target, ctx, delivery)
        count = max(1, round(rate * (w.failover_before + w.failover_after)))
        await _declare_through_master(target, ctx)
        conn = await LeanConnection.open(target.url, w.timeout)
        try:
            target.server = _server_info(conn.server_properties)
            frames = conn.numbered_publish_frames(w.queue, w.size, delivery == "persistent")
            run = conn.begin_run(count, None)
            kill: dict[str, Any] = {}
            start = time.perf_counter()
            killer: asyncio.Task[None] | None = None
            try:
                while run.published < count:
                    now = time.perf_counter()
                    if killer is None and now - start >= w.failover_before:
                        ctx.log(f"{target.url.display}: failover: running {target.kill_command!r}")
                        killer = asyncio.create_task(_run_kill(target.kill_command, kill))
                    due = min(count, int((now - start) * rate) + 1)
                    conn.publish_numbered(frames, due - run.published)
                    next_at = start + run.published / rate
                    await asyncio.sleep(max(0.0, next_at - time.perf_counter()))
                assert killer is not None
                await killer
                try:
                    await conn.wait_run(w.timeout)
                except BrokerError:
                    if run.confirmed + run.nacked < run.count:
                        raise
                    # Only nacks: counted below, not fatal here.
            finally:
                conn.end_run()
            if kill["returncode"] != 0:
                raise BrokerError(
                    target.url.display,
                    f"kill command exited {kill['returncode']}: {kill['output']!r}",
                )
            acked = {run.first_tag + i for i in run.acked_indices()}
            queue_count, numbers = await conn.drain(w.queue, idle=1.0)
            await conn.call(commands.Queue.Delete(queue=w.queue), commands.Queue.DeleteOk)
        finally:
            await conn.close()
        gaps = confirm_gaps(run.ack_times, kill["done_at"])
        present = set(numbers)
        lost = acked - present
        gap_ms = round(gaps.longest * 1000, 1)
        first_ms = (
            None
            if gaps.kill_to_first_confirm is None
            else round(gaps.kill_to_first_confirm * 1000, 1)
        )
        target.figures["failover_gap_ms"] = gap_ms
        if first_ms is not None:
            target.figures["failover_kill_to_confirm_ms"] = first_ms
        target.figures["failover_confirmed_lost"] = len(lost)
        ctx.log(
            f"{target.url.display}: failover {delivery} at {rate:.0f} msg/s: longest confirm "
            f"gap {gap_ms} ms, kill to first confirm {first_ms} ms, "
            f"{len(lost)} of {len(acked)} confirmed messages lost"
        )
        return {
            "delivery": delivery,
            "rate_msgs_per_s": round(rate, 1),
            "master_url": target.master_url.display,
            "kill_command": target.kill_command,
            "kill_command_ms": round((kill["done_at"] - kill["started_at"]) * 1000, 1),
            "kill_at_s": round(kill["done_at"] - start, 3),
            "longest_gap_before_kill_ms": round(gaps.longest_before_kill * 1000, 1),
            "published": run.published,
            "confirmed": run.confirmed,
            "nacked": run.nacked,
            "queue_count_after": queue_count,
            "drained": len(numbers),
            "drained_distinct": len(present),
            "drained_unconfirmed": len(present - acked),
            "lost_examples": sorted(lost)[:10],
        }


async def _run_kill(command: str, into: dict[str, Any]) -> None:
    """Run the kill command through the shell; its end is when the kill happened."""
    into["started_at"] = time.perf_counter()
    process = await asyncio.create_subprocess_shell(
        command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    into["done_at"] = time.perf_counter()
    into["returncode"] = process.returncode
    into["output"] = output.decode(errors="replace")[-500:]


# Stages run in this order; a stage may use the figures of the ones before it.
STAGES: dict[str, Stage] = {
    stage.name: stage for stage in (ThroughputStage(), LatencyStage(), FailoverStage())
}
DEFAULT_STAGES = ("throughput", "latency")


def _server_info(properties: Mapping[str, Any]) -> dict[str, str]:
    def text(value: Any) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    return {key: text(properties[key]) for key in ("product", "version") if key in properties}


def _client_info() -> dict[str, str]:
    return {
        "name": CLIENT_NAME,
        "library": f"pamqp {metadata.version('pamqp')} over asyncio",
        "python": platform.python_version(),
    }


async def run_bench(
    urls: Sequence[AmqpUrl],
    workload: Workload,
    stages: Sequence[Stage] = (STAGES["throughput"], STAGES["latency"]),
    log: Callable[[str], None] = lambda line: None,
    masters: Sequence[AmqpUrl | None] = (),
    kill_commands: Sequence[str | None] = (),
) -> dict[str, Any]:
    """Measure every URL with every stage; the report that `bench` prints as JSON.
    masters and kill_commands, when given, pair with urls by position."""
    results = [
        TargetResult(
            url,
            master_url=masters[i] if i < len(masters) else None,
            kill_command=kill_commands[i] if i < len(kill_commands) else None,
        )
        for i, url in enumerate(urls)
    ]
    ctx = BenchContext(workload, results, log)
    for stage in stages:
        for target in results:
            target.details[stage.name] = await stage.measure(target, ctx)
    figures: dict[str, Figure] = {}
    for stage in stages:
        figures.update(stage.figures(workload))
    report_results: list[dict[str, Any]] = []
    for i, target in enumerate(results):
        entry: dict[str, Any] = {
            "url": target.url.display,
            "master_url": None if target.master_url is None else target.master_url.display,
            "server": target.server,
            "figures": target.figures,
            "details": target.details,
        }
        if i:
            entry["ratio_vs_first"] = ratios(results[0].figures, target.figures)
        report_results.append(entry)
    return {
        "client": _client_info(),
        "workload": workload.as_json(),
        "stages": [stage.name for stage in stages],
        "figures": {name: {"unit": f.unit, "better": f.better} for name, f in figures.items()},
        "results": report_results,
    }


def run(
    urls: Sequence[AmqpUrl],
    workload: Workload,
    json_out: str | None,
    stages: Sequence[str] = DEFAULT_STAGES,
    masters: Sequence[AmqpUrl | None] = (),
    kill_commands: Sequence[str | None] = (),
) -> int:
    """Entry point of `mirrorchaos bench`: JSON on stdout, progress and errors on stderr."""

    def log(line: str) -> None:
        print(f"bench: {line}", file=sys.stderr, flush=True)

    # Registry order, whatever order they were asked for in.
    chosen = [stage for name, stage in STAGES.items() if name in stages]
    try:
        report = asyncio.run(
            run_bench(urls, workload, chosen, log, masters=masters, kill_commands=kill_commands)
        )
    except BrokerError as err:
        print(f"mirrorchaos bench: {err}", file=sys.stderr)
        return 1
    text = json.dumps(report, indent=2)
    print(text)
    if json_out is not None:
        try:
            with open(json_out, "w", encoding="utf-8") as out:
                out.write(text + "\n")
        except OSError as err:
            print(f"mirrorchaos bench: cannot write {json_out}: {err.strerror}", file=sys.stderr)
            return 1
    return 0
