"""Throughput and availability over time.

Per time bucket: publishes first confirmed and deliveries received. Availability is
measured per kind of operation over the workload window (first publish to the start of
the final drain): ``publish``, the share of its buckets in which a publish was
confirmed; ``consume``, of the buckets in which a consumer was attached, the share in
which a message was delivered (absent when no consumer was attached in the window). The
overall ``fraction`` is the share of buckets in which each kind at work was served.
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
        availability: dict[str, object] = {"bucket_s": width, **_share([])}
        if first is not None and end is not None and end > first:
            lo = self.confirms.index(first)
            hi = max(self.confirms.index(end), lo + 1)  # the drain's own bucket is excluded
            window = range(lo, hi)
            attached = {i for s in timeline.sessions for i in range(
                self.confirms.index(s.start), self.confirms.index(
                    s.end if s.end is not None else end) + 1)} & set(window)
            confirmed = [i < size and confirms[i] > 0 for i in window]
            delivered = [i < size and deliveries[i] > 0 for i in window if i in attached]
            served = [ok and (i not in attached or (i < size and deliveries[i] > 0))
                      for i, ok in zip(window, confirmed, strict=True)]
            availability.update(_share(served), publish=_share(confirmed))
            if attached:
                availability["consume"] = _share(delivered)
        data["availability"] = availability
        return Result("throughput", True, data=data)


def _share(served: list[bool]) -> dict[str, object]:
    """Of buckets (each served or not): ``fraction`` served (None without buckets),
    ``buckets`` and ``available_buckets``."""
    count = sum(served)
    return {"fraction": round(count / len(served), 4) if served else None,
            "buckets": len(served), "available_buckets": count}


def _rate(count: int, first: float | None, last: float | None) -> float | None:
    if first is None or last is None or last <= first:
        return None
    return round(count / (last - first), 3)
