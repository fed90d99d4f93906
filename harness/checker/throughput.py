"""Throughput and availability over time.

Per time bucket: publishes first confirmed and deliveries received. Availability is the
fraction of buckets in the workload window (first publish to the start of the final
drain) in which at least one publish was confirmed and at least one delivery arrived.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.buckets import Buckets
from harness.checker.compose import Streaming
from harness.checker.ledger import CONFIRMED
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event


class Throughput(Streaming):
    name = "throughput"

    def __init__(self, bucket_s: float = 1.0) -> None:
        self.bucket_s = bucket_s

    def start(self, run: Run) -> Observer:
        return _Throughput(run, self.bucket_s)


class _Throughput:
    def __init__(self, run: Run, bucket_s: float) -> None:
        self.run = run
        self.confirms = Buckets(run.header.time, bucket_s)
        self.deliveries = Buckets(run.header.time, bucket_s)

    def handlers(self) -> Mapping[str, Handler]:
        return {"confirm": self.confirm, "deliver": self.delivery, "get": self.delivery}

    def confirm(self, ev: Event) -> None:
        if ev.type == "ok":
            log = self.run.log
            if log is not None and not log.flags[ev.seq] & CONFIRMED:
                self.confirms.add(ev.time)

    def delivery(self, ev: Event) -> None:
        if ev.msg is not None:
            self.deliveries.add(ev.time)

    def finish(self) -> Result:
        run, timeline = self.run, self.run.timeline
        width = self.confirms.width
        size = max(len(self.confirms.counts), len(self.deliveries.counts))
        confirms = self.confirms.padded(size)
        deliveries = self.deliveries.padded(size)
        data: dict[str, object] = {"throughput": {
            "bucket_s": width, "confirms": confirms, "deliveries": deliveries,
            "confirms_per_s": _rate(sum(confirms), run.first, run.last),
            "deliveries_per_s": _rate(sum(deliveries), run.first, run.last)}}
        end = timeline.drain_started if timeline.drain_started is not None else run.last
        first = run.first_publish
        if first is not None and end is not None and end > first:
            lo = self.confirms.index(first)
            hi = max(self.confirms.index(end), lo + 1)  # the drain's own bucket is excluded
            window = range(lo, hi)
            up = sum(1 for i in window if i < size and confirms[i] and deliveries[i])
            data["availability"] = {"fraction": round(up / len(window), 4),
                                    "buckets": len(window), "available_buckets": up,
                                    "bucket_s": width}
        else:
            data["availability"] = {"fraction": None, "buckets": 0, "available_buckets": 0,
                                    "bucket_s": width}
        return Result("throughput", True, data=data)


def _rate(count: int, first: float | None, last: float | None) -> float | None:
    if first is None or last is None or last <= first:
        return None
    return round(count / (last - first), 3)
