"""``rule-broken``: the broker did what it must refuse, or refused what it must do.

Rule probers (``rule`` lines, harness/workload/rules.py) ask, on queues of their own,
for what AMQP 0-9-1 and the design say the broker must refuse (a queue.delete with
if_empty of a queue holding a message, with if_unused of one with a consumer on any
node; a
consumer beside an exclusive one; another connection's use of an exclusive queue; an
auto-delete queue asked for once its last consumer went) and for what it must do (a
plain consumer beside a plain one; an auto-delete queue kept while a consumer is
left). Each line says what it ``expect``s: an ``ok`` answer to an ask that must be
``refused``, or a ``fail`` (a refusal) of one that must be ``done``, breaks the rule.

A fault can change the answer rightly: a node that went down took its connections'
exclusive queues and consumers with it, a partition hides a consumer on the other side,
and a queue whose master is down is not found. An answer that breaks its rule is only
counted (``rules_allowed``) when a fault other than a sync was in force from GRACE_S
before the ask's invoke (a node just back is still catching up with the cluster) to
its answer; what comes after the answer cannot have changed it. An ask with no answer
(``info``) is counted.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event

KIND = "rule-broken"
GRACE_S = 2.0  # a node back from a fault has caught up with the cluster well within this


class RuleBroken(Streaming):
    name = KIND

    def __init__(self, grace_s: float = GRACE_S) -> None:
        self.grace_s = grace_s

    def start(self, run: Run) -> Observer:
        return _RuleBroken(run, self.grace_s)


class _RuleBroken:
    def __init__(self, run: Run, grace_s: float) -> None:
        self.run = run
        self.grace = grace_s
        self.asked: dict[str, float] = {}  # prober -> its ask's invoke time
        # (rule, process, queue, node asked, invoke time, answer time, its answer)
        self.broken: list[tuple[str, str, str, str, float, float, str]] = []
        self.counts = {"rules_asked": 0, "rules_kept": 0, "rules_unknown": 0,
                       "rules_allowed": 0, "rules_broken": 0}

    def handlers(self) -> Mapping[str, Handler]:
        return {"rule": self.rule}

    def rule(self, ev: Event) -> None:
        if ev.type == "invoke":
            self.asked[ev.process] = ev.time
            self.counts["rules_asked"] += 1
            return
        start = self.asked.pop(ev.process, ev.time)
        if ev.type == "info":
            self.counts["rules_unknown"] += 1
            return
        refused = ev.type == "fail"
        if refused == (ev.get("expect") == "refused"):
            self.counts["rules_kept"] += 1
            return
        answer = (f"refused it ({ev.get('code')})" if refused
                  else "did it, though it must refuse it")
        assert ev.queue is not None
        self.broken.append((str(ev.get("rule")), ev.process, ev.queue, ev.node or "?",
                            start, ev.time, answer))

    def finish(self) -> Result:
        timeline = self.run.timeline
        found = Grouper()
        for rule, process, queue, node, start, end, answer in self.broken:
            if any(f.applied and f.kind != "sync"
                   for f in timeline.faults_during(start - self.grace, end)):
                self.counts["rules_allowed"] += 1
                continue
            self.counts["rules_broken"] += 1
            # One anomaly per rule, node and answer, whatever the cycle's queues.
            found.add(KIND, f"{process}:{rule}:{queue}",
                      f"asked {node} for {rule}, and {node} {answer}, with no fault near it",
                      start, end)
        return Result(KIND, not found, dict(self.counts), found.anomalies(timeline), [])
