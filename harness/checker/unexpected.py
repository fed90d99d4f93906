"""``unexpected``: deliveries of messages that were never published.

That includes a message delivered from a queue it was not published to, and one whose
publisher recorded the publish as definitely failed (never sent).
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.ledger import FAILED, message_id
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event


class Unexpected(Streaming):
    name = "unexpected"

    def start(self, run: Run) -> Observer:
        return _Unexpected(run)


class _Unexpected:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.found = Grouper()
        self.ids: set[str] = set()

    def handlers(self) -> Mapping[str, Handler]:
        return {"deliver": self.delivery, "get": self.delivery}

    def delivery(self, ev: Event) -> None:
        if ev.msg is None:
            return
        ledger = self.run.ledger
        log = self.run.log
        queue = ev.queue
        assert queue is not None
        if log is None:
            self._add(ev.msg, "delivered but never published", queue, ev.time)
        elif ledger.queues[log.queue[ev.seq]] != queue:
            published_to = ledger.queues[log.queue[ev.seq]]
            self._add(ev.msg, f"published to {published_to} but delivered from {queue}", queue,
                      ev.time)

    def _add(self, msg: str, why: str, queue: str, time: float) -> None:
        self.found.add("unexpected", msg, why, float("-inf"), time, queue)
        self.ids.add(msg)

    def finish(self) -> Result:
        ledger = self.run.ledger
        for log, seq in ledger.messages(FAILED):
            if log.count[seq]:
                msg = message_id(log, seq)
                # the time of the delivery is not kept; the publish bounds its context
                self._add(msg, "delivered although its publish was recorded as never sent",
                          ledger.queues[log.queue[seq]], self.run.last or log.sent[seq])
        return Result("unexpected", not self.ids, {"unexpected": len(self.ids)},
                      self.found.anomalies(self.run.timeline))
