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
A measurement, never a verdict; kept as the history streams by, in memory per fault
and per publisher, not per message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import CRASH_FAULTS, SHUTDOWN_FAULTS, Event

NODE_DOWN_FAULTS = CRASH_FAULTS | SHUTDOWN_FAULTS
Pause = tuple[float, float]  # (began, ended)


class Failover(Streaming):
    name = "failover"

    def start(self, run: Run) -> Observer:
        return _Failover(run)


@dataclass
class _Window:
    """A node fault's time down: from its start until its heal began (None: not yet)."""

    id: str
    kind: str
    targets: tuple[str, ...]
    start: float
    until: float | None = None
    pause: Pause | None = None  # the longest over every publisher's confirms
    own: dict[str, Pause] = field(default_factory=dict)  # the longest per publisher

    def takes(self, began: float, ended: float) -> bool:
        """Whether a pause between two consecutive confirms falls in the window."""
        return ended > self.start and (self.until is None or began < self.until)


class _Failover:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.last: float | None = None  # the latest confirm, any publisher's
        self.last_of: dict[str, float] = {}  # the latest confirm of each publisher
        self.windows: list[_Window] = []
        self.open: dict[str, _Window] = {}  # by fault id, until the heal begins

    def handlers(self) -> Mapping[str, Handler]:
        return {"confirm": self.confirm, "fault-start": self.fault_start,
                "fault-end": self.fault_end}

    def fault_start(self, ev: Event) -> None:
        """A window opens at the fault's first line (it may act from its ``invoke``
        on) and goes again when the fault definitely did not happen (``fail``)."""
        run, fault_id = self.run, ev.fault_id
        if ev.fault not in NODE_DOWN_FAULTS or fault_id is None:
            return
        if ev.type == "fail":
            if (window := self.open.pop(fault_id, None)) is not None:
                self.windows.remove(window)
        elif (fault_id not in self.open and run.first_publish is not None
              and run.timeline.drain_started is None):
            window = _Window(fault_id, str(ev.fault), tuple(ev.targets), ev.time)
            self.windows.append(window)
            self.open[fault_id] = window

    def fault_end(self, ev: Event) -> None:
        window = self.open.pop(ev.fault_id or "", None)
        if window is not None:
            window.until = ev.time

    def confirm(self, ev: Event) -> None:
        if ev.type != "ok" or self.run.timeline.drain_started is not None:
            return
        t, publisher = ev.time, ev.process
        before, before_own = self.last, self.last_of.get(publisher)
        for window in self.windows:
            if before is not None and window.takes(before, t):
                window.pause = _longer(window.pause, (before, t))
            if before_own is not None and window.takes(before_own, t):
                window.own[publisher] = _longer(window.own.get(publisher), (before_own, t))
        self.last, self.last_of[publisher] = t, t

    def finish(self) -> Result:
        return Result("failover", True, data={"failover": [
            self._gap(window) for window in self.windows]})

    def _gap(self, window: _Window) -> dict[str, object]:
        pause = window.pause
        worst = max(sorted(window.own), key=lambda p: window.own[p][1] - window.own[p][0],
                    default=None)
        return {"fault": window.id, "kind": window.kind, "targets": list(window.targets),
                "start": round(window.start - self.run.header.time, 6),
                "pause": _length(pause),
                "pause_from": None if pause is None else round(pause[0] - window.start, 6),
                "publisher_pause": None if worst is None else _length(window.own[worst]),
                "publisher": worst}


def _length(pause: Pause | None) -> float | None:
    return None if pause is None else round(pause[1] - pause[0], 6)


def _longer(best: Pause | None, candidate: Pause) -> Pause:
    if best is None or candidate[1] - candidate[0] > best[1] - best[0]:
        return candidate
    return best
