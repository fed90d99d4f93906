"""How long publishers went without a confirm while a node was down: the failover gap
as the workload's clients saw it (the broker's own is what ``mirrorchaos bench --stage
failover`` measures with one client publishing through a surviving node).

For each node fault that took effect (a crash or a graceful stop) inside the workload
window: ``pause``, the longest pause between two consecutive confirms (from any
publisher) while the fault was in force, and ``pause_from``, when that pause began, in
seconds from the fault's start (negative: before it). Both are None when no confirm
came before the fault, or none after it before the drain. A measurement, never a verdict.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Mapping

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

    def handlers(self) -> Mapping[str, Handler]:
        return {"confirm": self.confirm}

    def confirm(self, ev: Event) -> None:
        if ev.type == "ok":
            self.confirms.append(ev.time)

    def finish(self) -> Result:
        run = self.run
        end = run.timeline.drain_started if run.timeline.drain_started is not None else run.last
        first = run.first_publish
        if first is None or end is None:
            return Result("failover", True, data={"failover": []})
        faults = [f for f in run.timeline.faults()
                  if f.applied and f.kind in NODE_DOWN_FAULTS and first <= f.start < end]
        gaps = [self._gap(f, min(end, f.end if f.end is not None else end), end)
                for f in faults]
        return Result("failover", True, data={"failover": gaps})

    def _gap(self, fault: Fault, until: float, end: float) -> dict[str, object]:
        """The longest pause between consecutive confirms overlapping the fault's time
        in force (``fault.start`` to ``until``), confirms after ``end`` not counted."""
        times = self.confirms
        after = bisect.bisect_right(times, fault.start)  # the first confirm after it
        hi = bisect.bisect_right(times, end)
        if after == 0 or after >= hi:
            pause = pause_from = None
        else:
            # pauses that begin before ``until``: the one in force at the start at least
            last = max(after, min(hi - 1, bisect.bisect_left(times, until)))
            began, ended = max(((times[k], times[k + 1]) for k in range(after - 1, last)),
                               key=lambda pair: pair[1] - pair[0])
            pause, pause_from = round(ended - began, 6), round(began - fault.start, 6)
        return {"fault": fault.id, "kind": fault.kind, "targets": list(fault.targets),
                "start": round(fault.start - self.run.header.time, 6),
                "pause": pause, "pause_from": pause_from}
