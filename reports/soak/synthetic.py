"""Stored campaign runs made without a cluster, for the merge's tests and benchmark:
histories built with `HistoryBuilder`, checked by the real checker, laid out as
the driver stores them (``runs/<task>/task.json`` and the run directory)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Literal

from harness.checker import check_path
from harness.history import HistoryBuilder
from reports.soak.campaign import RUNS_DIR
from reports.soak.task import TASK_FILE, RunTask, lost_record

Flavour = Literal["valid", "invalid", "timeout", "crashed", "lost"]
NODES = ("n1", "n2", "n3")


def synthetic_history(seed: int, *, scenario: str = "mixed", messages: int = 200,
                      lose: int = 0, complete: bool = True) -> HistoryBuilder:
    """Two publishers, one consumer, a kill of the master in the middle with a
    promotion. Confirm latencies are drawn from the seed (a few ms, slower during the
    kill). ``lose`` confirmed messages are never delivered (violations: nothing
    explains them); without ``complete`` the drain never happens (verdict unknown)."""
    rng = random.Random(seed)
    b = HistoryBuilder(nodes=NODES, scenario=scenario, seed=seed,
                       run_id=f"{scenario}-synthetic-seed{seed}",
                       queues={"q": {"members": list(NODES), "policy": {"ha-mode": "all"}}})
    b.consume("c1", node="n2")
    length = messages * 0.01
    kill_at, heal_at = length * 0.4, length * 0.6
    events: list[tuple[float, int, str, str]] = []  # time, order, what, message
    delivered = 0.0  # deliveries in publish order: FIFO, nothing reordered
    for i in range(messages):
        msg = f"p{i % 2 + 1}-{i // 2 + 1}"
        t0 = 0.1 + i * 0.01
        slow = kill_at <= t0 < heal_at
        latency = rng.lognormvariate(1.5 if not slow else 4.0, 0.5) / 1000.0
        events.append((t0, 0, "publish", msg))
        events.append((t0 + latency, 1, "confirm", msg))
        if i >= messages - lose:
            continue
        delivered = max(delivered, t0 + latency) + 0.0001
        events.append((delivered, 2, "deliver", msg))
    events.append((kill_at, 3, "kill", ""))
    events.append((heal_at, 3, "heal", ""))
    events.sort()
    fault = ""
    for time, _, what, msg in events:
        b.at(max(time, b.now))
        if what == "publish":
            b.add(msg.split("-")[0], "publish", "invoke", msg=msg, queue="q", node="n2")
        elif what == "confirm":
            b.add(msg.split("-")[0], "confirm", "ok", msg=msg, queue="q", node="n2")
        elif what == "deliver":
            b.deliver(msg, "c1", node="n2")
            b.ack(msg, "c1")
        elif what == "kill":
            fault = b.fault("kill", ["n1"])
            b.node_event("promotion", "n2", queue="q", node="n2", previous="n1")
        else:
            b.heal(fault)
    if complete:
        b.drain()
    return b


def write_synthetic_run(campaign_dir: Path, index: int, seed: int, flavour: Flavour = "valid",
                        *, scenario: str = "mixed", messages: int = 200,
                        duration: float = 30.0) -> dict[str, Any]:
    """One run of a campaign as the store would hold it; returns its task record. A
    lost run has its record only, as the driver writes it; the others ran on one of
    two workers."""
    task = RunTask(index, scenario, seed, "process", duration,
                   str(campaign_dir / RUNS_DIR / f"{index:03d}-seed{seed}"), duration + 240)
    task_dir = Path(task.task_dir)
    if flavour == "lost":
        task_dir.mkdir(parents=True)
        lost = {**lost_record(task, [f"attempt {n}: synthetic executor lost" for n in (1, 2, 3)]),
                "attempts": 3}
        (task_dir / TASK_FILE).write_text(json.dumps(lost, indent=2) + "\n", encoding="utf-8")
        return lost
    run_dir = task_dir / scenario / f"20260101T000000-seed{seed}"
    run_dir.mkdir(parents=True)
    history = synthetic_history(seed, scenario=scenario, messages=messages,
                                lose=3 if flavour == "invalid" else 0,
                                complete=flavour not in ("timeout", "crashed"))
    history.write(run_dir / "history.jsonl")
    status = {"valid": "done", "invalid": "done"}.get(flavour, flavour)
    code: int | None = {"valid": 0, "invalid": 1, "timeout": None, "crashed": -9}[flavour]
    if flavour != "crashed":  # a crashed harness never checked its run
        results = check_path(run_dir)
        if flavour == "timeout":
            results["harness_error"] = "interrupted"
        (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n",
                                              encoding="utf-8")
    record = {"task": task.name, "index": index, "scenario": scenario, "seed": seed,
              "runtime": task.runtime, "duration": duration, "timeout": task.timeout,
              "status": status, "exit_code": code, "elapsed_s": duration + 10.0,
              "run_dir": str(run_dir), "replay": task.replay,
              "error": None if flavour in ("valid", "invalid") else f"synthetic {flavour}",
              "host": "synthetic", "worker": f"synthetic:{index % 2}",
              "executor": str(index % 2), "attempts": 1, "spark_attempt": 0}
    (task_dir / TASK_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record
