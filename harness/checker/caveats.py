"""Why a confirmed message may be gone: the documented caveats, tested against the record.

A loss is a caveat only when one of these preconditions holds in the harness's record
(docs/cluster-design.md); otherwise it is a violation:

``unsynchronised-promotion``
    The master failed while holding the message and the mirror promoted in its place
    did not hold it: every surviving mirror had joined after the publish and no sync
    completed in between ("messages that only the master held will be lost").
``transient-no-replica``
    The message was transient (not persistent, or its queue not durable) and every
    replica that held it failed ("loss of non-persistent messages").
``master-down-at-drain``
    Its only copy is on the disk of a queue master that the record shows still down at
    the drain: unavailable rather than lost ("the loss of a node will render its queues
    unavailable").
``partition-split-brain``
    A network partition the nodes could detect (it lasted the detection time before it
    ended or a crash took the nodes it cut off) overlapped its life under ``ignore`` or
    ``autoheal`` partition handling ("it will not cope seamlessly with network
    partitions"); under ``autoheal`` also one healed up to AUTOHEAL_AFTER_HEAL_S
    before it was published, as the losing side serves until it restarts, but not for a
    message published through a node of the side that wins a cut in two: that side
    keeps what it confirmed.
``no-ack-in-flight``
    A no-ack consumer of its queue lost its connection, was cancelled by the broker, or
    its node or the queue's master failed, after the publish ("messages in flight to
    noAck consumers may never be received").
``pause-churn``
    Under ``pause_minority``, a fault that closes node-to-node connections again and
    again while it lasts (``limit_data``, ``reset_peer``) stood on links between every
    node of the queue after the publish. Each close parts two nodes that a third still
    hears: a partial partition, which pauses both (README, "Partitions"). So the nodes
    pause and resume one after another, each time their mirrors rejoin empty, and a
    master that pauses (or is taken for dead first) hands the queue to a mirror that
    rejoined after the publish: ``unsynchronised-promotion`` at moments the record
    cannot place.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from harness.checker.membership import (
    Change,
    Outcome,
    Replay,
    changes_from,
    master_at,
    replayed,
)
from harness.checker.record import detected, link_ends
from harness.checker.result import Fault
from harness.checker.timeline import Timeline
from harness.history.model import (
    CRASH_FAULTS,
    PARTITION_FAULT,
    SHUTDOWN_FAULTS,
    Header,
)

_SPLIT_BRAIN_HANDLING = frozenset({"ignore", "autoheal"})
# How long after a heal an autoheal loser may still confirm what its restart then
# drops: the nodes reconnect within a tick and the loser stops at once, so a few
# ticks of a loaded machine.
AUTOHEAL_AFTER_HEAL_S = 3.0
_BREAKING_FAULTS = CRASH_FAULTS | SHUTDOWN_FAULTS | {PARTITION_FAULT}
# Link faults that close the connections they stand on, again and again while in force.
_CLOSING_FAULTS = frozenset({"limit_data", "reset_peer"})


@dataclass(frozen=True)
class Verdict:
    """The rules' answer for one lost message."""

    caveat: str | None  # None: a violation
    explanation: str


