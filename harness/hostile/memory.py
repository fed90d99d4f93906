"""Hostile inputs fed to the broker's I/O-free connection in this process, as the node's
asyncio shell feeds socket reads (cluster/node.py): an exception escaping the broker is
what the shell would log as "internal error on connection" with a traceback.

A broker serves a batch of inputs, one connection each, beside a well-behaved client
that publishes with confirms and consumes throughout. After an input the client answers
a connection.close with close-ok, time passes the handshake and close timeouts, and the
client hangs up.
"""

from __future__ import annotations

import random
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from pamqp import commands, frame, header
from pamqp.body import ContentBody

from cluster.amqp import tablejson
from cluster.core.broker import BrokerConfig
from cluster.core.users import Permission
from cluster.session.broker import Broker
from cluster.session.connection import CLOSE_TIMEOUT, HANDSHAKE_TIMEOUT, Connection
from harness.hostile import wire
from harness.hostile.context import handshake
from harness.hostile.expect import HostileInput
from harness.hostile.inputs import Generator
from harness.hostile.judge import Answer, judge
from harness.hostile.tally import KEPT_FINDINGS, Finding, Tally, exception_line, outcome

BATCH = 500  # inputs per broker
POLITE_EVERY = 10  # hostile inputs between two of the well-behaved client's messages


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_broker(generator: Generator, clock: Clock) -> Broker:
    limits = generator.limits
    config = BrokerConfig(frame_max=limits.frame_max, channel_max=limits.channel_max,
                          max_message_size=limits.max_message_size)
    broker = Broker(config, clock=clock)
    broker.add_user("guest", "guest", ["administrator"])
    broker.set_permissions("guest", "/", Permission())
    return broker


def _pump(broker: Broker) -> None:
    """What the node's pump does after each input: the broker's own work, then the
    definitions save the input made due, encoded as the node's file would be."""
    broker.after_input()
    if broker.definitions_dirty:
        tablejson.dumps(broker.take_definitions())


def _take(broker: Broker, connection: Connection) -> bytes:
    broker.dirty.discard(connection)
    return connection.take_output()


class PoliteClient:
    """A well-behaved client on the same broker: publishes with confirms to its own
    exclusive queue and consumes what it publishes."""

    def __init__(self, broker: Broker, name: str) -> None:
        self.broker = broker
        self.connection = broker.open_connection("127.0.0.1:1")
        self.queue = name
        self.published: list[bytes] = []
        self.confirmed = 0
        self.delivered: list[bytes] = []
        self.problems: list[str] = []
        self._buffer = b""
        self._header: Any = None
        self._send(handshake("open", 0) + b"".join([
            wire.method(1, commands.Queue.Declare(queue=name, exclusive=True)),
            wire.method(1, commands.Confirm.Select()),
            wire.method(1, commands.Basic.Consume(queue=name, no_ack=True))]))

    def _send(self, data: bytes) -> None:
        self.connection.receive_data(data)
        _pump(self.broker)
        self.collect()

    def publish(self) -> None:
        body = f"polite-{len(self.published)}".encode()
        self.published.append(body)
        self._send(wire.publish(1, self.queue) + wire.content_header(1, len(body))
                   + wire.body(1, body))

    def collect(self) -> None:
        self._buffer += _take(self.broker, self.connection)
        while self._buffer:
            try:
                used, _, value = frame.unmarshal(self._buffer)
            except Exception:  # a partial frame: the rest comes later
                return
            self._buffer = self._buffer[used:]
            if isinstance(value, commands.Basic.Ack):
                self.confirmed = max(self.confirmed, value.delivery_tag)
            elif isinstance(value, commands.Basic.Nack):
                self.problems.append(f"nack for message {value.delivery_tag}")
            elif isinstance(value, commands.Connection.Close | commands.Channel.Close):
                self.problems.append(f"closed: {value.reply_code} {value.reply_text}")
            elif isinstance(value, header.ContentHeader) and value.body_size == 0:
                self.delivered.append(b"")
            elif isinstance(value, ContentBody):
                self.delivered.append(value.value)

    def finish(self, tally: Tally) -> None:
        self.collect()
        if self.confirmed != len(self.published):
            self.problems.append(f"{self.confirmed} confirms for {len(self.published)}")
        if self.delivered != self.published:
            self.problems.append(f"delivered {len(self.delivered)} of {len(self.published)}")
        tally.polite_published += len(self.published)
        tally.polite_confirmed += self.confirmed
        tally.polite_delivered += len(self.delivered)
        tally.polite_problems += self.problems
        self.connection.connection_lost()


