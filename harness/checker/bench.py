"""Checker throughput on a generated history: ``python -m harness.checker.bench``.

Writes a history of at least ``--ops`` lines with :class:`HistoryWriter` (a simulated
clock, a healthy broker: confirms, FIFO deliveries, acks, requeues with the redelivered
flag, a mirror crash and restart with a sync, a final drain), then times reading and
checking it and prints one JSON object: ops/s, peak RSS, the ledger's bytes per message
and, with ``--tracemalloc``, the check's peak of Python allocations (a second, slower
pass). Nothing is asserted: the numbers are for people and CI logs.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.checker.checkers import check
from harness.checker.result import Result
from harness.history.reader import read_history
from harness.history.writer import HistoryWriter

NODES = ("n1", "n2", "n3")


class _Clock:
    """Simulated monotonic time: every line is ``step`` seconds after the previous."""

    def __init__(self, step: float) -> None:
        self.now = 1000.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now

    def wall(self) -> float:
        return 1_700_000_000.0 + self.now


def generate(path: Path, ops: int, *, producers: int = 4, consumers: int = 4, queues: int = 2,
             seed: int = 1, step: float = 0.00005) -> int:
    """Write a history of at least ``ops`` event lines; returns the number written."""
    rng = random.Random(seed)
    clock = _Clock(step)
    config = {"nodes": list(NODES), "partition_handling": "pause_minority",
              "persistent": True, "runtime": "bench",
              "queues": {f"q{i}": {"members": list(NODES), "policy": {"ha-mode": "all"}}
                         for i in range(queues)}}
    written = 0
    with HistoryWriter(path, run_id=f"bench-{seed}", scenario="bench", seed=seed,
                       config=config, clock=clock, wall_clock=clock.wall) as w:
        def add(process: str, op: str, type: str, **fields: Any) -> None:
            nonlocal written
            w.append(process, op, type, **fields)
            written += 1

        names = [f"q{i}" for i in range(queues)]
        waiting: dict[str, deque[tuple[str, bool]]] = {q: deque() for q in names}
        for c in range(consumers):
            add(f"c{c}", "connect", "ok", node=NODES[c % len(NODES)])
            add(f"c{c}", "consume", "ok", queue=names[c % queues], mode="ack")
        seqs = [0] * producers
        fault = 0
        while written < ops:
            p = rng.randrange(producers)
            queue = names[p % queues]
            msg = f"p{p}-{seqs[p]}"
            seqs[p] += 1
            add(f"p{p}", "publish", "invoke", msg=msg, queue=queue, node="n1")
            roll = rng.random()
            outcome = "ok" if roll < 0.99 else ("info" if roll < 0.995 else "fail")
            add(f"p{p}", "confirm", outcome, msg=msg, queue=queue, node="n1")
            waiting[queue].append((msg, False))
            if rng.random() < 0.9:
                _consume_one(add, rng, waiting, queue, consumers, queues)
            if written // 200_000 > fault:
                fault = written // 200_000
                _mirror_crash(add, fault, names)
        for queue in names:
            while waiting[queue]:
                _consume_one(add, rng, waiting, queue, consumers, queues)
        add("harness", "drain", "invoke")
        add("harness", "drain", "ok")
    return written


def _consume_one(add: Any, rng: random.Random, waiting: dict[str, deque[tuple[str, bool]]],
                 queue: str, consumers: int, queues: int) -> None:
    msg, again = waiting[queue].popleft()
    index = int(queue[1:])
    group = [c for c in range(consumers) if c % queues == index] or [0]
    consumer = f"c{rng.choice(group)}"
    add(consumer, "deliver", "ok", msg=msg, queue=queue, redelivered=again, mode="ack")
    if rng.random() < 0.001:
        add(consumer, "nack", "ok", msg=msg, queue=queue, requeue=True)
        waiting[queue].appendleft((msg, True))  # back to its place at the head
    else:
        add(consumer, "ack", "ok", msg=msg, queue=queue)


def _mirror_crash(add: Any, number: int, queues: list[str]) -> None:
    fault_id = f"kill-{number}"
    add("nemesis", "fault-start", "ok", fault="kill", fault_id=fault_id, targets=["n3"])
    add("nemesis", "fault-end", "ok", fault="kill", fault_id=fault_id, targets=["n3"])
    for queue in queues:
        add("n1", "sync-end", "info", queue=queue, node="n1")


def measure(path: Path, with_tracemalloc: bool) -> dict[str, Any]:
    start = time.perf_counter()
    history = read_history(path)
    result = check(history)
    seconds = time.perf_counter() - start
    figures: dict[str, Any] = {"check_s": round(seconds, 3), "result": result}
    if with_tracemalloc:
        tracemalloc.start()
        check(read_history(path))
        figures["check_tracemalloc_peak_mib"] = round(
            tracemalloc.get_traced_memory()[1] / 2**20, 2)
        tracemalloc.stop()
    return figures


def summary(ops: int, path: Path, generate_s: float, figures: dict[str, Any]) -> dict[str, Any]:
    result: Result = figures.pop("result")
    messages = result.counts.get("attempted", 0)
    ledger = result.data.get("ledger_bytes", 0)
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "ops": ops, "messages": messages, "history_mib": round(path.stat().st_size / 2**20, 1),
        "generate_s": round(generate_s, 3), **figures,
        "ops_per_s": round(ops / figures["check_s"]) if figures["check_s"] else None,
        "peak_rss_mib": round(rss_kib / 1024, 1),
        "ledger_bytes": ledger,
        "ledger_bytes_per_message": round(ledger / messages, 2) if messages else None,
        "valid": result.valid, "violations": len(result.violations),
        "counts": result.counts, "python": sys.version.split()[0],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.checker.bench",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--ops", type=int, default=1_000_000, help="history lines to generate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=4)
    parser.add_argument("--queues", type=int, default=2)
    parser.add_argument("--tracemalloc", action="store_true",
                        help="also measure the check's peak Python allocations (slower)")
    parser.add_argument("--keep", type=Path, help="write the history here and keep it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mirrorchaos-bench-") as tmp:
        path = args.keep or Path(tmp) / "history.jsonl"
        start = time.perf_counter()
        ops = generate(path, args.ops, producers=args.producers, consumers=args.consumers,
                       queues=args.queues, seed=args.seed)
        generate_s = time.perf_counter() - start
        figures = measure(path, args.tracemalloc)
        print(json.dumps(summary(ops, path, generate_s, figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
