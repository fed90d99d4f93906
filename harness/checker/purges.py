"""``purged``: what a purge removed is never delivered again.

Purgers (``purge`` lines, docs/history-format.md) purge a queue that only publishers
use. A message of that queue confirmed before a purge's ``invoke`` and not delivered
before it was ready then, so a purge that answered ``ok`` removed it: on the master,
and on every mirror, to which the master broadcasts the purge. A later delivery of it
(by the final drain, from a mirror promoted meanwhile or by the drain by promotion) is
``resurrected``. A purge is no atomic step across nodes: a sighting is only counted
(``purged_allowed``) when a fault other than a sync was in force between the purge's
invoke and GRACE_S after its answer (a master that died before its broadcast reached
the mirrors, a link that dropped it). ``lost`` excuses what a purge may have removed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.ledger import CONFIRMED
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event

KIND = "resurrected"
GRACE_S = 2.0  # a purge's broadcast reaches every mirror well within this


@dataclass(frozen=True)
class _Purge:
    queue: str
    start: float
    end: float


class Purged(Streaming):
    name = "purged"

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s

    def start(self, run: Run) -> Observer:
        return _Purged(run, self.grace_s)


class _Purged:
    def __init__(self, run: Run, grace_s: float) -> None:
        self.run = run
        self.grace = grace_s
        # purger -> (invoke time, the messages its purge must remove)
        self.asked: dict[str, tuple[float, list[tuple[str, int]]]] = {}
        self.removed: dict[tuple[str, int], _Purge] = {}  # message -> the purge that did
        self.sightings: list[tuple[tuple[str, int], float, _Purge]] = []

    def handlers(self) -> Mapping[str, Handler]:
        return {"purge": self.purge, "deliver": self.delivered, "get": self.delivered}

    def purge(self, ev: Event) -> None:
        queue = ev.queue
        assert queue is not None
        if ev.type == "invoke":
            ledger = self.run.ledger
            ready = [(log.name, seq) for log, seq in ledger.messages(CONFIRMED)
                     if not log.count[seq] and ledger.queues[log.queue[seq]] == queue]
            self.asked[ev.process] = (ev.time, ready)
            return
        start, ready = self.asked.pop(ev.process, (ev.time, []))
        if ev.type == "ok":
            purge = _Purge(queue, start, ev.time)
            for key in ready:
                self.removed.setdefault(key, purge)

    def delivered(self, ev: Event) -> None:
        if self.run.log is None or ev.type != "ok":
            return
        purge = self.removed.get((self.run.log.name, ev.seq))
        if purge is not None:
            self.sightings.append(((self.run.log.name, ev.seq), ev.time, purge))

    def finish(self) -> Result:
        timeline = self.run.timeline
        t0 = self.run.header.time
        found, allowed = Grouper(), 0
        for (producer, seq), time, purge in self.sightings:
            if any(f.applied and f.kind != "sync"
                   for f in timeline.faults_during(purge.start, purge.end + self.grace)):
                allowed += 1
                continue
            found.add(KIND, f"{producer}-{seq}",
                      f"confirmed before a purge of {purge.queue} that answered at "
                      f"{purge.end - t0:.3f} s, with no fault near it, yet delivered again",
                      purge.start, time, purge.queue)
        violations = found.anomalies(timeline)
        counts = {"purged_resurrected": sum(len(a.messages) for a in violations),
                  "purged_allowed": allowed, "purged": len(self.removed)}
        return Result("purged", not violations, counts, violations, [], {})
