"""`mirrorchaos demo`: one node of ours, a real confirming publisher and acking consumer.

The node runs as a `NodeProcess` on free loopback ports with a temporary data
directory; a node that fails to start is reported with its log tail. The node is
stopped (SIGTERM, then SIGKILL) however the demo ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
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

from faults.process.node import NodeProcess, NodeStartError
from harness.bench.stats import percentile

QUEUE = "demo"
PRODUCER = "p1"
# Connection-level failures a real client raises; anything else is a bug of ours.
CLIENT_ERRORS = (AMQPError, ChannelInvalidStateError, OSError, TimeoutError)


@dataclass(frozen=True)
class DemoOptions:
    messages: int = 5000
    window: int = 100  # unconfirmed publishes in flight
    prefetch: int = 50
    start_timeout: float = 30.0
    drain_timeout: float = 10.0  # longest wait for the next delivery once publishing ends
    keep_data: bool = False


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
    node = NodeProcess("demo", data_dir / "node")
    errors.print(f"starting node demo: amqp 127.0.0.1:{node.amqp_port}, data in {data_dir}")
    try:
        node.start(options.start_timeout)
        errors.print(f"node ready; publishing {options.messages} messages")
        result = asyncio.run(run_workload(node.amqp_url, options))
    except NodeStartError as err:
        errors.print(f"mirrorchaos demo: {err}", style="red", markup=False)
        return 1
    except CLIENT_ERRORS as err:
        errors.print(f"mirrorchaos demo: workload failed: {err!r}", style="red", markup=False)
        errors.print(f"last lines of {node.log_path}:\n{node.log_tail()}", markup=False)
        return 1
    finally:
        errors.print(f"node demo stopped (exit code {node.stop()})")
    console.print(summary_table(result))
    if result.ok:
        console.print("[green]OK[/green]: every confirmed message was delivered exactly once")
        return 0
    console.print(
        f"[red]FAILED[/red]: {result.lost} lost, {result.duplicates} duplicated, "
        f"{result.unexpected} unexpected"
    )
    return 1
