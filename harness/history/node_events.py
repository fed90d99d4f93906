"""Broker nodes' own event logs, merged into a run's history by time.

A node writes ``{"ts", "mono", "node", "event", ...}`` lines, each one of the events
of cluster/events.py, the schema both sides share: every line is decoded through it,
and one that does not fit is refused, naming its file, line and key. Events with a
meaning in the history format become the matching node op, named for the node they are
about; all others become ``node-event`` lines that keep the event's name. The merge uses the nodes'
``mono`` clock: nodes and harness share the host's monotonic clock (processes, or
containers on one kernel).

A run directory (``store/<scenario>/<run>/``) holds ``history.jsonl`` with the
harness's own lines and ``nodes/<node>.events.jsonl``; :func:`read_run` reads both as
one history. A node killed with SIGKILL may leave a torn last line, which is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cluster.events import EventSchemaError, decode
from harness.history.errors import BadHistory
from harness.history.model import Event, Header
from harness.history.parse import Parser
from harness.history.reader import FileHistory, TornLine


def read_node_events(path: Path) -> list[Event]:
    """All events of one node's events.jsonl, as history events in file order."""
    parser = Parser(str(path))
    events: list[Event] = []
    try:
        data = path.read_bytes()
    except OSError as err:
        raise BadHistory(str(path), 0, None, "a readable node event file",
                         err.strerror or str(err)) from None
    lines = data.split(b"\n")
    complete = lines[:-1]
    for number, raw in enumerate(complete, 1):
        events.append(parser.event(_translate(_record(path, raw, number), path, number),
                                   number))
    tail = lines[-1]
    if tail.strip():
        try:
            record = _record(path, tail, len(lines))
        except BadHistory:
            return events  # cut short by a crash of the node
        events.append(parser.event(_translate(record, path, len(lines)), len(lines)))
    return events


def _record(path: Path, raw: bytes, line: int) -> dict[str, Any]:
    try:
        record = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BadHistory(str(path), line, None, "one JSON object per line", str(err)) from None
    if not isinstance(record, dict):
        raise BadHistory(str(path), line, None, "a JSON object", record)
    return record


def _translate(record: dict[str, Any], path: Path, line: int) -> dict[str, Any]:
    for key in ("mono", "node", "event"):
        if key not in record:
            raise BadHistory(str(path), line, key, "present in every node event")
    try:
        event = decode(record)
    except EventSchemaError as err:
        raise BadHistory(str(path), line, err.field, err.expected, err.got) from None
    out = {k: list(v) if isinstance(v, tuple) else v for k, v in event.fields().items()}
    out.update(time=record["mono"], process=record["node"], op=event.op, type="info",
               node=event.subject() or record["node"])
    if "ts" in record:
        out["wall"] = record["ts"]
    if event.op == "node-event":
        out["event"] = event.kind
    return out


class RunHistory:
    """The harness's history with every node's events merged in by time."""

    def __init__(self, history: FileHistory, node_files: list[Path]) -> None:
        self._history = history
        self.header: Header = history.header
        self.source = history.source
        events = [ev for path in node_files for ev in read_node_events(path)]
        events.sort(key=lambda ev: ev.time)  # stable: each node's own order is kept
        self._node_events = events

    @property
    def torn(self) -> TornLine | None:
        return self._history.torn

    def __iter__(self) -> Iterator[Event]:
        pending = self._node_events
        i, n = 0, len(pending)
        for ev in self._history:
            while i < n and pending[i].time <= ev.time:
                yield pending[i]
                i += 1
            yield ev
        yield from pending[i:]


def read_run(run_dir: str | Path) -> RunHistory:
    """The history of a stored run: ``history.jsonl`` plus ``nodes/*.events.jsonl``."""
    root = Path(run_dir)
    history = FileHistory(root / "history.jsonl")
    node_files = sorted((root / "nodes").glob("*.events.jsonl"))
    return RunHistory(history, node_files)
