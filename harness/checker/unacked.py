"""``lost-unacked``: a delivery in ack mode that was never settled and never came again.

A consumer (or ``basic.get`` with ack) that closes its channel without acking hands the
message back: the broker must requeue it, so the drain or another consumer gets it. The
record decides when that must have happened: only deliveries whose receiver's
connection ended before the final drain are judged (a connection still open may hold
its deliveries). Only confirmed messages that nobody ever acked are judged: the broker
promises nothing for a publish it never confirmed (a paused master that resumes may
deliver what it enqueued before it learnt it was deposed, then drop it), and a message
acked once may have been settled before a stale copy of an earlier delivery surfaced
(a paused node that resumes passes on what it held). A nack or reject with
``requeue=false`` settles a delivery like an ack; with ``requeue=true`` it must come
again too. A missing delivery is excused only by the
documented caveats of a loss (caveats.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.caveats import LossRules
from harness.checker.compose import Streaming
from harness.checker.ledger import ACKED, CONFIRMED, TRANSIENT
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event


class LostUnacked(Streaming):
    name = "lost-unacked"

    def start(self, run: Run) -> Observer:
        return _LostUnacked(run)


class _LostUnacked:
    def __init__(self, run: Run) -> None:
        self.run = run
        # message -> (its latest delivery's time, receiver, queue) while that delivery
        # was in ack mode and is not settled
        self.pending: dict[str, tuple[float, str, str]] = {}

    def handlers(self) -> Mapping[str, Handler]:
        return {"deliver": self.delivery, "get": self.delivery, "ack": self.settle,
                "nack": self.settle, "reject": self.settle}

    def delivery(self, ev: Event) -> None:
        msg, queue = ev.msg, ev.queue
        if msg is None or self.run.log is None:
            return
        assert queue is not None
        if self.run.delivery_mode(ev) == "ack":
            self.pending[msg] = (ev.time, ev.process, queue)
        else:
            self.pending.pop(msg, None)

    def settle(self, ev: Event) -> None:
        if ev.type == "ok" and not ev.requeue and ev.msg is not None:
            self.pending.pop(ev.msg, None)

    def finish(self) -> Result:
        run = self.run
        timeline, ledger = run.timeline, run.ledger
        rules = LossRules(run.header, timeline)
        violations, caveats = Grouper(), Grouper()
        undrained: Counter[str] = Counter()
        held = 0
        unpromised = 0
        for msg, (delivered, receiver, queue) in self.pending.items():
            producer, _, digits = msg.rpartition("-")
            log, seq = ledger.producers[producer], int(digits)
            if log.flags[seq] & (CONFIRMED | ACKED) != CONFIRMED:
                unpromised += 1
                continue
            until = timeline.drain_time(queue)
            if not timeline.disconnected(receiver, delivered,
                                         float("inf") if until is None else until):
                held += 1  # its receiver may still hold it: nothing to expect
                continue
            if until is None:
                undrained[queue] += 1
                continue
            verdict = rules.explain(queue, log.sent[seq], bool(log.flags[seq] & TRANSIENT),
                                    until, log.name)
            group = violations if verdict.caveat is None else caveats
            explanation = verdict.explanation if verdict.caveat is not None else (
                f"delivered in ack mode to {receiver}, never acked, and not delivered again "
                "after its connection closed")
            group.add("lost-unacked", msg, explanation, log.sent[seq], until, queue,
                      verdict.caveat)
        counts = {"lost_unacked": len(violations), "caveat_lost_unacked": len(caveats),
                  "unacked_held": held, "unacked_unjudged": unpromised}
        result = Result(LostUnacked.name, not violations, counts,
                        violations.anomalies(timeline), caveats.anomalies(timeline))
        if not violations and undrained:
            result.valid = "unknown"
            result.error = "no final drain recorded for " + ", ".join(sorted(undrained))
        return result
