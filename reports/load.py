"""What every report reads: a run's results.json (checked again when missing or older
than the history) and the nodes' own events, with times in seconds since the run began.

results.json keeps only counts of node reports, so the node events timeline comes from
one more pass over the history; it keeps just the node ops, so memory stays small.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.checker import check_path
from harness.checker.results import RESULTS_FORMAT, RESULTS_VERSION
from harness.history import read_history, read_run
from harness.history.model import CLIENT_OPS, NODE_OPS
from harness.history.reader import History

RESULTS_FILE = "results.json"
HISTORY_FILE = "history.jsonl"
# keys every event has; what remains of a node report is its detail
_EVENT_KEYS = frozenset({"time", "wall", "process", "op", "type", "node", "queue"})


@dataclass(frozen=True)
class NodeEvent:
    """A broker node's report (promotion, sync, partition, ...), as the history has it."""

    time: float  # seconds since the run started
    op: str
    reporter: str
    node: str | None  # the node the report is about
    queue: str | None
    detail: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        """The op with whatever else the node said, e.g. ``sync-end q (cancelled)``."""
        words = [self.op if self.op != "node-event" else str(self.detail.get("event", self.op))]
        if self.queue:
            words.append(self.queue)
        extra = {k: v for k, v in self.detail.items() if k != "event"}
        if extra:
            words.append("(" + ", ".join(f"{k}={v}" for k, v in sorted(extra.items())) + ")")
        return " ".join(words)


@dataclass
class RunReport:
    """A checked run, ready to render: the results document and the node events."""

    results: dict[str, Any]
    node_events: list[NodeEvent]
    folder: Path  # where report.html and junit.xml go
    # Seconds from the run's start to its first client event: before it the cluster was
    # being set up (and the node image built), which plots leave out.
    workload_start: float = 0.0

    @property
    def title(self) -> str:
        return f"{self.results.get('scenario')} · {self.results.get('run_id')}"


def load(path: str | Path, *, recheck: bool = False) -> RunReport:
    """A run directory or history file as :func:`harness.checker.check_path` takes it.

    The checker runs (and results.json is rewritten) when results.json is missing, not a
    results document of this version, older than any history input, or when ``recheck``.
    Bad input raises :class:`harness.history.BadHistory` naming file, line and field.
    """
    target = Path(path)
    folder = target if target.is_dir() else target.parent
    history = _open_history(target)
    results_path = folder / RESULTS_FILE
    results = None if recheck else _stored_results(results_path, _inputs(target))
    if results is None:
        results = check_path(target)
        results_path.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    events, workload_start = _events(history)
    return RunReport(results, events, folder, workload_start)


def _events(history: History) -> tuple[list[NodeEvent], float]:
    """The node events, and when the workload started (0 without client events)."""
    t0 = history.header.time
    events: list[NodeEvent] = []
    workload_start: float | None = None
    for ev in history:
        if ev.op in NODE_OPS:
            events.append(NodeEvent(round(ev.time - t0, 6), ev.op, ev.process, ev.node,
                                    ev.queue, {k: v for k, v in ev.raw.items()
                                               if k not in _EVENT_KEYS}))
        elif workload_start is None and ev.op in CLIENT_OPS:
            workload_start = round(ev.time - t0, 6)
    return events, workload_start or 0.0


def _open_history(target: Path) -> History:
    return read_run(target) if target.is_dir() else read_history(target)


def _inputs(target: Path) -> list[Path]:
    if not target.is_dir():
        return [target]
    return [target / HISTORY_FILE, *sorted((target / "nodes").glob("*.events.jsonl"))]


def _stored_results(path: Path, inputs: list[Path]) -> dict[str, Any] | None:
    """results.json if it is current for ``inputs``, else None (check again)."""
    try:
        written = path.stat().st_mtime_ns
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or (doc.get("format"), doc.get("version")) != (
            RESULTS_FORMAT, RESULTS_VERSION):
        return None
    if any(p.stat().st_mtime_ns > written for p in inputs if p.exists()):
        return None
    return doc
