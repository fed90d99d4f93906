"""``corrupted``: a delivery whose content differs from what was published.

The client that received it recomputed the whole message from its id (body, message
id, delivery mode, header: harness/workload/content.py) and wrote what differed on the
delivery's line (``corrupt``). A broker passes a message on unchanged, from every
replica, after a sync, a promotion or a restart: any difference is a violation, and no
fault excuses it.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event

KIND = "corrupted"


class Corrupted(Streaming):
    name = KIND

    def start(self, run: Run) -> Observer:
        return _Corrupted(run)


class _Corrupted:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.violations = Grouper()

    def handlers(self) -> Mapping[str, Handler]:
        return {"deliver": self.delivery, "get": self.delivery}

    def delivery(self, ev: Event) -> None:
        corrupt = ev.get("corrupt")
        if ev.msg is None or corrupt is None:
            return
        log = self.run.log
        sent = log.sent[ev.seq] if log is not None else float("-inf")
        self.violations.add(KIND, ev.msg, f"delivered to {ev.process} with {corrupt}",
                            sent, ev.time, ev.queue)

    def finish(self) -> Result:
        return Result(Corrupted.name, not self.violations,
                      {"corrupted": len(self.violations)},
                      self.violations.anomalies(self.run.timeline), [])
