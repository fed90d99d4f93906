"""``unanswered``: a publish the broker never answered while the cluster was whole.

Every publish on a confirm channel gets a ``basic.ack`` or ``basic.nack``, and every
``tx.commit`` a ``commit-ok`` or an error; a dead mirror or master is dropped from the
replicas a confirm waits for once the cluster sees it gone (README "Mirrored queues").
The workload records a confirm it gave up on after its timeout as ``confirm info`` with
a ``TimeoutError``. That is a violation when no fault was in force at the moment it gave
up nor in the ``grace`` seconds before (a failure is detected within seconds of the
fault, a restarted mirror synchronises after its heal, a link heals at once): a confirm
stuck behind a replica that is gone, or dropped on the way. Not judged while a node
reported a memory alarm (publishers are blocked by design) since it set.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event

GRACE_S = 5.0  # the same bound as `stalled` and `overtaken`: the machine is shared
_TIMEOUT = "TimeoutError"


class Unanswered(Streaming):
    name = "unanswered"

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s

    def start(self, run: Run) -> Observer:
        return _Unanswered(run, self.grace_s)


class _Unanswered:
    def __init__(self, run: Run, grace_s: float) -> None:
        self.run = run
        self.grace = grace_s
        self.published: dict[str, float] = {}  # msg -> publish invoke, until its outcome
        # (gave up at, published at, msg, publisher, queue)
        self.timeouts: list[tuple[float, float, str, str, str | None]] = []
        self.alarm_at: float | None = None  # the first memory alarm a node set

    def handlers(self) -> Mapping[str, Handler]:
        return {"publish": self.publish, "confirm": self.confirm, "node-event": self.node_event}

    def publish(self, ev: Event) -> None:
        if ev.type == "invoke" and ev.msg is not None:
            self.published[ev.msg] = ev.time

    def confirm(self, ev: Event) -> None:
        if ev.msg is None:
            return
        published = self.published.pop(ev.msg, ev.time)
        if ev.type == "info" and str(ev.get("error", "")).startswith(_TIMEOUT):
            self.timeouts.append((ev.time, published, ev.msg, ev.process, ev.queue))

    def node_event(self, ev: Event) -> None:
        if ev.get("event") == "memory_alarm" and self.alarm_at is None:
            self.alarm_at = ev.time

    def finish(self) -> Result:
        timeline = self.run.timeline
        faults = [f for f in timeline.faults() if f.applied]
        wrong = Grouper()
        excused = 0
        for gave_up, published, msg, publisher, queue in self.timeouts:
            if ((self.alarm_at is not None and self.alarm_at <= gave_up)
                    or any(f.overlaps(gave_up - self.grace, gave_up) for f in faults)):
                excused += 1
                continue
            wrong.add("unanswered", msg,
                      f"{publisher} had no confirm for {gave_up - published:.1f} s, and no "
                      f"fault was in force in the {self.grace:.0f} s before it gave up",
                      published, gave_up, queue)
        counts = {"unanswered": len(wrong), "timeouts_during_faults": excused}
        return Result(Unanswered.name, not wrong, counts, wrong.anomalies(timeline))
