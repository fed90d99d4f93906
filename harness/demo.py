"""`mirrorchaos demo`: one node of ours, a real confirming publisher and acking consumer.

The node runs as `python -m cluster.node` on free loopback ports with a temporary
data directory. It counts as ready only when an AMQP handshake succeeds; its
stderr goes to `node.log` in the data directory, whose tail is shown when it fails
to start. The node is stopped (SIGTERM, then SIGKILL) however the demo ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aio_pika
from aio_pika.abc import AbstractConnection, AbstractIncomingMessage
from aio_pika.exceptions import AMQPError, ChannelInvalidStateError, DeliveryError
from rich.console import Console
from rich.table import Table

from harness.bench import percentile

QUEUE = "demo"
PRODUCER = "p1"
LOG_TAIL_LINES = 40
# Connection-level failures a real client raises; anything else is a bug of ours.
CLIENT_ERRORS = (AMQPError, ChannelInvalidStateError, OSError, TimeoutError)


class DemoError(Exception):
    """The demo could not run; the message says what and, for the node, its log tail."""


@dataclass(frozen=True)
class DemoOptions:
    messages: int = 5000
    window: int = 100  # unconfirmed publishes in flight
    prefetch: int = 50
    start_timeout: float = 30.0
    drain_timeout: float = 10.0  # longest wait for the next delivery once publishing ends
    stop_timeout: float = 10.0  # SIGTERM grace before SIGKILL
    keep_data: bool = False


def free_port() -> int:
    """A loopback port nobody listens on now (the node binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as err:
        return f"(no log: {err.strerror})"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"


class LocalNode:
    """One `cluster.node` process on loopback, owned by this object."""

    def __init__(self, name: str, data_dir: Path) -> None:
        self.name = name
        self.data_dir = data_dir
        self.amqp_port = free_port()
        self.mgmt_port = free_port()
        self.log_path = data_dir / "node.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def amqp_url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.amqp_port}/"

    @property
    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "cluster.node",
            "--name", self.name,
            "--amqp-port", str(self.amqp_port),
            "--mgmt-port", str(self.mgmt_port),
            "--data-dir", str(self.data_dir / "node"),
            "--host", "127.0.0.1",
        ]  # fmt: skip

    def start(self) -> None:
        with self.log_path.open("wb") as log:
            # A session of its own: a Ctrl-C on the terminal reaches the demo, which
            # then stops the node itself, in order.
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    async def wait_ready(self, timeout: float) -> None:
        """Poll with a real AMQP handshake until it succeeds, the node dies or time is up."""
        # aiormq logs every refused probe as an error; refusals are expected here.
        client_log = logging.getLogger("aiormq")
        level = client_log.level
        client_log.setLevel(logging.CRITICAL)
        try:
            await self._probe_until_ready(timeout)
        finally:
            client_log.setLevel(level)

    async def _probe_until_ready(self, timeout: float) -> None:
        assert self.process is not None
        deadline = time.monotonic() + timeout
        last_error = "no attempt"
        while True:
            code = self.process.poll()
            if code is not None:
                raise self._start_error(f"exited with code {code} during start-up")
            try:
                connection = await aio_pika.connect(self.amqp_url, timeout=2)
            except CLIENT_ERRORS as err:
                last_error = str(err) or type(err).__name__
            else:
                await connection.close()
                return
            if time.monotonic() >= deadline:
                raise self._start_error(f"not ready within {timeout:g}s (last probe: {last_error})")
            await asyncio.sleep(0.2)

    def _start_error(self, what: str) -> DemoError:
        return DemoError(
            f"node {self.name} {what}; last lines of {self.log_path}:\n{log_tail(self.log_path)}"
        )

    def stop(self, timeout: float) -> int | None:
        """SIGTERM, SIGKILL after `timeout`; returns the exit code (None if never started)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                # The whole process group (the node's own session), while the node is
                # not yet reaped and its pid cannot have been reused.
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return self.process.returncode


@dataclass
class DemoResult:
    published: int = 0
    confirmed: set[str] = field(default_factory=set)
    nacked: int = 0
    unconfirmed: int = 0  # outcome unknown: the confirm timed out
    deliveries: Counter[str] = field(default_factory=Counter)
    confirm_latencies: list[float] = field(default_factory=list)
    publish_seconds: float = 0.0

    @property
    def duplicates(self) -> int:
        return sum(n - 1 for n in self.deliveries.values() if n > 1)

    @property
    def lost(self) -> int:
        return len(self.confirmed - self.deliveries.keys())

    @property
    def unexpected(self) -> int:
        """Delivered bodies this run never published."""
        expected = {f"{PRODUCER}-{seq}" for seq in range(1, self.published + 1)}
        return len(self.deliveries.keys() - expected)

    @property
    def ok(self) -> bool:
        """Every confirmed message delivered exactly once (and something was confirmed)."""
        return bool(self.confirmed) and not (self.lost or self.duplicates or self.unexpected)


async def run_workload(url: str, options: DemoOptions) -> DemoResult:
    """Publish `options.messages` unique messages with confirms; consume them with acks."""
    result = DemoResult()
    tasks: list[asyncio.Task[None]] = []
    connections: list[AbstractConnection] = []
    try:
        publisher = await aio_pika.connect(url, timeout=options.start_timeout)
        connections.append(publisher)
        consumer = await aio_pika.connect(url, timeout=options.start_timeout)
        connections.append(consumer)
        in_channel = await consumer.channel()
        await in_channel.set_qos(prefetch_count=options.prefetch)
        queue = await in_channel.declare_queue(QUEUE, durable=True)
        last_delivery = time.monotonic()

        async def on_message(message: AbstractIncomingMessage) -> None:
            nonlocal last_delivery
            result.deliveries[message.body.decode(errors="replace")] += 1
            last_delivery = time.monotonic()
            await message.ack()

        await queue.consume(on_message, no_ack=False)

        out_channel = await publisher.channel(publisher_confirms=True)
        window = asyncio.Semaphore(options.window)

        async def publish(body: str) -> None:
            sent = time.perf_counter()
            try:
                await out_channel.default_exchange.publish(
                    aio_pika.Message(body.encode(), delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
                    routing_key=QUEUE,
                    timeout=options.drain_timeout,
                )
            except DeliveryError:
                result.nacked += 1
            except TimeoutError:
                result.unconfirmed += 1
            else:
                result.confirmed.add(body)
                result.confirm_latencies.append(time.perf_counter() - sent)
            finally:
                window.release()

        started = time.perf_counter()
        for seq in range(1, options.messages + 1):
            await window.acquire()  # in sequence order, so publish order is seq order
            tasks.append(asyncio.create_task(publish(f"{PRODUCER}-{seq}")))
            result.published += 1
        await asyncio.gather(*tasks)
        result.publish_seconds = time.perf_counter() - started

        # Drain: until every confirmed message came, or deliveries stopped coming
        # (counted from the end of publishing at the earliest).
        last_delivery = time.monotonic()
        while result.confirmed - result.deliveries.keys():
            if time.monotonic() - last_delivery > options.drain_timeout:
                break
            await asyncio.sleep(0.05)
    finally:
        for task in tasks:
            task.cancel()  # after a failure, so no publish outlives its connection
        for connection in connections:
            with contextlib.suppress(*CLIENT_ERRORS):
                await connection.close()
    return result


def summary_table(result: DemoResult) -> Table:
    table = Table(title="mirrorchaos demo: one node, confirming publisher, acking consumer")
    table.add_column("figure")
    table.add_column("value", justify="right")
    confirmed = len(result.confirmed)
    rows = [
        ("published", str(result.published)),
        ("confirmed", str(confirmed)),
        ("nacked", str(result.nacked)),
        ("unconfirmed (timed out)", str(result.unconfirmed)),
        ("delivered (unique)", str(len(result.deliveries))),
        ("duplicates", str(result.duplicates)),
        ("unexpected", str(result.unexpected)),
        ("lost (confirmed, never delivered)", str(result.lost)),
    ]
    if result.publish_seconds > 0:
        rows.append(("throughput", f"{confirmed / result.publish_seconds:.0f} msg/s"))
    if result.confirm_latencies:
        ms = [s * 1000 for s in result.confirm_latencies]
        rows.append(("confirm latency p50", f"{percentile(ms, 50):.2f} ms"))
        rows.append(("confirm latency p99", f"{percentile(ms, 99):.2f} ms"))
    for name, value in rows:
        table.add_row(name, value)
    return table


def run(options: DemoOptions) -> int:
    """Entry point of `mirrorchaos demo`: 0 if every confirmed message came exactly once."""
    data_dir = Path(tempfile.mkdtemp(prefix="mirrorchaos-demo-"))
    code = 1
    try:
        code = _run_node_and_workload(data_dir, options)
    finally:
        # A failed or interrupted run keeps its node's data and log for a post-mortem.
        if code == 0 and not options.keep_data:
            shutil.rmtree(data_dir, ignore_errors=True)
        else:
            Console(stderr=True).print(f"node data and log kept in {data_dir}", highlight=False)
    return code


def _run_node_and_workload(data_dir: Path, options: DemoOptions) -> int:
    console = Console()
    errors = Console(stderr=True, highlight=False)
    node = LocalNode("demo", data_dir)
    errors.print(f"starting node demo: amqp 127.0.0.1:{node.amqp_port}, data in {data_dir}")
    try:
        node.start()
        asyncio.run(node.wait_ready(options.start_timeout))
        errors.print(f"node ready; publishing {options.messages} messages")
        result = asyncio.run(run_workload(node.amqp_url, options))
    except DemoError as err:
        errors.print(f"mirrorchaos demo: {err}", style="red", markup=False)
        return 1
    except CLIENT_ERRORS as err:
        errors.print(f"mirrorchaos demo: workload failed: {err!r}", style="red", markup=False)
        errors.print(f"last lines of {node.log_path}:\n{log_tail(node.log_path)}", markup=False)
        return 1
    finally:
        errors.print(f"node demo stopped (exit code {node.stop(options.stop_timeout)})")
    console.print(summary_table(result))
    if result.ok:
        console.print("[green]OK[/green]: every confirmed message was delivered exactly once")
        return 0
    console.print(
        f"[red]FAILED[/red]: {result.lost} lost, {result.duplicates} duplicated, "
        f"{result.unexpected} unexpected"
    )
    return 1
