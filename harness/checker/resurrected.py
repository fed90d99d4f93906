"""``resurrected``: a message delivered again after an ack the broker must have had.

An ack may be lost with the connection that carried it, or with a master that died
before passing it to its mirrors; then a redelivery is what the design allows. So a
delivery after ``ack ok`` is a violation only when, by the harness's record, within the
grace period G around the ack the acking connection stayed up, no failure took the
queue's master or the acker's node away (a kill, stop, pause or restart; a partition
that touches it, under ``pause_minority`` one that pauses it or that lasts long enough
to be detected, as the nodes' detections race; a paused acker's node holds the ack it
was given, and the master requeues what it delivered there when it hears the node
went), and no link fault stood on the ack's way: a partition that parts the acker's
node from the master, or another link fault touching either; a policy change of the
queue (or its restore) that may hand it over to a mirror. A short cut between the
master and some mirror excuses nothing: GM passes the ack on around it. A fault long
after the ack excuses nothing either: by then the master had passed it on. A
redelivery read by a connection that ends within G is not judged: it may be a stale
copy from before the ack, read off a socket the broker was closing.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping
from typing import NamedTuple

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.ledger import ACKED, ProducerLog
from harness.checker.membership import (
    POLICY,
    changes_from,
    master_at,
    possible_masters,
    replayed,
)
from harness.checker.protocol import Handler, Observer
from harness.checker.record import is_failure, is_link_fault, may_take_away, touches
from harness.checker.result import Fault, Result
from harness.checker.run import Run
from harness.history.model import PARTITION_FAULT, Event

GRACE_S = 2.0
_UNNAMED = 255


class Resurrected(Streaming):
    name = "resurrected"

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s

    def start(self, run: Run) -> Observer:
        return _Resurrected(run, self.grace_s)


class _Again(NamedTuple):
    msg: str
    queue: str
    acked: float
    acker: str | None  # None: not named (too many ackers); its connection is unknown
    acker_node: str | None
    time: float
    receiver: str
    sent: float


class _Resurrected:
    def __init__(self, run: Run, grace_s: float) -> None:
        self.run = run
        self.grace = grace_s
        self.t0 = run.header.time
        # per producer, by sequence, compact like the ledger: the latest ack's time
        # (float32 seconds since the run's start: millisecond precision for hours) and
        # who sent it (1 + an index into ``ackers``, _UNNAMED when there were too many
        # to name; 0: no ack of a delivery seen)
        self.acks: dict[str, tuple[array[float], bytearray]] = {}
        self.ackers: list[tuple[str, str | None]] = []
        self._acker_index: dict[tuple[str, str | None], int] = {}
        self._stored: dict[str, int] = {}  # process -> what its acks store, until it connects
        self.again: list[_Again] = []

    def handlers(self) -> Mapping[str, Handler]:
        return {"ack": self.ack, "nack": self.refuse, "reject": self.refuse,
                "deliver": self.delivery, "get": self.delivery, "connect": self.connect}

    def refuse(self, ev: Event) -> None:
        if not ev.requeue:
            self.ack(ev)  # discarded: settled like an ack

    def connect(self, ev: Event) -> None:
        self._stored.pop(ev.process, None)  # it may be on another node now

    def ack(self, ev: Event) -> None:
        log = self.run.log
        if log is None or ev.type != "ok" or not log.count[ev.seq]:
            return  # an ack of nothing delivered cannot be the broker's to keep
        self._settled(log, ev)

    def _settled(self, log: ProducerLog, ev: Event) -> None:
        """Keep when and by whom ``ev`` settled its message: an ack, a discard, or a
        delivery in no-ack mode (settled as it is sent)."""
        seq = ev.seq
        kept = self.acks.get(log.name)
        if kept is None:
            kept = self.acks[log.name] = (array("f"), bytearray())
        by = kept[1]
        if seq >= len(by):
            extra = len(log.flags) - len(by)  # the ledger's capacity, grown as it grows
            kept[0].frombytes(bytes(4 * extra))
            by.extend(bytes(extra))
        stored = self._stored.get(ev.process) if ev.node is None else None
        if stored is None:
            stored = self._acker(ev)
        kept[0][seq] = ev.time - self.t0
        by[seq] = stored

    def _acker(self, ev: Event) -> int:
        """What an ack by ``ev``'s sender stores: 1 + its index, or _UNNAMED."""
        node = ev.node or self.run.timeline.process_node.get(ev.process)
        key = (ev.process, node)
        index = self._acker_index.get(key)
        if index is None and len(self.ackers) < _UNNAMED - 1:
            index = self._acker_index[key] = len(self.ackers)
            self.ackers.append(key)
        stored = _UNNAMED if index is None else index + 1
        if ev.node is None:
            self._stored[ev.process] = stored
        return stored

    def delivery(self, ev: Event) -> None:
        log = self.run.log
        if log is None:
            return
        if log.flags[ev.seq] & ACKED:
            self._again(log, ev)
        if ev.type == "ok" and self.run.delivery_mode(ev) == "no-ack":
            self._settled(log, ev)

    def _again(self, log: ProducerLog, ev: Event) -> None:
        kept = self.acks.get(log.name)
        seq = ev.seq
        index = kept[1][seq] if kept is not None and seq < len(kept[1]) else 0
        if not index:
            return
        assert kept is not None and ev.msg is not None and ev.queue is not None
        acker, node = self.ackers[index - 1] if index != _UNNAMED else (None, None)
        self.again.append(_Again(ev.msg, ev.queue, self.t0 + kept[0][seq], acker, node,
                                 ev.time, ev.process, log.sent[seq]))

    def finish(self) -> Result:
        run = self.run
        timeline = run.timeline
        faults = timeline.faults()
        changes = changes_from(faults, timeline.syncs, run.header.nodes,
                               run.header.partition_handling)
        replays = {q: replayed(run.header, changes, q) for q in {a.queue for a in self.again}}
        violations = Grouper()
        allowed = 0
        g = self.grace
        nodes, handling = run.header.nodes, run.header.partition_handling
        for a in self.again:
            replay = replays[a.queue]
            master = master_at(replay.masters, a.acked)
            if (a.acker is None or timeline.disconnected(a.acker, a.acked, a.acked + g)
                    or timeline.disconnected(a.receiver, a.time, a.time + g)
                    or any(is_failure(f) and f.overlaps(a.acked - g, a.acked + g) and any(
                        may_take_away(f, node, nodes, handling, faults) for node in (
                            possible_masters(replay, a.acked)
                            | possible_masters(replay, f.start)
                            | ({a.acker_node} if a.acker_node is not None else set())))
                        for f in faults)
                    or any(is_link_fault(f) and f.overlaps(a.acked - g, a.acked + g)
                           and _on_the_way(f, a.acker_node, master) for f in faults)
                    # a policy leaving the master's node out hands the queue over to a
                    # synchronised mirror, which requeues what it had not heard was acked
                    or any(c.kind == POLICY and c.applies_to(a.queue)
                           and abs(c.time - a.acked) <= g for c in changes)
                    or any(down < a.time and back > a.acked
                           for down, back in replays[a.queue].outages)):
                allowed += 1
                continue
            violations.add("resurrected", a.msg,
                           f"delivered to {a.receiver} {a.time - a.acked:.3f} s after {a.acker} "
                           f"acked it, with the acking connection up and the master "
                           f"({master}) unharmed for {g:g} s after the ack",
                           a.sent, a.time, a.queue)
        counts = {"resurrected": len(violations), "resurrected_allowed": allowed}
        return Result(Resurrected.name, not violations, counts,
                      violations.anomalies(timeline))


def _on_the_way(fault: Fault, acker_node: str | None, master: str) -> bool:
    """Whether a link fault may have held up an ack from ``acker_node`` to ``master``."""
    grudge = fault.detail.get("grudge")
    if fault.kind != PARTITION_FAULT or not grudge or acker_node is None:
        return touches(fault, master) or touches(fault, acker_node)
    return acker_node in grudge.get(master, ()) or master in grudge.get(acker_node, ())
