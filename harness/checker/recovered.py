"""``recovered``: messages whose publish was indeterminate or nacked, yet were delivered.

Not an anomaly: an unknown outcome may well have happened, and a nacked message may
still have been enqueued. Counted and listed so a run shows how often it occurs.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.compose import Streaming
from harness.checker.ledger import ATTEMPTED, CONFIRMED, FAILED, NACKED, message_id
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run


class Recovered(Streaming):
    name = "recovered"

    def start(self, run: Run) -> Observer:
        return _Recovered(run)


class _Recovered:
    def __init__(self, run: Run) -> None:
        self.run = run

    def handlers(self) -> Mapping[str, Handler]:
        return {}

    def finish(self) -> Result:
        ids: list[str] = []
        nacked = 0
        for log, seq in self.run.ledger.messages(ATTEMPTED):
            flags = log.flags[seq]
            if log.count[seq] and not flags & (CONFIRMED | FAILED):
                ids.append(message_id(log, seq))
                nacked += bool(flags & NACKED)
        counts = {"recovered": len(ids), "recovered_nacked": nacked}
        return Result("recovered", True, counts, data={"recovered": ids})
