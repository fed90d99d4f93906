"""Floods by greedy clients, and the broker's resident memory under each.

Every flood comes from clients that write and never read their sockets, the way a
hostile or stuck client would:

* ``bodies``: several connections each announce one large message and send all of
  its body but the last frame, so the broker holds bodies that are not in any queue;
* ``returns``: one connection publishes mandatory messages to a routing key that no
  queue is bound to, so every publish asks for a ``basic.return`` it never reads;
* ``deliveries``: a queue is filled first, then a consumer with no prefetch limit
  takes it without reading.

While a flood runs, the broker's resident set size is read from ``/proc/PID/status``
every ``SAMPLE_INTERVAL`` seconds. A flood ends after its time or when the broker has
closed every flooding connection. The figures are what ``scripts/flood-report``
prints for our node and RabbitMQ side by side, and what the memory tests bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pamqp import commands, frame, header
from pamqp.body import ContentBody

from harness.bench.client import LeanConnection
from harness.bench.url import AmqpUrl

SAMPLE_INTERVAL = 0.1
# What a flooding client lets pile up in its own send buffer before waiting: the
# broker's reading, not our buffer, sets the pace.
CLIENT_BUFFER = 256 * 1024
CONNECT_TIMEOUT = 10.0
FLOOD_QUEUE = "mirrorchaos-flood"


@dataclass(frozen=True)
class FloodSpec:
    seconds: float = 10.0
    connections: int = 5  # bodies
    body_size: int = 40 * 1024 * 1024  # bodies: what each connection announces
    return_size: int = 64 * 1024  # returns: each unroutable message
    prefill: int = 48 * 1024 * 1024  # deliveries: bytes in the queue before consuming
    message_size: int = 64 * 1024  # deliveries: each message


@dataclass
class FloodResult:
    flood: str
    baseline_rss: int  # bytes, before the flood's clients connect
    samples: list[tuple[float, int]] = field(default_factory=list)  # (seconds, RSS)
    sent: int = 0  # bytes the broker took from the flooding clients
    dropped_after: float | None = None  # seconds until the broker closed every flooder
    refusal: str = ""  # how the broker closed them, when it did

    @property
    def peak_rss(self) -> int:
        return max((rss for _, rss in self.samples), default=self.baseline_rss)

    @property
    def growth(self) -> int:
        return self.peak_rss - self.baseline_rss

    def as_json(self) -> dict[str, Any]:
        return {
            "flood": self.flood, "baseline_rss": self.baseline_rss,
            "peak_rss": self.peak_rss, "growth": self.growth, "sent": self.sent,
            "dropped_after_s": self.dropped_after, "refusal": self.refusal,
            "samples": self.samples,
        }


def resident_bytes(pid: int) -> int:
    """The process's resident set size now."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"/proc/{pid}/status has no VmRSS line")


class _Flooder:
    """One flooding connection: writes while the broker takes its bytes."""

    def __init__(self, connection: LeanConnection) -> None:
        self.connection = connection
        self.sent = 0

    async def write(self, data: bytes, until: float) -> bool:
        """Write ``data`` once the broker has taken what is buffered; False if the time
        ran out or the broker closed the connection first."""
        connection = self.connection
        while connection.buffered() >= CLIENT_BUFFER:
            if connection.closed or time.monotonic() >= until:
                return False
            await asyncio.sleep(0.01)
        if connection.closed:
            return False
        connection.write(data)
        self.sent += len(data)
        return True


async def _open(url: AmqpUrl) -> _Flooder:
    connection = await LeanConnection.open(url, CONNECT_TIMEOUT)
    return _Flooder(connection)


def _announce(routing_key: str, size: int) -> bytes:
    """A publish and the header of a ``size``-byte body, to be followed by its frames."""
    return (frame.marshal(commands.Basic.Publish(exchange="", routing_key=routing_key),
                          LeanConnection.CHANNEL)
            + frame.marshal(header.ContentHeader(0, size, commands.Basic.Properties()),
                            LeanConnection.CHANNEL))


def _body_frames(connection: LeanConnection, size: int) -> tuple[bytes, int]:
    """One full body frame for ``connection`` and how many of them make ``size`` bytes."""
    chunk = connection.frame_max - 8
    return frame.marshal(ContentBody(b"b" * chunk), LeanConnection.CHANNEL), size // chunk


