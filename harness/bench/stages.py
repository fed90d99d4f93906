"""The bench's workload and its stages: what is measured, and how.

Each broker URL is measured in turn by a series of stages, a small registry
(`STAGES`) to which failover and cluster figures are added as further stages. A
stage turns one target into flat, named figures (`Figure` says each one's unit and
which way is better) and returns the details kept in the report under its name.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pamqp import commands

from harness.bench.client import BrokerError, LeanConnection
from harness.bench.confirms import ConfirmRun
from harness.bench.stats import confirm_gaps, percentile
from harness.bench.url import AmqpUrl

Delivery = Literal["persistent", "transient"]
DELIVERIES: tuple[Delivery, ...] = ("persistent", "transient")


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
) -> ConfirmRun:
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
) -> ConfirmRun:
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

