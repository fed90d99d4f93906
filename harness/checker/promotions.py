"""``wrong-promotion``: a node reports promoting a mirror the record does not predict.

The membership replay of the harness's record names each new master: the eldest
surviving mirror, a synchronised one under ``when-synced``. A ``promotion`` report is
matched to the replay's master changes of its queue that happened up to ``slack``
seconds before it (the broker detects a failure seconds after the fault starts). Only a
report with exactly one such change is judged: with none or several the replay cannot
tell which failure the broker acted on. Nor is it judged when a partition under
``ignore``/``autoheal`` (whose split views the replay does not model) or a link fault
touching the predicted or the reported node came in between. Queues the workload's
churners declared are not judged: the header gives no membership to replay for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.membership import changes_from, master_changes, replayed
from harness.checker.protocol import Handler, Observer
from harness.checker.record import is_link_fault, touches
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import PARTITION_FAULT, Event

SLACK_S = 30.0
_EARLY_S = 1.0  # a report may precede the fault's record by scheduling noise
_UNMODELLED_PARTITIONS = frozenset({"ignore", "autoheal"})


class WrongPromotion(Streaming):
    name = "wrong-promotion"

    def __init__(self, slack_s: float = SLACK_S) -> None:
        self.slack_s = slack_s

    def start(self, run: Run) -> Observer:
        return _Promotions(run, self.slack_s)


class _Report(NamedTuple):
    time: float
    queue: str
    master: str
    reporter: str


class _Promotions:
    def __init__(self, run: Run, slack_s: float) -> None:
        self.run = run
        self.slack = slack_s
        self.reports: list[_Report] = []

    def handlers(self) -> Mapping[str, Handler]:
        return {"promotion": self.promotion}

    def promotion(self, ev: Event) -> None:
        if ev.queue is not None and ev.node is not None:
            self.reports.append(_Report(ev.time, ev.queue, ev.node, ev.process))

    def finish(self) -> Result:
        run = self.run
        timeline, header = run.timeline, run.header
        faults = [f for f in timeline.faults() if f.applied]
        changes = changes_from(faults, timeline.syncs, header.nodes, header.partition_handling)
        promoted = {}
        reports = [r for r in self.reports if r.queue not in run.churned]
        for queue in {r.queue for r in reports}:
            promoted[queue] = [(t, new) for t, _, new in
                               master_changes(replayed(header, changes, queue).masters)]
        split_views = header.partition_handling in _UNMODELLED_PARTITIONS
        wrong = Grouper()
        unjudged = 0
        for r in reports:
            near = [(t, new) for t, new in promoted[r.queue]
                    if r.time - self.slack <= t <= r.time + _EARLY_S]
            if len(near) != 1:
                unjudged += 1
                continue
            changed, predicted = near[0]
            if predicted == r.master:
                continue
            begin = min(changed, r.time)
            if any(f.overlaps(begin - self.slack, r.time) and (
                    (split_views and f.kind == PARTITION_FAULT) or (is_link_fault(f) and (
                        touches(f, predicted) or touches(f, r.master)))) for f in faults):
                unjudged += 1
                continue
            wrong.add("wrong-promotion", r.reporter,
                      f"{r.reporter} reports promoting {r.master} for {r.queue}; by the "
                      f"record the eldest eligible mirror was {predicted}", changed, r.time,
                      r.queue)
        counts = {"wrong_promotion": len(wrong), "promotions_unjudged": unjudged}
        return Result(WrongPromotion.name, not wrong, counts, wrong.anomalies(timeline))