async def _bodies(url: AmqpUrl, spec: FloodSpec, until: float) -> list[_Flooder]:
    flooders = [await _open(url) for _ in range(spec.connections)]

    async def announce_and_hold(flooder: _Flooder) -> None:
        body_frame, count = _body_frames(flooder.connection, spec.body_size)
        flooder.connection.stop_reading()
        if not await flooder.write(_announce(FLOOD_QUEUE, spec.body_size), until):
            return
        for _ in range(count - 1):  # the last frame never comes
            if not await flooder.write(body_frame, until):
                return

    await asyncio.gather(*(announce_and_hold(flooder) for flooder in flooders))
    return flooders


async def _returns(url: AmqpUrl, spec: FloodSpec, until: float) -> list[_Flooder]:
    flooder = await _open(url)
    connection = flooder.connection
    message = connection.publish_frames("mirrorchaos-flood-unroutable",
                                        b"r" * spec.return_size, False, mandatory=True)
    connection.stop_reading()
    while await flooder.write(message, until):
        pass
    return [flooder]


async def _deliveries(url: AmqpUrl, spec: FloodSpec, until: float) -> list[_Flooder]:
    flooder = await _open(url)
    connection = flooder.connection
    await connection.call(commands.Basic.Consume(queue=FLOOD_QUEUE, consumer_tag="flood"),
                          commands.Basic.ConsumeOk)
    connection.stop_reading()
    while not connection.closed and time.monotonic() < until:
        await asyncio.sleep(SAMPLE_INTERVAL)
    return [flooder]


async def _fill_queue(url: AmqpUrl, spec: FloodSpec) -> None:
    """The deliveries flood's queue, holding ``spec.prefill`` bytes, every message
    confirmed before the flood starts."""
    connection = await LeanConnection.open(url, CONNECT_TIMEOUT)
    try:
        count = spec.prefill // spec.message_size
        frames = connection.publish_frames(FLOOD_QUEUE, b"d" * spec.message_size, False)
        connection.begin_run(count, None)
        connection.publish(frames, count)
        await connection.wait_run(30.0)
        connection.end_run()
    finally:
        await connection.close()


async def _declare_queue(url: AmqpUrl) -> None:
    connection = await LeanConnection.open(url, CONNECT_TIMEOUT)
    try:
        await connection.call(commands.Queue.Declare(queue=FLOOD_QUEUE),
                              commands.Queue.DeclareOk)
    finally:
        await connection.close()


FLOODS: dict[str, Callable[[AmqpUrl, FloodSpec, float], Awaitable[list[_Flooder]]]] = {
    "bodies": _bodies, "returns": _returns, "deliveries": _deliveries,
}


async def run_flood(url: AmqpUrl, pid: int, flood: str, spec: FloodSpec) -> FloodResult:
    """Run one flood against the broker at ``url`` whose process is ``pid``. The flood
    queue is declared (and filled, for ``deliveries``) first; it is left behind."""
    if flood not in FLOODS:
        raise ValueError(f"unknown flood {flood!r} (expected one of {', '.join(FLOODS)})")
    await _declare_queue(url)
    if flood == "deliveries":
        await _fill_queue(url, spec)
    result = FloodResult(flood, resident_bytes(pid))
    started = time.monotonic()
    until = started + spec.seconds
    flooders: list[_Flooder] = []

    async def sample() -> None:
        while True:
            result.samples.append((round(time.monotonic() - started, 2), resident_bytes(pid)))
            await asyncio.sleep(SAMPLE_INTERVAL)

    sampler = asyncio.create_task(sample())
    try:
        flooders = await FLOODS[flood](url, spec, until)
        while time.monotonic() < until:
            if all(f.connection.closed for f in flooders):
                result.dropped_after = round(time.monotonic() - started, 2)
                break
            await asyncio.sleep(SAMPLE_INTERVAL)
        await asyncio.sleep(2 * SAMPLE_INTERVAL)  # the memory freed after a drop
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        for flooder in flooders:
            flooder.connection.abort()
    result.sent = sum(f.sent for f in flooders)
    refusals = {f.connection.error_text for f in flooders if f.connection.closed}
    result.refusal = "; ".join(sorted(text for text in refusals if text))
    return result

