"""Ordering: each consumer sees a producer's messages of one queue first delivered in
publish order, unless a requeue or failover happened in between.

The check is per consumer because receipt times of different consumers say nothing
about the broker's dispatch order (their links differ); within one channel, TCP keeps
it. A first delivery flagged ``redelivered`` was delivered before, unseen (e.g. to a
consumer whose connection died), so it is requeued and exempt. Requeue points are the
record's nacks/rejects with requeue, recovers, consumer disconnects and failure faults.
Two messages its producer published on different connections (it reconnected in
between) have no order to keep.

The final drain (process ``drain``: sequential gets on one channel, after the workload
stopped) sees what is left in the queue, which a requeue leaves in publish order (a
requeued message goes back to its place): every get of it is judged, flagged or not,
first delivery or not, and only a failover, or a requeue recorded up to a second before
(its broker side may lag the record), excuses a get out of order. A requeued message
must also come back before its consumer gets more than its prefetch of later ones
(requeues.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.requeues import Requeues
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event

DRAIN_PROCESS = "drain"
# how long after a requeue's record the broker may still be putting messages back
DRAIN_SETTLE_S = 1.0


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
        self.requeues = Requeues(run, self.violations)

    def handlers(self) -> Mapping[str, Handler]:
        return {"deliver": self.delivery, "get": self.delivery, **self.requeues.handlers()}

    def delivery(self, ev: Event) -> None:
        self.requeues.delivery(ev)
        log = self.run.log
        if log is None:
            return  # unknown: another checker's
        drain = ev.process == DRAIN_PROCESS
        if log.count[ev.seq] and not drain:
            return  # not a first delivery: only the drain's order covers those
        queue = ev.queue
        assert queue is not None and ev.producer is not None and ev.msg is not None
        key = (ev.process, ev.producer, queue)
        latest = self.latest.get(key)
        if latest is None:
            self.latest[key] = [ev.seq, ev.time, ev.msg]
            return
        if ev.seq >= latest[0]:  # in order, or the drain got it again after a reconnect
            latest[0], latest[1], latest[2] = ev.seq, ev.time, ev.msg
            return
        timeline = self.run.timeline
        if drain:
            requeued = max(timeline.failover_at,
                           timeline.requeued_at.get(queue, float("-inf")) + DRAIN_SETTLE_S)
        else:
            requeued = max(timeline.requeued_at.get(queue, timeline.failover_at),
                           timeline.failover_at)
        if ((ev.redelivered and not drain) or requeued >= latest[1]
                or timeline.disconnected(log.name, log.sent[ev.seq], log.sent[latest[0]])):
            self.allowed += 1
            return
        what = ("got by the drain" if drain else f"first delivered to {ev.process}")
        self.violations.add(
            "reordered", ev.msg,
            f"{what} after a message its producer published later, with no requeue or "
            "failover in between", log.sent[ev.seq], ev.time, queue)
        self.pairs.append([ev.msg, latest[2]])

    def finish(self) -> Result:
        counts = {**self.requeues.finish(), "reordered_allowed": self.allowed}
        counts["reordered"] = len(self.violations)
        data = {"reordered": self.pairs} if self.pairs else {}
        return Result("ordering", not self.violations, counts,
                      self.violations.anomalies(self.run.timeline), data=data)
