"""Running a schedule against a nemesis, with the final heal guaranteed: it runs when
the schedule ends, when the run is stopped early, and when a step raises."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .core import HEAL, Nemesis, Op
from .schedule import FINAL, Step, is_final


@dataclass(frozen=True)
class Record:
    """One op as the run's record keeps it: when it was invoked and completed
    (seconds from the start of the schedule), and how."""

    invoked_at: float
    completed_at: float
    invoked: Op
    completed: Op


class UnhealedError(Exception):
    """The final heal did not end every fault; the records say what happened."""

    def __init__(self, final: Record, records: list[Record]) -> None:
        super().__init__(f"final heal {final.completed.type}: {final.completed.error}")
        self.final = final
        self.records = records


def run_schedule(nemesis: Nemesis, steps: Sequence[Step], *,
                 stop: threading.Event | None = None,
                 on_record: Callable[[Record], None] | None = None) -> list[Record]:
    """Invoke each step at its time; ``stop`` ends the schedule early (then the final
    heal runs at once). Raises `UnhealedError` when the final heal is not ``ok``.

    A step that ends late (a node that takes seconds to start again) moves the rest of
    the schedule with it: each step is invoked no sooner than its planned gap after the
    step before it was. A window a schedule opens on purpose, a cut shorter than failure
    detection before a kill, say, stays as long as planned instead of closing to
    nothing as the late steps run back to back."""
    start = time.monotonic()
    records: list[Record] = []
    final: Record | None = None
    before: tuple[float, float] | None = None  # the last step: planned at, invoked at

    def invoke(op: Op) -> Record:
        invoked_at = time.monotonic() - start
        completed = nemesis.invoke(op)
        record = Record(invoked_at, time.monotonic() - start, op, completed)
        records.append(record)
        if on_record is not None:
            on_record(record)
        return record

    try:
        for step in steps:
            due = start + step.at
            if before is not None:
                due = max(due, before[1] + step.at - before[0])
            delay = due - time.monotonic()
            if stop is not None and stop.wait(max(0.0, delay)):
                break
            if stop is None and delay > 0:
                time.sleep(delay)
            before = (step.at, time.monotonic())
            record = invoke(step.op)
            if is_final(step.op):
                final = record
    finally:
        if final is None:
            final = invoke(Op(HEAL, dict(FINAL)))
    if final.completed.type != "ok":
        raise UnhealedError(final, records)
    return records
