"""How long publishers went without a confirm while a node was down: the failover gap
as the workload's clients saw it (the broker's own is what ``mirrorchaos bench --stage
failover`` measures with one client publishing through a surviving node).

For each node fault that took effect (a crash or a graceful stop) inside the workload
window, the longest pause between two consecutive confirms while the node was down
(from the fault's start to its heal's start: the pauses of the node's restart and
resync are not the failover's):
``pause`` over every publisher's confirms (what the cluster served), with
``pause_from``, when it began in seconds from the fault's start (negative: before it);
and ``publisher_pause``, the longest any one publisher saw (``publisher`` names it: one
connected to the failed node also waits for its reconnection). A pause counts when a
confirm came before the fault and another after it before the drain; None otherwise.
A measurement, never a verdict.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Mapping, Sequence

from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Fault, Result
from harness.checker.run import Run
from harness.history.model import CRASH_FAULTS, SHUTDOWN_FAULTS, Event

NODE_DOWN_FAULTS = CRASH_FAULTS | SHUTDOWN_FAULTS


class Failover(Streaming):
    name = "failover"

    def start(self, run: Run) -> Observer:
        return _Failover(run)


class _Failover:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.confirms = array("d")  # confirm ok times, in history (time) order
        self.by_publisher: dict[str, array[float]] = {}
        self.heals: dict[str, float] = {}  # fault id -> when its heal began

    def handlers(self) -> Mapping[str, Handler]:
        return {"confirm": self.confirm, "fault-end": self.heal}

    def heal(self, ev: Event) -> None:
        if ev.fault_id is not None:
            self.heals.setdefault(ev.fault_id, ev.time)

    def confirm(self, ev: Event) -> None:
        if ev.type == "ok":
            self.confirms.append(ev.time)
            self.by_publisher.setdefault(ev.process, array("d")).append(ev.time)

    def finish(self) -> Result:
        run = self.run
        end = run.timeline.drain_started if run.timeline.drain_started is not None else run.last
        first = run.first_publish
        if first is None or end is None:
            return Result("failover", True, data={"failover": []})
        faults = [f for f in run.timeline.faults()
                  if f.applied and f.kind in NODE_DOWN_FAULTS and first <= f.start < end]
        return Result("failover", True, data={"failover": [self._gap(f, end) for f in faults]})

    def _gap(self, fault: Fault, end: float) -> dict[str, object]:
        until = min(end, self.heals.get(fault.id, end))
        pause = longest_pause(self.confirms, fault.start, until, end)
        own = {process: p for process, times in sorted(self.by_publisher.items())
               if (p := longest_pause(times, fault.start, until, end)) is not None}
        worst = max(own, key=lambda process: own[process][1] - own[process][0], default=None)
        return {"fault": fault.id, "kind": fault.kind, "targets": list(fault.targets),
                "start": round(fault.start - self.run.header.time, 6),
                "pause": None if pause is None else round(pause[1] - pause[0], 6),
                "pause_from": None if pause is None else round(pause[0] - fault.start, 6),
                "publisher_pause": None if worst is None
                else round(own[worst][1] - own[worst][0], 6),
                "publisher": worst}


def longest_pause(times: Sequence[float], start: float, until: float,
                  end: float) -> tuple[float, float] | None:
    """The longest pause between consecutive ``times`` (sorted) that begins before
    ``until`` and ends after ``start``, times after ``end`` not counted: as (began,
    ended). None without a time before ``start`` and one after it up to ``end``."""
    after = bisect.bisect_right(times, start)  # the first time after the start
    hi = bisect.bisect_right(times, end)
    if after == 0 or after >= hi:
        return None
    # the pause in force at the start, and those that begin before ``until``
    last = max(after, min(hi - 1, bisect.bisect_left(times, until)))
    return max(((times[k], times[k + 1]) for k in range(after - 1, last)),
               key=lambda pair: pair[1] - pair[0])