def _chunks(hostile: HostileInput) -> list[bytes]:
    """How the hostile bytes arrive: whole, in a few reads, or octet by octet."""
    data = hostile.data
    rng = random.Random(f"chunks:{hostile.seed}:{hostile.index}")
    roll = rng.random()
    if roll < 0.6 or len(data) < 2:
        return [data]
    if roll < 0.9 or len(data) > 300:
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 6))))
        return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    return [data[i : i + 1] for i in range(len(data))]


class MemoryRun:
    """Runs a generator's inputs ``start``..``stop`` on in-memory brokers; ``kind``
    makes every input one of that class."""

    def __init__(self, generator: Generator, batch: int = BATCH, kind: str | None = None
                 ) -> None:
        self.generator = generator
        self.batch = batch
        self.kind = kind

    def run(self, start: int, stop: int) -> Tally:
        tally = Tally()
        index = start
        while index < stop:
            index = self._batch(index, min(stop, index + self.batch), tally)
        return tally

    def _batch(self, start: int, stop: int, tally: Tally) -> int:
        """Inputs from ``start`` on one broker, until ``stop`` or a traceback (a broker
        whose state an exception left half-changed serves no more inputs)."""
        clock = Clock()
        broker = make_broker(self.generator, clock)
        polite = PoliteClient(broker, f"polite-{self.generator.seed}-{start}")
        index = start
        while index < stop:
            hostile = self.generator.input(index, self.kind)
            index += 1
            began = time.process_time()  # CPU time: other processes' load does not count
            fed = feed(broker, clock, hostile)
            spent = time.process_time() - began
            if spent > tally.slowest.get(hostile.kind, (0.0, 0))[0]:
                tally.slowest[hostile.kind] = (spent, hostile.index)
            tally.inputs += 1
            tally.by_class[hostile.kind] += 1
            tally.by_outcome[outcome(fed.answer, fed.closed)] += 1
            if fed.problems:
                tally.problems += 1
                if len(tally.findings) < KEPT_FINDINGS:
                    tally.findings.append(Finding(hostile, fed.problems, fed.failure))
            if fed.failure:
                tally.tracebacks[exception_line(fed.failure)] += 1
                break
            if index % POLITE_EVERY == 0:
                polite.publish()
            polite.collect()
        polite.finish(tally)
        return index


@dataclass
class Fed:
    """One input's result: what the broker answered, whether it ended the connection
    by itself, what was wrong, and the traceback of an exception that escaped it."""

    answer: Answer
    closed: bool = False
    problems: list[str] = field(default_factory=list)
    failure: str = ""


def feed(broker: Broker, clock: Clock, hostile: HostileInput) -> Fed:
    """Feed one input on a new connection, then the client's epilogue."""
    connection = broker.open_connection("127.0.0.1:2")
    fed = Fed(Answer())
    answer = fed.answer
    step = "receive_data"
    try:
        for chunk in ([hostile.prefix] if hostile.prefix else []) + _chunks(hostile):
            if connection.should_close or connection.reading_paused:
                break  # the shell reads no more
            connection.receive_data(chunk)
            _pump(broker)
            answer.feed(_take(broker, connection))
        fed.closed = connection.should_close
        if answer.connection_close is not None and not fed.closed:
            step = "close-ok"
            connection.receive_data(wire.CONNECTION_CLOSE_OK)
            _pump(broker)
        step = "tick"
        clock.now += HANDSHAKE_TIMEOUT + CLOSE_TIMEOUT + 1
        broker.tick()
        answer.feed(_take(broker, connection))
        fed.problems = judge(hostile.expect, answer, fed.closed)
        if answer.connection_close is not None and not connection.should_close:
            fed.problems.append("the connection is still open after its close timed out")
        step = "connection_lost"
        connection.connection_lost()
        _pump(broker)
    except Exception:
        fed.problems.append(f"an exception escaped the broker in {step}")
        fed.failure = traceback.format_exc()
    return fed
