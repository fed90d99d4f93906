"""Everything in a history that is not per-message state: the fault record, consumer
sessions, drains, requeue points and the nodes' reports. It is small (it grows with
faults and connections, not with messages) and is read by the rules after the pass."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness.checker.result import Fault
from harness.history.errors import InconsistentHistory
from harness.history.model import CRASH_FAULTS, PARTITION_FAULT, SHUTDOWN_FAULTS, Event

_DETAIL_KEYS = ("grudge", "links", "attributes", "definition", "pattern", "queue",
                "cancelled", "forgotten_by")
SYNCHRONISED = "synchronised"  # a completed sync-end's outcome
# a master's report of a mirror synchronised by draining (a node-event)
MIRROR_SYNCHRONISED = "mirror_synchronised"
# faults after which the broker requeues unacked messages (consumers lose their channel
# or the queue fails over), so later deliveries may legitimately be out of order
_REQUEUE_FAULTS = CRASH_FAULTS | SHUTDOWN_FAULTS | {PARTITION_FAULT}


@dataclass
class _OpenFault:
    id: str
    kind: str
    targets: tuple[str, ...]
    start: float
    applied: bool
    detail: dict[str, Any]
    end: float | None = None
    heal_failed: bool = False

    def freeze(self) -> Fault:
        return Fault(self.id, self.kind, self.targets, self.start, self.end, self.applied,
                     self.heal_failed, self.detail)


@dataclass
class Session:
    """A consumer on one queue, from its consume to its cancel or disconnect."""

    process: str
    queue: str
    mode: str
    node: str | None
    start: float
    end: float | None = None
    prefetch: int | None = None  # from ``consume ok``; None or 0: unlimited or unknown
    cancel_on_failover: bool | None = None  # None: the line did not say
    # moments its deliveries in flight may have been dropped: the connection was lost or
    # the broker cancelled it (the record's own view; node faults are added by the rules)
    broken: list[float] = field(default_factory=list)


class Timeline:
    def __init__(self, source: str) -> None:
        self.source = source
        self._faults: dict[str, _OpenFault] = {}
        self._pending: dict[str, float] = {}  # fault id -> invoke time
        self.sessions: list[Session] = []
        self._open_sessions: dict[str, list[Session]] = {}
        self._consumed: dict[str, set[str]] = {}  # process -> queues it took messages from
        self.process_node: dict[str, str] = {}
        self.connected: dict[str, list[tuple[float, str]]] = {}  # process -> (when, node)
        self.disconnects: dict[str, list[float]] = {}  # process -> its connection ends
        self.requeued_at: dict[str, float] = {}  # queue -> latest requeue point
        self.failover_at = float("-inf")  # latest fault after which anything may requeue
        self.drained: dict[str | None, float] = {}  # queue (None: all) -> drain ok time
        self.drain_started: float | None = None
        self.drain_failed: list[tuple[str | None, str]] = []
        # node-reported completed syncs: (time, queue, the mirror's node, or None for
        # every mirror); a mirror synchronised by draining is reported on its own
        self.syncs: list[tuple[float, str, str | None]] = []
        # queue -> until when a purge of it may have removed what was published before
        # (a purge with no answer: the end of the run)
        self.purged_until: dict[str, float] = {}
        self.node_reports: Counter[str] = Counter()
        self._frozen: list[Fault] | None = None
        self._starts: list[float] = []
        self._ends: list[float] = []
        self._window_cache: dict[tuple[int, int], tuple[Fault, ...]] = {}

    # -- recording (called once per event by the run) ---------------------------------

    def fault_start(self, ev: Event) -> None:
        fid = ev.fault_id
        assert fid is not None and ev.fault is not None
        if ev.type == "invoke":
            self._pending.setdefault(fid, ev.time)
            return
        if fid in self._faults:
            raise InconsistentHistory(self.source, ev.line, "fault_id",
                                      "an id not used by an earlier fault", fid)
        self._frozen = None
        start = self._pending.pop(fid, ev.time)  # the fault may act from its invoke on
        detail = {k: ev.get(k) for k in _DETAIL_KEYS if ev.get(k) is not None}
        applied = ev.type != "fail"
        self._faults[fid] = _OpenFault(fid, ev.fault, ev.targets, start, applied, detail)
        if applied and ev.fault in _REQUEUE_FAULTS:
            self.failover_at = ev.time

    def fault_end(self, ev: Event) -> None:
        fault = self._faults.get(ev.fault_id or "")
        if fault is None:
            raise InconsistentHistory(self.source, ev.line, "fault_id",
                                      "the id of a fault started earlier", ev.fault_id)
        if ev.type == "invoke":
            return
        if fault.end is not None or fault.heal_failed:
            raise InconsistentHistory(self.source, ev.line, "fault_id",
                                      "a fault that has not ended yet", ev.fault_id)
        self._frozen = None
        if ev.type == "fail":
            fault.heal_failed = True  # still in force: the heal could not be verified
            return
        fault.end = ev.time
        if ev.get("definition") is not None:
            fault.detail["restored"] = ev.get("definition")
        if fault.applied and fault.kind in _REQUEUE_FAULTS:
            self.failover_at = ev.time

    def consume(self, ev: Event) -> None:
        if ev.type != "ok":
            return
        assert ev.queue is not None and ev.mode is not None
        node = ev.node or self.process_node.get(ev.process)
        prefetch, cancel = ev.get("prefetch"), ev.get("cancel_on_failover")
        session = Session(ev.process, ev.queue, ev.mode, node, ev.time,
                          prefetch=prefetch if type(prefetch) is int else None,
                          cancel_on_failover=cancel if type(cancel) is bool else None)
        self.sessions.append(session)
        self._open_sessions.setdefault(ev.process, []).append(session)

    def cancel(self, ev: Event) -> None:
        if ev.type == "invoke" or ev.type == "fail":
            return
        sessions = self._open_sessions.get(ev.process, [])
        for session in [s for s in sessions if s.queue == ev.queue]:
            if ev.type == "info":  # cancelled by the broker (e.g. on failover)
                session.broken.append(ev.time)
            session.end = ev.time
            sessions.remove(session)

    def connect(self, ev: Event) -> None:
        if ev.node is not None:
            self.process_node[ev.process] = ev.node
            self.connected.setdefault(ev.process, []).append((ev.time, ev.node))

    def disconnect(self, ev: Event) -> None:
        if ev.type == "invoke":
            return
        self.disconnects.setdefault(ev.process, []).append(ev.time)
        for session in self._open_sessions.pop(ev.process, []):
            if ev.type != "ok":
                session.broken.append(ev.time)
            session.end = ev.time
        for queue in self._consumed.get(ev.process, ()):
            self.requeued_at[queue] = ev.time  # closing a channel requeues its unacked

    def lost_no_ack_get(self, ev: Event) -> None:
        """A no-ack ``basic.get`` whose answer never came: a one-moment broken session."""
        assert ev.queue is not None
        node = ev.node or self.process_node.get(ev.process)
        self.sessions.append(Session(ev.process, ev.queue, "no-ack", node, ev.time, ev.time,
                                     broken=[ev.time]))

    def consumed(self, ev: Event) -> None:
        queue = ev.queue
        assert queue is not None
        seen = self._consumed.get(ev.process)
        if seen is None:
            seen = self._consumed[ev.process] = set()
        if queue not in seen:
            seen.add(queue)
            if ev.node is not None:
                self.process_node.setdefault(ev.process, ev.node)

    def requeue(self, ev: Event) -> None:
        if ev.requeue and ev.type != "fail":
            if ev.op == "recover":
                for queue in self._consumed.get(ev.process, ()):
                    self.requeued_at[queue] = ev.time
            elif ev.queue is not None:
                self.requeued_at[ev.queue] = ev.time

    def purge(self, ev: Event) -> None:
        assert ev.queue is not None
        if ev.type == "ok" or ev.type == "info":
            until = ev.time if ev.type == "ok" else float("inf")
            self.purged_until[ev.queue] = max(until, self.purged_until.get(ev.queue, until))

    def drain(self, ev: Event) -> None:
        if ev.type == "invoke":
            if self.drain_started is None:
                self.drain_started = ev.time
        elif ev.type == "ok":
            self.drained[ev.queue] = ev.time
        else:
            self.drain_failed.append((ev.queue, str(ev.get("error", ev.type))))

    def node_report(self, ev: Event) -> None:
        self.node_reports[ev.op] += 1
        # a cancelled sync says outcome "cancelled" (docs/history-format.md)
        if ev.op == "sync-end" and ev.get("outcome", SYNCHRONISED) == SYNCHRONISED \
                and ev.queue is not None:
            self.syncs.append((ev.time, ev.queue, None))
        elif ev.get("event") == MIRROR_SYNCHRONISED and ev.queue is not None:
            member = str(ev.get("member", ""))
            self.syncs.append((ev.time, ev.queue, member.partition("/")[0]))

    # -- reading (after the pass) ------------------------------------------------------

    def faults(self) -> list[Fault]:
        """Every fault in start order, ends as recorded so far."""
        if self._frozen is None:
            self._frozen = sorted((f.freeze() for f in self._faults.values()),
                                  key=lambda f: f.start)
            self._starts = [f.start for f in self._frozen]
            self._ends = sorted(f.end for f in self._frozen if f.end is not None)
            self._window_cache.clear()
        return self._frozen

    def faults_during(self, begin: float, until: float) -> tuple[Fault, ...]:
        """Faults in force at some moment in (begin, until]: the context of an anomaly
        seen at ``until`` for a message published at ``begin``."""
        faults = self.faults()
        hi = bisect.bisect_right(self._starts, until)
        key = (hi, bisect.bisect_right(self._ends, begin))
        cached = self._window_cache.get(key)
        if cached is None:
            cached = tuple(f for f in faults[:hi] if f.overlaps(begin, until))
            self._window_cache[key] = cached
        return cached

    def open_session(self, process: str, queue: str) -> Session | None:
        """``process``'s consumer session on ``queue`` that is open now, if any."""
        for session in self._open_sessions.get(process, ()):
            if session.queue == queue:
                return session
        return None

    def node_at(self, process: str, time: float) -> str | None:
        """The node ``process`` last connected to at or before ``time``, if known."""
        connects = self.connected.get(process, [])
        i = bisect.bisect_right(connects, (time, "\uffff"))
        return connects[i - 1][1] if i else None

    def disconnected(self, process: str, begin: float, until: float) -> bool:
        """Whether ``process``'s connection ended at some moment in [begin, until]."""
        return any(begin <= t <= until for t in self.disconnects.get(process, ()))

    def drain_time(self, queue: str) -> float | None:
        """When ``queue`` was last drained to empty (by a drain of it or of all queues)."""
        times = [t for t in (self.drained.get(queue), self.drained.get(None)) if t is not None]
        return max(times) if times else None
