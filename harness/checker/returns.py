"""``unreturned``: a mandatory publish that no queue could take, confirmed without
coming back.

Publishers send, now and then, a mandatory probe to a routing key that no queue or
binding has (``unroutable`` lines, harness/workload/spec.py; through an exchange, the
run's set-up bound that key to every queue and unbound it again). A broker must send
it back with ``basic.return`` before its ``basic.ack``; the client records whether it
did (``returned``). Routing is each node's own reading of the cluster's metadata, and a
key with no binding left once set-up is done has no route under any fault: a probe
confirmed without its return is a violation, and no fault excuses it. A probe whose
answer the client did not see (``info``) or that was nacked (``fail``) is only counted.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event

KIND = "unreturned"


class Unreturned(Streaming):
    name = KIND

    def start(self, run: Run) -> Observer:
        return _Unreturned(run)


class _Unreturned:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.sent: dict[str, float] = {}
        self.counts = {"unroutable_probes": 0, "unroutable_returned": 0,
                       "unroutable_unknown": 0}
        self.violations = Grouper()

    def handlers(self) -> Mapping[str, Handler]:
        return {"unroutable": self.probe}

    def probe(self, ev: Event) -> None:
        probe = str(ev.get("probe"))
        if ev.type == "invoke":
            self.sent[probe] = ev.time
            self.counts["unroutable_probes"] += 1
        elif ev.type != "ok":
            self.counts["unroutable_unknown"] += 1
        elif ev.get("returned") is True:
            self.counts["unroutable_returned"] += 1
        else:
            self.violations.add(KIND, probe, f"a mandatory publish {ev.process} sent to a "
                                "routing key no queue has was confirmed without a "
                                "basic.return", self.sent.get(probe, ev.time), ev.time)

    def finish(self) -> Result:
        return Result(Unreturned.name, not self.violations, dict(self.counts),
                      self.violations.anomalies(self.run.timeline), [])
