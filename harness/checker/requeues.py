"""``reordered`` across requeues (part of the ordering checker): a requeued message
comes back before later ones.

A message nacked or rejected with ``requeue=true`` goes back to its place in the queue
(by sequence), so it is the next one the queue dispatches. A consumer with prefetch P
had at most P deliveries in flight when its requeue reached the broker; if it then
records more than P first deliveries of later messages of the same producer and queue
before getting the requeued message again, the broker put the message behind them. A
getter that requeues what its ``basic.get`` returned has nothing in flight: P is 0.
Receipts on different connections cannot be ordered, so when the message comes back to
another consumer nothing is judged; nor after a disconnect, a broker cancel, a recover
or a failure fault, any of which may requeue or reorder; nor a requeue made while a
failure fault is in force (its failover may have requeued the delivery already and given
the message to another consumer before the requeue). A broker that requeues at the
tail of a long queue gives the message back only after such an event, so the consumer
is accused as soon as it has more than P + ``SLACK`` later first deliveries with the
message still not seen anywhere: the slack covers a copy another consumer got first but
whose receipt the harness recorded a little later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.checker.anomalies import Grouper
from harness.checker.protocol import Handler
from harness.checker.record import FAILURE_FAULTS
from harness.checker.run import Run
from harness.history.model import Event

SLACK = 2  # later first deliveries beyond the prefetch before accusing without the return


@dataclass
class _Watch:
    """A requeued message and what its consumer got since."""

    msg: str
    process: str
    queue: str
    producer: str
    seq: int
    prefetch: int
    sent: float
    later: int = 0  # first deliveries of later messages since the requeue


class Requeues:
    """Watches requeued messages; accuses into the ordering checker's ``violations``.
    Its ``delivery`` is called by that checker for every delivery."""

    def __init__(self, run: Run, violations: Grouper) -> None:
        self.run = run
        self.by_msg: dict[str, _Watch] = {}
        self.by_session: dict[tuple[str, str], list[_Watch]] = {}
        self.violations = violations
        self.last_get: dict[tuple[str, str], str] = {}  # (getter, queue) -> latest message
        self.accused = 0
        self.unjudged = 0

    def handlers(self) -> Mapping[str, Handler]:
        """Handlers for everything but deliveries."""
        return {"nack": self.requeue, "reject": self.requeue, "recover": self.recover,
                "disconnect": self.forget_all, "cancel": self.cancel, "fault-start": self.fault}

    def requeue(self, ev: Event) -> None:
        log = self.run.log
        if ev.type != "ok" or not ev.requeue or log is None or ev.msg is None:
            return
        queue = self.run.ledger.queues[log.queue[ev.seq]]
        timeline = self.run.timeline
        session = timeline.open_session(ev.process, queue)
        if session is not None:
            prefetch = session.prefetch
            if not prefetch:
                return  # unlimited or unknown: no bound on what was in flight
        elif self.last_get.get((ev.process, queue)) == ev.msg and not any(
                s.process == ev.process and s.queue == queue for s in timeline.sessions):
            prefetch = 0  # a getter: each basic.get answers one message, none in flight
        else:
            return
        if any(f.applied and f.end is None and f.kind in FAILURE_FAULTS
               for f in timeline.faults()):
            # A failover under way may already have requeued this very delivery and
            # given the message to someone else: then this requeue moves nothing.
            return
        watch = _Watch(ev.msg, ev.process, queue, log.name, ev.seq, prefetch,
                       log.sent[ev.seq])
        self._drop(self.by_msg.get(ev.msg))
        self.by_msg[ev.msg] = watch
        self.by_session.setdefault((ev.process, queue), []).append(watch)

    def delivery(self, ev: Event) -> None:
        if ev.op == "get" and ev.msg is not None:
            self.last_get[(ev.process, ev.queue or "")] = ev.msg
        if not self.by_msg or ev.msg is None:
            return
        watch = self.by_msg.get(ev.msg)
        if watch is not None:
            self._drop(watch)
            if watch.later > watch.prefetch:
                if ev.process == watch.process:
                    self._accuse(watch, ev.time)
                else:
                    self.unjudged += 1
            return
        log = self.run.log
        if log is None or log.count[ev.seq] or ev.queue is None:
            return
        for w in list(self.by_session.get((ev.process, ev.queue), ())):
            if w.producer == log.name and ev.seq > w.seq:
                w.later += 1
                if w.later > w.prefetch + SLACK:
                    self._drop(w)
                    self._accuse(w, ev.time)

    def recover(self, ev: Event) -> None:
        if ev.type != "fail":
            for watch in [w for w in self.by_msg.values() if w.process == ev.process]:
                self._drop(watch)

    def cancel(self, ev: Event) -> None:
        if ev.type == "info":
            self.forget_all(ev)

    def fault(self, ev: Event) -> None:
        if ev.type != "fail" and ev.fault in FAILURE_FAULTS:
            self.forget_all(ev)

    def forget_all(self, ev: Event) -> None:
        if ev.type != "invoke":
            self.by_msg.clear()
            self.by_session.clear()

    def _drop(self, watch: _Watch | None) -> None:
        if watch is None:
            return
        del self.by_msg[watch.msg]
        self.by_session[(watch.process, watch.queue)].remove(watch)

    def _accuse(self, watch: _Watch, until: float) -> None:
        self.accused += 1
        self.violations.add(
            "reordered", watch.msg,
            f"requeued by {watch.process} (prefetch {watch.prefetch}), which then got "
            f"{watch.later} later messages of its producer first", watch.sent, until,
            watch.queue)

    def finish(self) -> dict[str, int]:
        """Accuse what never came back; the counts for the ordering checker's result."""
        for watch in list(self.by_msg.values()):
            if watch.later > watch.prefetch:
                self._accuse(watch, self.run.last or watch.sent)
        return {"reordered_after_requeue": self.accused,
                "requeue_order_unjudged": self.unjudged}