class LossRules:
    def __init__(self, header: Header, timeline: Timeline) -> None:
        self.header = header
        self.timeline = timeline
        self.t0 = header.time
        faults = timeline.faults()
        self.changes: list[Change] = changes_from(faults, timeline.syncs, header.nodes,
                                                  header.partition_handling)
        self._change_times = [c.time for c in self.changes]
        # A cut the nodes never saw as a partition (it ended, or a crash took the nodes it
        # cut off, before failure detection) leaves no two sides to split.
        self._partitions = [f for f in faults if f.applied and f.kind == PARTITION_FAULT
                            and detected(f, faults)]
        # Under autoheal the losing side serves on after the heal until the nodes hear
        # each other again and it restarts.
        self._after_heal = (AUTOHEAL_AFTER_HEAL_S if header.partition_handling == "autoheal"
                            else 0.0)
        self._churns = [f for f in faults if f.applied and f.kind in _CLOSING_FAULTS
                        and header.partition_handling == "pause_minority"]
        self._breaks: dict[str, list[float]] = {}
        points = set(self._change_times)
        for f in faults:
            points.add(f.start)
            if f.end is not None:
                points.update((f.end, f.end + self._after_heal))
        for session in timeline.sessions:
            points.update(session.broken)
        self._boundaries = sorted(points)
        self._cache: dict[tuple[str, bool, float, int, str | None], Verdict] = {}

    def explain(self, queue: str, published: float, transient: bool, until: float,
                producer: str) -> Verdict:
        """Why a message ``producer`` published to ``queue`` at ``published`` and that
        was confirmed may be missing from the drain that ended at ``until``."""
        # Every rule compares ``published`` with record times only, so messages published
        # between the same two record times (through the same node) share the answer.
        via = (self.timeline.node_at(producer, published)
               if self.header.partition_handling == "autoheal" else None)
        key = (queue, transient, until, bisect.bisect_right(self._boundaries, published), via)
        verdict = self._cache.get(key)
        if verdict is None:
            verdict = self._cache[key] = self._explain(queue, published, transient, until,
                                                       via)
        return verdict

    def _explain(self, queue: str, published: float, transient: bool, until: float,
                 via: str | None) -> Verdict:
        outcome = self._replay(queue, published, transient, until)
        if outcome.cause is not None:
            assert outcome.change is not None
            return Verdict(outcome.cause, self._cause_text(outcome))
        partition = next((f for f in self._partitions if f.overlaps(
            published - self._after_heal, until) and via not in self._winners(f)), None)
        if partition is not None and self.header.partition_handling in _SPLIT_BRAIN_HANDLING:
            return Verdict("partition-split-brain",
                           f"partition {partition.id} overlapped its life under "
                           f"{self.header.partition_handling} partition handling")
        broken = next((t for t in self._broken_points(queue) if published < t <= until), None)
        if broken is not None:
            return Verdict("no-ack-in-flight",
                           f"a no-ack consumer of {queue} may have had it in flight when its "
                           f"connection or a node broke at {self._at(broken)}")
        members = set(self.header.queue(queue).members)
        churn = next((f for f in self._churns
                      if f.overlaps(published, until) and members <= link_ends(f)), None)
        if churn is not None:
            return Verdict("pause-churn",
                           f"{churn.kind} fault {churn.id} closed the links between every "
                           f"node of {queue} after the publish: under pause_minority each "
                           "close pauses the nodes at its ends, their mirrors rejoining "
                           "empty, until one that rejoined after the publish is promoted")
        if not outcome.holders and outcome.on_disk_of is not None:
            return Verdict("master-down-at-drain",
                           f"its only copy is on the disk of {outcome.on_disk_of}, the queue's "
                           "master, which the record shows down at the drain")
        if outcome.holders:
            text = ("confirmed but never delivered; by the record it should still be held by "
                    + ", ".join(outcome.holders))
        else:
            text = "confirmed but never delivered; no documented cause in the record"
        return Verdict(None, text)

    def _winners(self, partition: Fault) -> frozenset[str]:
        """Under autoheal, the side of a cut into two that keeps running after the heal
        (README, "Partitions": the side with more nodes; of two alike, the one with the
        first node by name): what it confirmed, it keeps. Empty for a cut of another
        shape, and under the other modes."""
        if self.header.partition_handling != "autoheal":
            return frozenset()
        nodes = set(self.header.nodes)
        cut = set(partition.targets) & nodes
        rest = nodes - cut
        grudge = partition.detail.get("grudge")
        if not cut or not rest or (grudge and not all(
                set(grudge.get(n, ())) == (rest if n in cut else cut) for n in nodes)):
            return frozenset()
        if len(cut) != len(rest):
            return frozenset(cut if len(cut) > len(rest) else rest)
        return frozenset(cut if min(nodes) in cut else rest)

    def _replay(self, queue: str, published: float, transient: bool, until: float) -> Outcome:
        replay = Replay(self.header.queue(queue), self.header.nodes)
        changes = self.changes
        split = bisect.bisect_right(self._change_times, published)
        for change in changes[:split]:
            replay.apply(change)
        replay.track(transient)
        for change in changes[split:]:
            if change.time > until:
                break
            replay.apply(change)
        return replay.outcome()

    def _cause_text(self, outcome: Outcome) -> str:
        change = outcome.change
        assert change is not None
        what = f"fault {change.fault.id} ({change.fault.kind})" if change.fault else "a change"
        if outcome.cause == "unsynchronised-promotion":
            return (f"the master failed at {self._at(change.time)} in {what} and the mirror "
                    "promoted in its place had joined after the publish, with no sync "
                    "completed since")
        return (f"a transient message whose last replica failed at {self._at(change.time)} "
                f"in {what}")

    def _broken_points(self, queue: str) -> list[float]:
        """Moments a no-ack delivery from ``queue`` may have been dropped in flight."""
        points = self._breaks.get(queue)
        if points is not None:
            return points
        masters = replayed(self.header, self.changes, queue).masters
        found: list[float] = []
        for session in self.timeline.sessions:
            if session.queue != queue or session.mode != "no-ack":
                continue
            found.extend(session.broken)
            end = session.end if session.end is not None else float("inf")
            for f in self.timeline.faults():
                if not f.applied or f.kind not in _BREAKING_FAULTS or not (
                        session.start <= f.start <= end):
                    continue
                master = master_at(masters, f.start)
                if session.node in f.targets or master in f.targets:
                    found.append(f.start)
        points = self._breaks[queue] = sorted(found)
        return points

    def _at(self, time: float) -> str:
        return f"{time - self.t0:.3f} s"

