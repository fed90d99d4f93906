"""``undeleted``: a queue the workload deleted stays deleted on every node.

Churners (``declare`` and ``delete`` lines, docs/history-format.md) make and delete
queues of their own. A queue whose ``delete ok`` came more than GRACE_S before a
``cluster-state ok`` line, with no ``declare`` of its name since, must not be among that
line's queues: a node still listing it never applied the delete; one listing it again
took back a stale record, e.g. the one a node that was down at the delete recovered
from its disk. Neither a declare nor a delete is atomic across nodes, so a sighting is
only counted (``undeleted_allowed``) when a failure could take away the node that
answered the delete around that moment, or a link fault other than a partition touched
it (a crash before the deletion reached its peers, the side of a partition whose
changes the heal discards, a tombstone lost on a reset link and then with the app's
restart after a pause); or when either disturbed the node that declared the queue at
the declare (it never reached the node that later answered the delete, which deleted
nothing, and the declaring node brings the queue back from its disk). A declaring node
that fails later, after its declare reached its peers, excuses nothing: that is the
node a kept tombstone must stop from bringing the queue back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.record import (
    DETECTED_S,
    is_failure,
    is_link_fault,
    may_take_away,
    touches,
)
from harness.checker.result import Anomaly, Fault, Result
from harness.checker.run import Run
from harness.history.model import PARTITION_FAULT, Event

KIND = "undeleted"
GRACE_S = 2.0  # a deletion reaches every running node well within this


@dataclass(frozen=True)
class _Deleted:
    time: float
    node: str | None  # the node that answered delete-ok
    declared: float  # when the declare before it began
    declarer: str | None  # the node asked to declare it


@dataclass(frozen=True)
class _Sighting:
    queue: str
    node: str
    phase: str
    time: float
    deleted: _Deleted


class Undeleted(Streaming):
    name = KIND

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s

    def start(self, run: Run) -> Observer:
        return _Undeleted(run, self.grace_s)


class _Undeleted:
    def __init__(self, run: Run, grace_s: float) -> None:
        self.run = run
        self.grace = grace_s
        self.declared: dict[str, tuple[float, str | None]] = {}  # queue -> latest declare
        self.deleted: dict[str, _Deleted] = {}  # queue -> its latest delete, until declared
        self.sightings: list[_Sighting] = []

    def handlers(self) -> Mapping[str, Handler]:
        return {"declare": self.declare, "delete": self.delete, "cluster-state": self.state}

    def declare(self, ev: Event) -> None:
        if ev.type == "invoke" and ev.queue is not None:
            self.deleted.pop(ev.queue, None)
            self.declared[ev.queue] = (ev.time, ev.node)

    def delete(self, ev: Event) -> None:
        if ev.type == "ok" and ev.queue is not None:
            declared, declarer = self.declared.get(ev.queue, (self.run.header.time, None))
            self.deleted[ev.queue] = _Deleted(ev.time, ev.node, declared, declarer)

    def state(self, ev: Event) -> None:
        queues = ev.get("queues")
        if ev.type != "ok" or not isinstance(queues, Mapping):
            return
        node, phase = ev.node or ev.process, str(ev.get("phase"))
        for queue in queues:
            deleted = self.deleted.get(queue)
            if deleted is not None and ev.time - deleted.time > self.grace:
                self.sightings.append(_Sighting(queue, node, phase, ev.time, deleted))

    def finish(self) -> Result:
        faults = self.run.timeline.faults()
        nodes, handling = self.run.header.nodes, self.run.header.partition_handling
        t0 = self.run.header.time
        grouped: dict[tuple[str, str], list[_Sighting]] = {}
        allowed = 0
        def disturbed(f: Fault, node: str | None, begin: float, until: float) -> bool:
            return f.overlaps(begin, until) and (
                (is_failure(f) and may_take_away(f, node, nodes, handling, faults))
                or (is_link_fault(f) and f.kind != PARTITION_FAULT and touches(f, node)))

        for s in self.sightings:
            d = s.deleted
            if any(disturbed(f, d.node, d.time - DETECTED_S, d.time + self.grace)
                   or disturbed(f, d.declarer, d.declared, d.declared + self.grace)
                   for f in faults):
                allowed += 1
                continue
            grouped.setdefault((s.queue, s.phase), []).append(s)
        violations = []
        for (queue, phase), seen in grouped.items():
            d = seen[0].deleted
            listing = sorted({s.node for s in seen})
            violations.append(Anomaly(
                KIND, listing,
                f"deleted at {d.time - t0:.3f} s (delete-ok from {d.node or 'an unnamed node'}),"
                f" never declared again, yet at {phase} ({seen[0].time - t0:.3f} s) "
                f"{', '.join(listing)} still list{'s' if len(listing) == 1 else ''} it",
                self.run.timeline.faults_during(d.time, seen[0].time), queue))
        counts = {KIND: len(violations), f"{KIND}_allowed": allowed}
        return Result(KIND, not violations, counts, violations, [], {})
