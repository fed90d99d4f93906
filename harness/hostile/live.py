"""Hostile inputs sent to a running node over real sockets, one connection each, while
a well-behaved aio-pika client publishes with confirms and consumes on its own.

A connection sends its handshake prefix and waits for the broker's answer to it, then
sends the hostile bytes. Then, by the ending its input must get: for a
connection.close it reads until the close and answers close-ok; for our protocol
header or a refused login it reads until the broker hangs up; otherwise it half-closes
(the broker must take the end of input as the end of the connection) and reads the
rest. Its socket closes then: the broker never waits on it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import aio_pika
from pamqp import commands

from harness.hostile import wire
from harness.hostile.context import STAGE_REPLIES
from harness.hostile.expect import CLOSE, HANG_UP, HEADER, HostileInput
from harness.hostile.judge import Answer, judge

# Seconds a connection may wait for the broker's next octet: far beyond any answer, a
# bound only on a broker that hangs (its close timeout is 3 s, its handshake's 10 s).
SILENCE = 60.0


@dataclass
class LiveResult:
    hostile: HostileInput
    answer: Answer
    closed: bool  # the broker hung up before the client did
    problems: list[str]


async def _read_until(reader: asyncio.StreamReader, answer: Answer,
                      done: Callable[[], object]) -> bool:
    """Read until ``done()``; True when the broker closed the socket first."""
    while not done():
        try:
            async with asyncio.timeout(SILENCE):
                data = await reader.read(65536)
        except ConnectionError:
            data = b""
        if not data:
            return True
        answer.feed(data)
    return False


async def _write(writer: asyncio.StreamWriter, data: bytes) -> None:
    """Write what the broker will take: it may close before it has read it all."""
    with contextlib.suppress(ConnectionError):
        writer.write(data)
        await writer.drain()


async def run_connection(host: str, port: int, hostile: HostileInput) -> LiveResult:
    answer = Answer()
    closed = False
    problems: list[str] = []
    reader, writer = await asyncio.open_connection(host, port)
    try:
        if hostile.prefix:
            await _write(writer, hostile.prefix)
            last = STAGE_REPLIES[hostile.stage][-1]
            closed = await _read_until(reader, answer, lambda: (
                last in answer.replies or answer.closes or answer.header or answer.garbage))
        ending = hostile.expect.ending
        if not closed:
            await _write(writer, hostile.data)
            if ending == CLOSE:
                closed = await _read_until(reader, answer, lambda: (
                    answer.connection_close or answer.garbage))
                await _write(writer, wire.CONNECTION_CLOSE_OK)
            elif ending in (HEADER, HANG_UP):
                closed = await _read_until(reader, answer, lambda: answer.garbage)
            else:
                with contextlib.suppress(OSError):
                    writer.write_eof()
                await _read_until(reader, answer, lambda: answer.garbage)
    except TimeoutError:
        problems.append(f"the broker neither answered nor closed for {SILENCE:.0f} s")
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    problems += judge(hostile.expect, answer, closed, live=True)
    return LiveResult(hostile, answer, closed, problems)


async def run_many(host: str, port: int, inputs: list[HostileInput], concurrency: int,
                   progress: Callable[[], None] = lambda: None) -> list[LiveResult]:
    """Every input on its own connection, ``concurrency`` at a time."""
    limit = asyncio.Semaphore(concurrency)

    async def one(hostile: HostileInput) -> LiveResult:
        async with limit:
            result = await run_connection(host, port, hostile)
        progress()
        return result

    return await asyncio.gather(*(one(hostile) for hostile in inputs))


@dataclass
class PoliteReport:
    published: list[bytes] = field(default_factory=list)
    confirmed: int = 0
    delivered: list[bytes] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    # How many hostile connections had ended at each confirm.
    progress_at_confirm: list[int] = field(default_factory=list)

    def tenths_served(self, total: int) -> set[int]:
        """The tenths of the hostile run during which a publish was confirmed."""
        return {min(9, done * 10 // total) for done in self.progress_at_confirm}


async def polite_client(url: str, ready: asyncio.Event, stop: asyncio.Event,
                        progress: Callable[[], int], drain_timeout: float = SILENCE
                        ) -> PoliteReport:
    """Publish with confirms to an exclusive queue and consume it until ``stop``;
    then wait for every message published to come back. ``ready`` is set once it
    consumes (or has failed)."""
    report = PoliteReport()
    try:
        connection = await aio_pika.connect(url)
    except (aio_pika.exceptions.AMQPError, OSError) as error:
        report.problems.append(f"the well-behaved client could not connect: {error!r}")
        ready.set()
        return report
    try:
        await _serve(connection, report, ready, stop, progress, drain_timeout)
    except (aio_pika.exceptions.AMQPError, ConnectionError) as error:
        report.problems.append(f"the well-behaved client failed: {error!r}")
    finally:
        ready.set()
        await connection.close()
    return report


async def _serve(connection: aio_pika.abc.AbstractConnection, report: PoliteReport,
                 ready: asyncio.Event, stop: asyncio.Event, progress: Callable[[], int],
                 drain_timeout: float) -> None:
    everything = asyncio.Event()
    channel = await connection.channel(publisher_confirms=True)
    queue = await channel.declare_queue(exclusive=True)

    async def received(message: aio_pika.abc.AbstractIncomingMessage) -> None:
        report.delivered.append(message.body)
        if stop.is_set() and len(report.delivered) >= len(report.published):
            everything.set()

    await queue.consume(received, no_ack=True)
    ready.set()
    while not stop.is_set():
        body = f"polite-{len(report.published)}".encode()
        report.published.append(body)
        confirmation = await channel.default_exchange.publish(
            aio_pika.Message(body), routing_key=queue.name)
        if isinstance(confirmation, commands.Basic.Ack):
            report.confirmed += 1
            report.progress_at_confirm.append(progress())
        else:
            report.problems.append(f"publish {body!r} answered {confirmation!r}")
    if len(report.delivered) < len(report.published):
        try:
            async with asyncio.timeout(drain_timeout):
                await everything.wait()
        except TimeoutError:
            report.problems.append(
                f"{len(report.delivered)} of {len(report.published)} messages came back")
    if report.delivered != report.published:
        report.problems.append("the messages came back changed or out of order")


_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception", "The above exception was the direct")


def tracebacks(log: str) -> Counter[str]:
    """The tracebacks in a node's log, counted by their (last) exception line; a chain of
    exceptions counts once."""
    records: list[str] = []
    lines = log.splitlines()
    for number, line in enumerate(lines):
        if line.strip() != _TRACEBACK:
            continue
        after = (text for text in lines[number + 1:] if text and not text.startswith(" "))
        exception = next(after, "(truncated)")
        before = [text for text in lines[max(0, number - 3) : number] if text.strip()]
        if records and before and before[-1].startswith(_CHAINED):
            records[-1] = exception
        else:
            records.append(exception)
    return Counter(records)


async def campaign(host: str, port: int, inputs: list[HostileInput], concurrency: int,
                   url: str) -> tuple[list[LiveResult], PoliteReport]:
    """The hostile connections and, beside them throughout, the well-behaved client."""
    done = 0
    ready, stop = asyncio.Event(), asyncio.Event()

    def one_more() -> None:
        nonlocal done
        done += 1

    polite = asyncio.create_task(polite_client(url, ready, stop, lambda: done))
    await ready.wait()
    try:
        results = await run_many(host, port, inputs, concurrency, one_more)
    finally:
        stop.set()
    return results, await polite
