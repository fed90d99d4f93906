"""Ordering: each consumer sees a producer's messages of one queue first delivered in
publish order, unless a requeue or failover happened in between.

The check is per consumer because receipt times of different consumers say nothing
about the broker's dispatch order (their links differ); within one channel, TCP keeps
it. A first delivery flagged ``redelivered`` was delivered before, unseen (e.g. to a
consumer whose connection died), so it is requeued and exempt. Requeue points are the
record's nacks/rejects with requeue, recovers, consumer disconnects and failure faults.
The final drain's gets (process ``drain``: sequential, on one channel, after the
workload stopped) are excused by a failover only: a requeue puts a message back at its
place, so it cannot reorder what the drain gets.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event

DRAIN_PROCESS = "drain"


class Ordering(Streaming):
    name = "ordering"

    def start(self, run: Run) -> Observer:
        return _Ordering(run)


class _Ordering:
    def __init__(self, run: Run) -> None:
        self.run = run
        # (consumer, producer, queue) -> [highest seq first-delivered, its time, its id]
        self.latest: dict[tuple[str, str, str], list] = {}
        self.violations = Grouper()
        self.pairs: list[list[str]] = []
        self.allowed = 0

    def handlers(self) -> Mapping[str, Handler]:
        return {"deliver": self.delivery, "get": self.delivery}

    def delivery(self, ev: Event) -> None:
        log = self.run.log
        if log is None or log.count[ev.seq]:
            return  # unknown (another checker's) or not a first delivery
        queue = ev.queue
        assert queue is not None and ev.producer is not None and ev.msg is not None
        key = (ev.process, ev.producer, queue)
        latest = self.latest.get(key)
        if latest is None:
            self.latest[key] = [ev.seq, ev.time, ev.msg]
            return
        if ev.seq > latest[0]:
            latest[0], latest[1], latest[2] = ev.seq, ev.time, ev.msg
            return
        timeline = self.run.timeline
        requeued = timeline.failover_at
        if ev.process != DRAIN_PROCESS:
            requeued = max(timeline.requeued_at.get(queue, requeued), requeued)
        if ev.redelivered or requeued >= latest[1]:
            self.allowed += 1
            return
        self.violations.add(
            "reordered", ev.msg,
            f"first delivered to {ev.process} after a message its producer published later, "
            "with no requeue or failover in between", log.sent[ev.seq], ev.time, queue)
        self.pairs.append([ev.msg, latest[2]])

    def finish(self) -> Result:
        counts = {"reordered": len(self.violations), "reordered_allowed": self.allowed}
        data = {"reordered": self.pairs} if self.pairs else {}
        return Result("ordering", not self.violations, counts,
                      self.violations.anomalies(self.run.timeline), data=data)
