"""Confirm latency: from a publish's invoke to its first broker ack, in milliseconds.

Percentiles come from a fixed-size log histogram (within 1 %), and per time bucket only
the count, mean and maximum are kept, so memory does not grow with the run.
"""

from __future__ import annotations

from collections.abc import Mapping

from harness.checker.buckets import Buckets
from harness.checker.compose import Streaming
from harness.checker.ledger import CONFIRMED
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.checker.sketch import LogHistogram
from harness.history.model import Event

_QUANTILES = {"confirm_p50": 0.5, "confirm_p90": 0.9, "confirm_p99": 0.99,
              "confirm_p999": 0.999}


class Latency(Streaming):
    name = "latency"

    def __init__(self, bucket_s: float = 1.0) -> None:
        self.bucket_s = bucket_s

    def start(self, run: Run) -> Observer:
        return _Latency(run, self.bucket_s)


class _Latency:
    def __init__(self, run: Run, bucket_s: float) -> None:
        self.run = run
        self.histogram = LogHistogram()
        self.buckets = Buckets(run.header.time, bucket_s)
        self.total: list[float] = []
        self.peak: list[float] = []

    def handlers(self) -> Mapping[str, Handler]:
        return {"confirm": self.confirm}

    def confirm(self, ev: Event) -> None:
        if ev.type != "ok":
            return
        log = self.run.log
        if log is None or log.flags[ev.seq] & CONFIRMED:
            return
        ms = (ev.time - log.sent[ev.seq]) * 1000.0
        self.histogram.add(ms)
        index = self.buckets.add(ev.time)
        if index >= len(self.total):
            grow = index + 1 - len(self.total)
            self.total.extend([0.0] * grow)
            self.peak.extend([0.0] * grow)
        self.total[index] += ms
        self.peak[index] = max(self.peak[index], ms)

    def finish(self) -> Result:
        h = self.histogram
        summary: dict[str, float | int | None] = {
            name: _round(h.quantile(q)) for name, q in _QUANTILES.items()}
        summary.update(confirm_mean=_round(h.mean()), confirm_max=_round(h.max if h.count
                                                                          else None),
                       confirms=h.count)
        counts = self.buckets.counts
        series = {"bucket_s": self.buckets.width,
                  "mean": [_round(t / n) if n else None for t, n in zip(self.total, counts,
                                                                       strict=True)],
                  "max": [_round(p) if n else None for p, n in zip(self.peak, counts,
                                                                  strict=True)]}
        return Result("latency", True, data={"latency_ms": summary,
                                             "latency_over_time": series})


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
