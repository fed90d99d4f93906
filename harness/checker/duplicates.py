"""``duplicated``: messages delivered more than once.

A redelivery flagged ``redelivered`` is what the broker promises after a requeue
(allowed, still counted); a redelivery without the flag is a violation. Only the
broker's first delivery of a message may lack the flag, but which delivery was first
the harness sees only within one connection: a consumer whose connection the broker
closes may read a delivery from its socket after another consumer has read the
requeued, flagged copy. So the violation is a second delivery without the flag.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.ledger import UNFLAGGED
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event


class Duplicates(Streaming):
    name = "duplicated"

    def start(self, run: Run) -> Observer:
        return _Duplicates(run)


class _Duplicates:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.unflagged = Grouper()
        self.redelivered = 0

    def handlers(self) -> Mapping[str, Handler]:
        return {"deliver": self.delivery, "get": self.delivery}

    def delivery(self, ev: Event) -> None:
        if ev.msg is None:
            return
        if ev.redelivered:
            self.redelivered += 1
            return
        log = self.run.log
        if log is not None and log.flags[ev.seq] & UNFLAGGED:
            self.unflagged.add("duplicate", ev.msg, "delivered again without redelivered=true",
                               log.sent[ev.seq], ev.time, ev.queue)

    def finish(self) -> Result:
        duplicated = 0
        for log in self.run.ledger.producers.values():
            count = log.count
            duplicated += len(count) - count.count(0) - count.count(1)
        counts = {"duplicated": duplicated, "redelivered": self.redelivered,
                  "duplicated_unflagged": len(self.unflagged)}
        return Result("duplicated", not self.unflagged, counts,
                      self.unflagged.anomalies(self.run.timeline))
