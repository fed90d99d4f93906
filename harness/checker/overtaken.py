"""``overtaken``: a confirmed message passed over while later ones keep being delivered.

A queue hands out its messages in order, and a requeued one goes back to its place: so
once a consumer gets the first delivery of a producer's message, every earlier message
of that producer on that queue, published on the same connection, has been delivered
or is on its way. One still missing was delivered into a channel that never got it (a
master or a link died in between) and must come back when the broker requeues that
delivery: at promotion, when it sees the channel or node go, or when the fault ends.

So the check: message M of queue Q is first *overtaken* at T1 (a later message of its
producer is first delivered to a consumer) and is itself first delivered only at TM.
Q1 is the first moment from T1 on with no fault of the record in force. If some later
message of its producer is still first delivered after Q1 + ``BOUND_S`` and before TM,
the broker kept M from every consumer that whole time while it served what came after:
a violation. A broker that never requeues what the old master had delivered (a
promotion that keeps those deliveries pending for a channel that never got them) gives
such a message back only when that channel closes, at the end of the run.

A message given back is held to the same order: one delivered in ack mode and still
unsettled when its receiver closed its connection (``disconnect ok``, a close it chose,
so the broker hears it at once) or asked for ``basic.recover``, must go back to its place
in the queue. If from then on later messages of its producer are still first delivered
from that queue for more than ``BOUND_S`` after every fault had ended, while it is not
delivered again, the broker kept it back (a close that requeued nothing: only a later
promotion gives it back).

Judged only for messages that were confirmed and delivered in the end (a message never
delivered is ``lost``'s), and excused as a caveat when the record would excuse its
loss at that moment (caveats.py): a copy that may have been lost with a failed master
may reappear when that node recovers. The final drain's gets decide nothing here (the
ordering checker judges the drain's order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.checker.anomalies import Grouper
from harness.checker.caveats import LossRules
from harness.checker.compose import Streaming
from harness.checker.ledger import CONFIRMED, FAILED, TRANSIENT, ProducerLog, message_id
from harness.checker.ordering import DRAIN_PROCESS
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Fault, Result
from harness.checker.run import Run
from harness.history.model import Event

BOUND_S = 5.0  # generous: a requeue after a fault is at once; the machine is shared


class Overtaken(Streaming):
    name = "overtaken"

    def __init__(self, bound_s: float = BOUND_S) -> None:
        self.bound_s = bound_s

    def start(self, run: Run) -> Observer:
        return _Overtaken(run, self.bound_s)


@dataclass
class _Passed:
    """An undelivered message and the first deliveries of later ones since."""

    first: float  # first overtaken
    last: float  # latest overtaken
    by: int  # the seq that overtook it last


@dataclass
class _GivenBack:
    """A delivery its receiver gave back unsettled, and what overtook it since."""

    at: float
    receiver: str
    passed: _Passed | None = None


@dataclass(frozen=True)
class _Late:
    log: ProducerLog
    seq: int
    queue: str
    passed: _Passed
    delivered: float
    given_back: _GivenBack | None = None


class _Overtaken:
    def __init__(self, run: Run, bound_s: float) -> None:
        self.run = run
        self.bound = bound_s
        # (producer, queue index) -> the next seq not yet looked at
        self.scanned: dict[tuple[str, int], int] = {}
        self.passed: dict[tuple[str, int], dict[int, _Passed]] = {}
        self.settled: dict[tuple[str, int], dict[int, _Passed]] = {}  # overtaken no more
        self.late: list[_Late] = []
        # receiver -> its ack-mode deliveries not yet settled: message id -> (log, seq);
        # a message delivered again is no longer held by whoever had it before
        self.held: dict[str, dict[str, tuple[ProducerLog, int]]] = {}
        self.holder: dict[str, str] = {}
        # (producer, queue index) -> seq -> a delivery given back, until it comes again
        self.given_back: dict[tuple[str, int], dict[int, _GivenBack]] = {}

    def handlers(self) -> Mapping[str, Handler]:
        return {"deliver": self.delivery, "get": self.delivery, "ack": self.settle,
                "nack": self.settle, "reject": self.settle, "disconnect": self.give_back,
                "recover": self.give_back}

    def settle(self, ev: Event) -> None:
        if ev.type == "ok" and ev.msg is not None:
            self._release(ev.msg)

    def give_back(self, ev: Event) -> None:
        """A close the receiver chose, or a recover: what it held goes back to its place.
        A lost connection ends what it held too, but when the broker notices is for
        failure detection to say: nothing is judged then."""
        if ev.type == "invoke" or (ev.op == "recover" and (ev.type != "ok"
                                                           or ev.requeue is False)):
            return
        held = self.held.pop(ev.process, {})
        for msg in held:
            del self.holder[msg]
        if ev.type != "ok":
            return
        for log, seq in held.values():
            key = (log.name, log.queue[seq])
            self.given_back.setdefault(key, {})[seq] = _GivenBack(ev.time, ev.process)

    def delivery(self, ev: Event) -> None:
        log = self.run.log
        if log is None:
            return
        seq, index = ev.seq, log.queue[ev.seq]
        key = (log.name, index)
        self._came_again(ev, log, key)
        if log.count[seq]:
            return  # not a first delivery
        waiting = self.passed.get(key)
        if waiting is None:
            waiting = self.passed[key] = {}
        passed = waiting.pop(seq, None) or self.settled.get(key, {}).pop(seq, None)
        if passed is not None and passed.last - passed.first > self.bound:
            self.late.append(_Late(log, seq, self.run.ledger.queues[index], passed, ev.time))
        if ev.process == DRAIN_PROCESS:
            return
        flags, count, queues = log.flags, log.count, log.queue
        for earlier in range(self.scanned.get(key, 0), seq):
            if (queues[earlier] == index and not count[earlier]
                    and flags[earlier] and not flags[earlier] & FAILED):
                waiting[earlier] = _Passed(ev.time, ev.time, seq)
        if seq >= self.scanned.get(key, 0):
            self.scanned[key] = seq + 1
        sent, timeline = log.sent, self.run.timeline
        stale = []
        for earlier, item in waiting.items():
            if earlier >= seq:
                continue
            if timeline.disconnected(log.name, sent[earlier], sent[seq]):
                stale.append(earlier)  # published before a reconnect: no order to keep
            else:
                item.last, item.by = ev.time, seq
        for earlier in stale:  # nothing later can overtake it now: judge it when it comes
            self.settled.setdefault(key, {})[earlier] = waiting.pop(earlier)
        for earlier, given in self.given_back.get(key, {}).items():
            if (earlier < seq and given.at < ev.time
                    and not timeline.disconnected(log.name, sent[earlier], sent[seq])):
                if given.passed is None:
                    given.passed = _Passed(ev.time, ev.time, seq)
                else:
                    given.passed.last, given.passed.by = ev.time, seq

    def _came_again(self, ev: Event, log: ProducerLog, key: tuple[str, int]) -> None:
        """A delivery of a message given back ends its wait; one that an ack-mode
        receiver (not the drain) got is held until settled."""
        given = self.given_back.get(key, {}).pop(ev.seq, None)
        if (given is not None and given.passed is not None
                and given.passed.last - given.passed.first > self.bound):
            self.late.append(_Late(log, ev.seq, self.run.ledger.queues[key[1]], given.passed,
                                   ev.time, given))
        if ev.msg is None:
            return
        self._release(ev.msg)
        if ev.process != DRAIN_PROCESS and self.run.delivery_mode(ev) == "ack":
            self.held.setdefault(ev.process, {})[ev.msg] = (log, ev.seq)
            self.holder[ev.msg] = ev.process

    def _release(self, msg: str) -> None:
        holder = self.holder.pop(msg, None)
        if holder is not None:
            del self.held[holder][msg]

    def finish(self) -> Result:
        run = self.run
        timeline = run.timeline
        faults = [f for f in timeline.faults() if f.applied]
        rules = LossRules(run.header, timeline)
        violations, caveats = Grouper(), Grouper()
        for late in self.late:
            log, seq, passed = late.log, late.seq, late.passed
            if not log.flags[seq] & CONFIRMED:
                continue
            deadline = _quiet_from(passed.first, faults) + self.bound
            if passed.last <= deadline:
                continue
            verdict = rules.explain(late.queue, log.sent[seq],
                                    bool(log.flags[seq] & TRANSIENT), passed.last, log.name)
            group = violations if verdict.caveat is None else caveats
            given = late.given_back
            how = "" if given is None else (
                f"given back unsettled by {given.receiver} at {given.at:.3f} s, ")
            explanation = verdict.explanation if verdict.caveat is not None else (
                f"{how}later messages of its producer were still first delivered from "
                f"{late.queue} more than {self.bound:g} s after every fault had ended, "
                "while it was not; it came only afterwards")
            group.add("overtaken", message_id(log, seq), explanation, log.sent[seq],
                      late.delivered, late.queue, verdict.caveat)
        counts = {"overtaken": len(violations), "caveat_overtaken": len(caveats)}
        return Result(Overtaken.name, not violations, counts,
                      violations.anomalies(timeline), caveats.anomalies(timeline))


def _quiet_from(time: float, faults: list[Fault]) -> float:
    """The first moment from ``time`` on with no fault in force (inf if one never
    ended)."""
    moment, moved = time, True
    while moved:
        moved = False
        for fault in faults:
            if fault.start <= moment and (fault.end is None or fault.end > moment):
                moment = float("inf") if fault.end is None else fault.end
                moved = True
                if moment == float("inf"):
                    return moment
    return moment
