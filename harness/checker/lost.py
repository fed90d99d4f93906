"""``lost``: confirmed messages that the final drain did not deliver either.

Each loss is tested against the documented caveats (caveats.py); what none explains is a
violation. A message published before a purge of its queue answered (or one that never
answered) may have been purged: not lost (purges.py judges what a purge removed). A
queue without a recorded drain cannot show a loss, so its undelivered messages make the
verdict unknown rather than valid.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.caveats import LossRules
from harness.checker.compose import Streaming
from harness.checker.ledger import CONFIRMED, TRANSIENT, message_id
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run


class Lost(Streaming):
    name = "lost"

    def start(self, run: Run) -> Observer:
        return _Lost(run)


class _Lost:
    def __init__(self, run: Run) -> None:
        self.run = run

    def handlers(self) -> Mapping[str, Handler]:
        return {}  # everything it needs is in the ledger at the end

    def finish(self) -> Result:
        ledger, timeline = self.run.ledger, self.run.timeline
        rules = LossRules(self.run.header, timeline)
        violations, caveats = Grouper(), Grouper()
        undrained: Counter[str] = Counter()
        purged = 0
        for log, seq in ledger.messages(CONFIRMED):
            if log.count[seq]:
                continue
            queue = ledger.queues[log.queue[seq]]
            if log.sent[seq] < timeline.purged_until.get(queue, float("-inf")):
                purged += 1
                continue
            until = timeline.drain_time(queue)
            if until is None:
                undrained[queue] += 1
                continue
            verdict = rules.explain(queue, log.sent[seq], bool(log.flags[seq] & TRANSIENT),
                                    until, log.name)
            group = violations if verdict.caveat is None else caveats
            group.add("lost", message_id(log, seq), verdict.explanation, log.sent[seq], until,
                      queue, verdict.caveat)
        counts = {"lost": len(violations) + len(caveats), "caveat_lost": len(caveats),
                  "maybe_purged": purged}
        result = Result("lost", True, counts, violations.anomalies(timeline),
                        caveats.anomalies(timeline))
        if violations:
            result.valid = False
        elif undrained:
            result.valid = "unknown"
        if undrained:
            counts["undrained"] = sum(undrained.values())
            result.error = "no final drain recorded for " + ", ".join(
                f"{q} ({n} confirmed messages not delivered)" for q, n in sorted(undrained.items()))
        return result
