"""Confirm latency percentiles, throughput and availability over time."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.checker.sketch import LogHistogram
from harness.history import HistoryBuilder
from tests.checker.histories import builder, run


def test_the_histogram_percentiles_are_within_one_percent() -> None:
    h = LogHistogram()
    for ms in range(1, 1001):
        h.add(float(ms))
    assert h.quantile(0.5) == pytest.approx(500, rel=0.01)
    assert h.quantile(0.99) == pytest.approx(990, rel=0.01)
    assert h.quantile(0.0) == 1.0 and h.quantile(1.0) == 1000.0
    assert h.mean() == pytest.approx(500.5)
    assert LogHistogram().quantile(0.5) is None


def _confirmed_after(b: HistoryBuilder, msg: str, ms: float) -> None:
    b.add("p1", "publish", "invoke", msg=msg, queue="q")
    b.at(b.now + ms / 1000 - b.step)
    b.add("p1", "confirm", "ok", msg=msg)


def test_confirm_latency_is_from_publish_invoke_to_the_first_broker_ack() -> None:
    b = builder()
    for seq in range(100):
        _confirmed_after(b, f"p1-{seq}", 10.0 if seq < 98 else 500.0)
    b.add("p1", "confirm", "ok", msg="p1-0")  # a repeated ack does not count twice
    b.drain()
    latency = run(b).data["latency_ms"]
    assert latency["confirms"] == 100
    assert latency["confirm_p50"] == pytest.approx(10.0, rel=0.01)
    assert latency["confirm_p99"] == pytest.approx(500.0, rel=0.01)
    assert latency["confirm_max"] == pytest.approx(500.0)


def test_latency_without_confirms_is_empty_not_zero() -> None:
    b = builder()
    b.drain()
    latency = run(b).data["latency_ms"]
    assert latency["confirm_p50"] is None and latency["confirms"] == 0




def test_availability_is_per_kind_of_operation_over_the_workload() -> None:
    """Ten seconds; a consumer attached for the last six; an outage at 4-6 s."""
    b = builder()
    for second in range(10):
        b.at(float(second))
        if second == 4:
            b.consume("c1")
        msg = f"p1-{second}"
        if second in (4, 5, 6):  # an outage: publishes time out, nothing arrives
            b.publish(msg, outcome="info")
            continue
        b.publish(msg)
        if second > 4:
            b.deliver(msg)
    b.at(10.0)
    b.drain(type="invoke")
    b.drain()
    data = run(b).data
    assert data["throughput"]["confirms"][:10] == [1, 1, 1, 1, 0, 0, 0, 1, 1, 1]
    assert data["throughput"]["deliveries"][:10] == [0, 0, 0, 0, 0, 0, 0, 1, 1, 1]
    assert data["availability"] == {
        "bucket_s": 1.0, "fraction": 0.7, "buckets": 10, "available_buckets": 7,
        "publish": {"fraction": 0.7, "buckets": 10, "available_buckets": 7},
        "consume": {"fraction": 0.5, "buckets": 6, "available_buckets": 3}}


def test_without_consumers_availability_is_that_of_publishes_alone() -> None:
    """A publish-only workload (confirms-survive-kill) is available while it confirms."""
    b = builder()
    for second in range(4):
        b.at(float(second))
        b.publish(f"p1-{second}")
    b.at(4.0)
    b.drain(type="invoke")
    b.drain()
    availability = run(b).data["availability"]
    assert availability["fraction"] == 1.0 and "consume" not in availability


def test_a_bucket_with_confirms_but_no_deliveries_to_attached_consumers_is_not_available(
) -> None:
    b = builder()
    b.at(0.0)
    b.consume("c1")
    b.publish("p1-1")
    b.at(1.0)
    b.publish("p1-2")
    b.deliver("p1-1")
    b.deliver("p1-2")
    b.at(2.0)
    b.drain(type="invoke")
    b.drain()
    availability = run(b).data["availability"]
    assert availability["fraction"] == 0.5 and availability["publish"]["fraction"] == 1.0


def test_the_failover_gap_is_the_longest_pause_in_confirms_while_a_node_fault_lasts() -> None:
    """p1 confirms every 0.1 s from 1.0 s, paused 2.0-2.9 s (a kill at 2.05 s), 3.2-4.4 s
    (its longest while the kill lasts) and 5.0-7.0 s (after the heal at 4.65 s); p2
    confirms at 3.5 and 3.8 s only, so the cluster's longest pause is the first. A
    partition at 1.05 s is not a node fault; a stop at 7.3 s has no confirm after it."""
    b = builder()
    marks: dict[float, Callable[[], object]] = {
        1.05: lambda: b.fault("partition", ["n1"]), 2.05: lambda: b.fault("kill", ["n1"]),
        4.65: lambda: b.heal("f2"), 7.3: lambda: b.fault("stop", ["n2"])}
    p1 = [t / 10 for t in (*range(10, 21), *range(29, 33), *range(44, 51), *range(70, 73))]
    confirms = {**{t: "p1" for t in p1}, 3.5: "p2", 3.8: "p2"}
    seqs = {"p1": 0, "p2": 0}
    for second in sorted([*confirms, *marks]):
        b.at(second)
        if second in marks:
            marks[second]()
        else:
            publisher = confirms[second]
            seqs[publisher] += 1
            b.publish(f"{publisher}-{seqs[publisher]}")
    b.at(8.0)
    b.drain()
    gaps = run(b).data["failover"]
    assert [(g["kind"], g["targets"]) for g in gaps] == [("kill", ["n1"]), ("stop", ["n2"])]
    kill_gap, stop_gap = gaps
    assert kill_gap["pause"] == pytest.approx(0.9, abs=0.01)
    assert kill_gap["pause_from"] == pytest.approx(-0.05, abs=0.01)
    assert kill_gap["publisher_pause"] == pytest.approx(1.2, abs=0.01)
    assert kill_gap["publisher"] == "p1"
    assert stop_gap["pause"] is stop_gap["publisher_pause"] is stop_gap["publisher"] is None


def test_a_fault_that_did_not_take_effect_has_no_failover_gap() -> None:
    b = builder()
    b.publish("p1-1")
    b.fault("kill", ["n1"], type="fail")
    tried = b.fault("stop", ["n2"], type="invoke")  # it may act from here on ...
    b.publish("p1-2")
    b.add("nemesis", "fault-start", "fail", fault="stop", fault_id=tried, targets=["n2"])
    b.publish("p1-3")  # ... until it says it definitely did not
    b.drain()
    assert run(b).data["failover"] == []
