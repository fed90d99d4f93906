"""The bench's lean AMQP 0-9-1 client: one connection, one confirm-mode channel.

A general-purpose Python client costs more CPU per message than a Python broker
does, and on a small machine it would share cores with the broker and become what is
measured. So this one does little per message: publish frames are marshalled once and
written ``k`` at a time, and confirms are split off by the broker's own frame reader
and read by `decode_confirm` without building method objects (both in
`cluster.amqp.framing`, which marshals and decodes every other frame too, pamqp's
methods). `harness.flood`'s greedy clients use it as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import time
from collections.abc import Callable
from typing import Any

from pamqp import commands, header

from cluster.amqp.errors import ConnectionError_
from cluster.amqp.framing import (
    FRAME_BODY,
    FRAME_HEADER,
    FRAME_HEARTBEAT,
    FRAME_METHOD,
    FRAME_OVERHEAD,
    PROTOCOL_HEADER,
    FrameReader,
    content_frames,
    decode_confirm,
    decode_content_header,
    decode_method,
    method_frame,
)
from harness.bench.confirms import ConfirmRun
from harness.bench.url import AmqpUrl

CLIENT_NAME = "mirrorchaos-lean-amqp"
# The number at the start of a numbered publish's body (its delivery tag).
_NUMBER = struct.Struct(">Q")


class BrokerError(Exception):
    """The broker at `url` could not be reached or misbehaved; `url` has no password."""

    def __init__(self, url: str, message: str) -> None:
        super().__init__(f"{url}: {message}")
        self.url = url
        self.message = message


class ConnectionDropped(BrokerError):
    """The socket closed without an AMQP Connection.Close explaining why."""


class LeanConnection(asyncio.Protocol):
    """One AMQP connection with one confirm-mode channel, driven step by step."""

    CHANNEL = 1

    def __init__(self, url: AmqpUrl) -> None:
        self.url = url
        self.server_properties: dict[str, Any] = {}
        self.frame_max = 131072
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        # What came before the first frame: a broker that refuses AMQP 0-9-1 answers
        # with its own protocol header instead. None once frames are read.
        self._opening: bytearray | None = bytearray()
        self._reader = FrameReader(self.frame_max)
        self._waiter: tuple[type, asyncio.Future[Any]] | None = None
        self._error: BrokerError | None = None
        self._next_tag = 1
        self._run: ConfirmRun | None = None
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
            async with asyncio.timeout(timeout):
                await loop.create_connection(lambda: conn, url.host, url.port)
        except TimeoutError as err:
            raise conn._broker_error(f"no TCP connection within {timeout:g}s") from err
        except OSError as err:
            reason = err.strerror or str(err)
            raise conn._broker_error(f"cannot connect: {reason}") from err
        try:
            async with asyncio.timeout(timeout):
                await conn._handshake()
        except TimeoutError as err:
            conn.abort()
            raise conn._broker_error(f"no AMQP handshake within {timeout:g}s") from err
        except BrokerError:
            conn.abort()
            raise
        return conn

    async def _handshake(self) -> None:
        start = self._expect(commands.Connection.Start)
        self._write_raw(PROTOCOL_HEADER)
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
        self._reader.frame_max = self.frame_max
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
            async with asyncio.timeout(5):
                await self.call(commands.Connection.Close(200, "bench done", 0, 0),
                                commands.Connection.CloseOk, channel=0)
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
        self._write_raw(method_frame(channel, method))

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
        content = header.ContentHeader(0, len(body), properties).marshal()
        return b"".join(
            (
                method_frame(self.CHANNEL, publish),
                *content_frames(self.CHANNEL, content, body, self.frame_max),
            )
        )

    def numbered_publish_frames(
        self, queue: str, size: int, persistent: bool
    ) -> tuple[bytes, bytes]:
        """Frames of one publish whose body starts with an 8-byte number, split around
        that number: publish_numbered() puts each message's delivery tag there, so
        a drained queue says which confirmed messages it still holds."""
        size = max(size, _NUMBER.size)
        if size > self.frame_max - FRAME_OVERHEAD:
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

    def begin_run(self, count: int, on_confirm: Callable[[], None] | None) -> ConfirmRun:
        self._check()
        self._run = ConfirmRun(self._next_tag, count, self._loop)
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
                async with asyncio.timeout(stall_timeout):
                    await asyncio.shield(run.finished)
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
        if self._opening is not None:
            opening = self._opening
            opening += data
            if opening[:4] == b"AMQP":
                self._fail(
                    self._broker_error(f"broker rejected AMQP 0-9-1 (answered {opening[:8]!r})")
                )
                return
            if len(opening) < 4:
                return
            data, self._opening = bytes(opening), None
        reader, run, clock = self._reader, self._run, time.perf_counter
        reader.feed(data)
        confirmed = False
        while True:
            try:
                frames = reader.frames()
            except ConnectionError_:
                self._fail(self._broker_error("malformed frame from broker"))
                return
            if not frames:
                break
            for kind, channel, payload in frames:
                # Confirms are most of the traffic: read without building method objects.
                confirm = decode_confirm(payload) if kind == FRAME_METHOD else None
                if confirm is not None:
                    if run is not None:
                        tag, multiple, ack = confirm
                        run.settle(tag, multiple, ack, clock())
                    confirmed = True
                    continue
                try:
                    self._frame(kind, channel, payload)
                except ConnectionError_ as err:
                    self._fail(self._broker_error(f"undecodable frame from broker: {err}"))
                    return
        if confirmed and self._on_confirm is not None and self._error is None:
            self._on_confirm()

    def _frame(self, kind: int, channel: int, payload: bytes) -> None:
        """Act on one frame other than a publisher confirm."""
        if kind == FRAME_METHOD:
            self._dispatch(channel, decode_method(payload))
        elif kind == FRAME_HEADER:
            body_size = decode_content_header(payload).body_size
            if self._body is not None:
                self._body_size = body_size
                self._delivery_part(b"")
        elif kind == FRAME_BODY:
            if self._body is not None:
                self._delivery_part(payload)
        elif kind != FRAME_HEARTBEAT:
            raise ConnectionError_(0, f"unknown frame type {kind}")

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

