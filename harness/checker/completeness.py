"""Whether the history is complete enough to be judged.

Unknown when the writer was cut off (a torn last line), when no final drain was
recorded, or when a drain failed: losses cannot be told from messages still queued.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run


class Completeness(Streaming):
    name = "history"

    def start(self, run: Run) -> Observer:
        return _Completeness(run)


class _Completeness:
    def __init__(self, run: Run) -> None:
        self.run = run

    def handlers(self) -> Mapping[str, Handler]:
        return {}

    def finish(self) -> Result:
        run, timeline = self.run, self.run.timeline
        reasons: list[str] = []
        if run.torn is not None:
            reasons.append(f"the history ends in a torn line ({run.torn.line}): its writer "
                           "stopped mid-line")
        if not timeline.drained:
            reasons.append("no final drain recorded")
        reasons.extend(f"drain of {queue or 'all queues'} did not succeed: {why}"
                       for queue, why in timeline.drain_failed)
        heal_failed = [f.id for f in timeline.faults() if f.heal_failed]
        data: dict[str, object] = {"history": {
            "events": run.events, "torn": run.torn.to_json() if run.torn else None,
            "incomplete": reasons, "heal_failed": heal_failed}}
        return Result("history", "unknown" if reasons else True, data=data,
                      error="; ".join(reasons) or None)
