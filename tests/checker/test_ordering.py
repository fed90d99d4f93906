"""Ordering: per consumer, producer and queue, first deliveries follow publish order
unless a requeue or failover happened in between."""

from __future__ import annotations

from harness.history import HistoryBuilder
from tests.checker.histories import builder, delivered_and_acked, part, run, violated


def _published(*msgs: str) -> HistoryBuilder:
    b = builder()
    b.consume("c1")
    b.consume("c2")
    for msg in msgs:
        b.publish(msg)
    return b


def test_first_deliveries_in_publish_order_are_valid() -> None:
    b = _published("p1-1", "p1-2", "p1-3")
    delivered_and_acked(b, "p1-1", "p1-2", "p1-3")
    b.drain()
    assert run(b).valid is True


def test_a_reordering_without_a_requeue_is_a_violation() -> None:
    b = _published("p1-1", "p1-2", "p1-3")
    delivered_and_acked(b, "p1-1", "p1-3", "p1-2")
    b.drain()
    result = run(b)
    assert violated(result, "reordered") == ["p1-2"]
    assert result.data["reordered"] == [["p1-2", "p1-3"]]
    assert result.counts["reordered"] == 1


def test_a_reordering_after_a_requeue_in_between_is_allowed() -> None:
    b = _published("p1-1", "p1-2", "p1-3")
    delivered_and_acked(b, "p1-1", "p1-3")
    b.nack("p1-3", requeue=True)  # any requeue on the queue perturbs dispatch
    delivered_and_acked(b, "p1-2")
    b.drain()
    result = run(b)
    assert result.valid is True
    assert part(result, "ordering").counts["reordered"] == 0
    assert part(result, "ordering").counts["reordered_allowed"] == 1


def test_a_nack_without_requeue_is_not_a_requeue() -> None:
    b = _published("p1-1", "p1-2", "p1-3")
    delivered_and_acked(b, "p1-1", "p1-3")
    b.nack("p1-1", requeue=False)
    delivered_and_acked(b, "p1-2")
    b.drain()
    assert violated(run(b), "reordered") == ["p1-2"]


def test_a_requeue_before_both_deliveries_is_not_between_them() -> None:
    b = _published("p1-1", "p1-2", "p1-3")
    b.deliver("p1-1")
    b.reject("p1-1", requeue=True)
    b.deliver("p1-1", redelivered=True)
    delivered_and_acked(b, "p1-3", "p1-2")
    b.drain()
    assert violated(run(b), "reordered") == ["p1-2"]


def test_a_consumer_disconnect_in_between_is_a_requeue() -> None:
    b = _published("p1-1", "p1-2")
    b.deliver("p1-2", "c2")
    b.disconnect("c2", type="info")
    b.deliver("p1-1", "c2")
    b.deliver("p1-2", "c2", redelivered=True)  # requeued by the disconnect
    b.drain()
    assert run(b).valid is True


def test_a_failover_in_between_allows_a_reordering() -> None:
    b = _published("p1-1", "p1-2")
    b.deliver("p1-2")
    b.heal(b.fault("kill", ["n1"]))
    b.deliver("p1-1")
    b.drain()
    assert run(b).valid is True


def test_a_late_first_delivery_flagged_redelivered_is_allowed() -> None:
    b = _published("p1-1", "p1-2")
    b.deliver("p1-2")
    b.deliver("p1-1", redelivered=True)
    b.drain()
    assert run(b).valid is True


def test_different_consumers_may_see_each_others_messages_in_any_order() -> None:
    b = _published("p1-1", "p1-2")
    b.deliver("p1-2", "c2")
    b.deliver("p1-1", "c1")
    b.drain()
    assert run(b).valid is True


def test_order_is_per_producer_and_per_queue() -> None:
    b = builder()
    b.publish("p1-2")
    b.publish("p2-1")
    b.publish("p1-1", queue="other")
    b.deliver("p1-2")
    b.deliver("p2-1")
    b.deliver("p1-1", queue="other")
    b.drain()
    assert run(b).valid is True
