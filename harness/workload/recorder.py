"""The workload's side of the history: every client operation goes through the
run's `HistoryWriter`, and a few running figures are kept for the live display."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.history import HistoryWriter


@dataclass
class LiveFigures:
    """Running counts for the live display; the checker's verdict is the authority."""

    ops: Counter[str] = field(default_factory=Counter)  # "op type" -> count
    confirmed: int = 0
    nacked: int = 0
    indeterminate: int = 0
    delivered: int = 0
    # A second delivery of an id without the redelivered flag, and ids never published.
    unflagged_duplicates: int = 0
    unexpected: int = 0
    connection_losses: int = 0


class Recorder:
    """Appends client events to the history (thread-safe, like the writer) and keeps
    `LiveFigures` from them."""

    def __init__(self, writer: HistoryWriter) -> None:
        self.writer = writer
        self.figures = LiveFigures()
        self._lock = threading.Lock()
        self._published: set[str] = set()
        self._delivered: set[str] = set()

    def record(self, process: str, op: str, type: str, **fields: Any) -> None:
        self.writer.append(process, op, type, **fields)
        with self._lock:
            self._count(op, type, fields)

    def _count(self, op: str, type: str, fields: dict[str, Any]) -> None:
        f = self.figures
        f.ops[f"{op} {type}"] += 1
        msg = fields.get("msg")
        if op == "publish" and type == "invoke":
            self._published.add(str(msg))
        elif op == "confirm":
            if type == "ok":
                f.confirmed += 1
            elif type == "fail":
                f.nacked += 1
            else:
                f.indeterminate += 1
        elif op in ("deliver", "get") and type == "ok" and msg is not None:
            f.delivered += 1
            if msg not in self._published:
                f.unexpected += 1
            elif msg in self._delivered and not fields.get("redelivered"):
                f.unflagged_duplicates += 1
            self._delivered.add(msg)
        elif op == "disconnect" and type != "ok":
            f.connection_losses += 1
