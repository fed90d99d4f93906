"""Broker cancels (``cancel info``) against the consumers' ``x-cancel-on-ha-failover``.

``cancel-missing``: a consumer that asked for it stayed open across a change of its
queue's master (the membership replay of the harness's record) and was not cancelled
within the bound. The bound runs from the change, or from the first ``promotion``
report of the queue soon after it when there is one (the broker detects a failure
seconds after the fault starts); a missing report never excuses a missing cancel. Not
judged: sessions that end before the bound, histories that end before it, and sessions
whose own node a fault took away in that time (a paused node sends nothing): a crash or
stop of it, or under ``pause_minority`` a partition that pauses it (a node on the side
that keeps running is judged), or any partition touching it under the other modes. A
degraded link (latency, a black-hole on one link) takes no node away.

``cancel-unexpected``: a consumer that did not ask for it was cancelled while its queue
existed: not while the record shows the queue down (its master failed with no mirror
allowed to take over), nor near a partition under ``ignore``/``autoheal``, whose
split views the replay does not model.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.membership import Replay, changes_from, master_changes, replayed
from harness.checker.protocol import Handler, Observer
from harness.checker.record import is_failure, takes_away
from harness.checker.result import Fault, Result
from harness.checker.run import Run
from harness.history.model import PARTITION_FAULT, Event

BOUND_S = 10.0
_UNMODELLED_PARTITIONS = frozenset({"ignore", "autoheal"})


class CancelMissing(Streaming):
    name = "cancel-missing"

    def __init__(self, bound_s: float = BOUND_S) -> None:
        self.bound_s = bound_s

    def start(self, run: Run) -> Observer:
        return _Missing(run, self.bound_s)


class CancelUnexpected(Streaming):
    name = "cancel-unexpected"

    def __init__(self, bound_s: float = BOUND_S) -> None:
        self.bound_s = bound_s

    def start(self, run: Run) -> Observer:
        return _Unexpected(run, self.bound_s)


class _Judge:
    """What both checks read: the replay of each consumed queue, after the pass."""

    def __init__(self, run: Run, bound_s: float) -> None:
        self.run = run
        self.bound = bound_s

    def replays(self, queues: set[str]) -> tuple[list[Fault], dict[str, Replay]]:
        timeline, header = self.run.timeline, self.run.header
        faults = [f for f in timeline.faults() if f.applied]
        changes = changes_from(faults, timeline.syncs, header.nodes, header.partition_handling)
        return faults, {q: replayed(header, changes, q) for q in queues}


class _Missing(_Judge):
    def __init__(self, run: Run, bound_s: float) -> None:
        super().__init__(run, bound_s)
        self.promotions: dict[str, list[float]] = {}  # queue -> promotion report times

    def handlers(self) -> Mapping[str, Handler]:
        return {"promotion": self.promotion}

    def promotion(self, ev: Event) -> None:
        if ev.queue is not None:
            self.promotions.setdefault(ev.queue, []).append(ev.time)

    def finish(self) -> Result:
        timeline = self.run.timeline
        sessions = [s for s in timeline.sessions if s.cancel_on_failover]
        faults, replays = self.replays({s.queue for s in sessions})
        missing = Grouper()
        header = self.run.header
        last = self.run.last if self.run.last is not None else float("-inf")
        for s in sessions:
            for changed, before, after in master_changes(replays[s.queue].masters):
                if not s.start < changed or (s.end is not None and s.end <= changed):
                    continue
                reported = [t for t in self.promotions.get(s.queue, ())
                            if changed <= t <= changed + self.bound]
                deadline = (reported[0] if reported else changed) + self.bound
                end = s.end if s.end is not None else float("inf")
                if end <= deadline or last < deadline or any(
                        is_failure(f) and f.overlaps(changed, deadline)
                        and takes_away(f, s.node, header.nodes, header.partition_handling)
                        for f in faults):
                    continue
                missing.add("cancel-missing", s.process,
                            f"{s.process} asked for x-cancel-on-ha-failover and stayed "
                            f"connected, but was not cancelled within {self.bound:g} s of "
                            f"{s.queue}'s master moving from {before} to {after}",
                            changed, deadline, s.queue)
                break  # the session is judged once
        return Result(CancelMissing.name, not missing, {"cancel_missing": len(missing)},
                      missing.anomalies(timeline))


class _Unexpected(_Judge):
    def __init__(self, run: Run, bound_s: float) -> None:
        super().__init__(run, bound_s)
        self.unasked: list[tuple[float, str, str]] = []  # cancels of sessions without it

    def handlers(self) -> Mapping[str, Handler]:
        return {"cancel": self.cancel}

    def cancel(self, ev: Event) -> None:
        if ev.type != "info" or ev.queue is None:
            return
        session = self.run.timeline.open_session(ev.process, ev.queue)
        if session is not None and session.cancel_on_failover is False:
            self.unasked.append((ev.time, ev.process, ev.queue))

    def finish(self) -> Result:
        faults, replays = self.replays({queue for _, _, queue in self.unasked})
        split_views = self.run.header.partition_handling in _UNMODELLED_PARTITIONS
        unexpected = Grouper()
        for time, process, queue in self.unasked:
            since = time - self.bound
            down = any(begin <= time and back > since
                       for begin, back in replays[queue].outages)
            if down or (split_views and any(f.kind == PARTITION_FAULT and f.overlaps(since, time)
                                            for f in faults)):
                continue
            unexpected.add("cancel-unexpected", process,
                           f"{process} did not ask for x-cancel-on-ha-failover but the broker "
                           f"cancelled it while {queue} existed", since, time, queue)
        return Result(CancelUnexpected.name, not unexpected,
                      {"cancel_unexpected": len(unexpected)},
                      unexpected.anomalies(self.run.timeline))
