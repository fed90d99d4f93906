"""``wrong-promotion``: a node reports promoting a mirror the record does not predict.

The membership replay of the harness's record names each new master: the eldest
surviving mirror, a synchronised one under ``when-synced``. A ``promotion`` report is
matched to the replay's master changes of its queue that happened up to ``slack``
seconds before it (the broker detects a failure seconds after the fault starts). Only a
report with exactly one such change is judged: with none or several the replay cannot
tell which failure the broker acted on, and when the report names the master it took
over from (``previous``), that must be the replay's too: else the replay lost track of
the queue (a mirror synchronised by draining, which the record cannot show). Nor is it
judged when a partition under ``ignore``/``autoheal`` (whose split views the replay
does not model) came in between, or a link fault that may have kept the predicted heir
from taking over (a cut off it that the nodes could detect, a degraded link of its own);
a short cut of the dying master, or a degraded link between the master and another
mirror, leaves the heir as it was.
Queues the workload's churners declared are not judged: the header gives no membership
to replay for them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from cluster.ha.record import node_of
from faults.topology import node_link_name
from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.membership import changes_from, master_changes, replayed
from harness.checker.protocol import Handler, Observer
from harness.checker.record import detected, is_link_fault, touches
from harness.checker.result import Fault, Result
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
    previous: frozenset[str] | None  # the nodes of the masters it took over from, if said


class _Promotions:
    def __init__(self, run: Run, slack_s: float) -> None:
        self.run = run
        self.slack = slack_s
        self.reports: list[_Report] = []

    def handlers(self) -> Mapping[str, Handler]:
        return {"promotion": self.promotion}

    def promotion(self, ev: Event) -> None:
        if ev.queue is not None and ev.node is not None:
            previous = ev.get("previous")
            took_over = (frozenset(node_of(str(m)) for m in previous)
                         if isinstance(previous, list) else None)
            self.reports.append(_Report(ev.time, ev.queue, ev.node, ev.process, took_over))

    def finish(self) -> Result:
        run = self.run
        timeline, header = run.timeline, run.header
        faults = [f for f in timeline.faults() if f.applied]
        changes = changes_from(faults, timeline.syncs, header.nodes, header.partition_handling)
        promoted = {}
        reports = [r for r in self.reports if r.queue not in run.churned]
        for queue in {r.queue for r in reports}:
            promoted[queue] = [(t, old, new) for t, old, new in
                               master_changes(replayed(header, changes, queue).masters)]
        split_views = header.partition_handling in _UNMODELLED_PARTITIONS
        wrong = Grouper()
        unjudged = 0
        for r in reports:
            near = [(t, old, new) for t, old, new in promoted[r.queue]
                    if r.time - self.slack <= t <= r.time + _EARLY_S]
            if len(near) != 1 or (r.previous is not None and near[0][1] not in r.previous):
                unjudged += 1  # the broker took over from another master than the replay's
                continue
            changed, _, predicted = near[0]
            if predicted == r.master:
                continue
            begin = min(changed, r.time)
            if any(f.overlaps(begin - self.slack, r.time) and (
                    (split_views and f.kind == PARTITION_FAULT)
                    or (is_link_fault(f) and _sidelines(f, predicted, header.nodes, faults)))
                    for f in faults):
                unjudged += 1
                continue
            wrong.add("wrong-promotion", r.reporter,
                      f"{r.reporter} reports promoting {r.master} for {r.queue}; by the "
                      f"record the eldest eligible mirror was {predicted}", changed, r.time,
                      r.queue)
        counts = {"wrong_promotion": len(wrong), "promotions_unjudged": unjudged}
        return Result(WrongPromotion.name, not wrong, counts, wrong.anomalies(timeline))


def _sidelines(fault: Fault, heir: str, nodes: tuple[str, ...], faults: list[Fault]) -> bool:
    """Whether a link fault may have kept the predicted ``heir`` from taking over (its
    peers took it for dead, or it paused for a partial partition): a partition that cuts
    it off from some node and lasted long enough to be detected (a cut ended, or whose
    cut-off nodes were killed, within failure detection changes no one's view), or a
    degradation of one of its links."""
    if fault.kind == PARTITION_FAULT:
        return touches(fault, heir) and detected(fault, faults)
    links = fault.detail.get("links")
    if links:
        return any(node_link_name(heir, n) in links or node_link_name(n, heir) in links
                   for n in nodes)
    return touches(fault, heir)
