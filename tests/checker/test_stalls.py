"""``stalled``: a consumer with room idles while a confirmed message of its queue waits,
with no fault near; and the idle times a correct broker does have."""

from __future__ import annotations

from harness.checker import check
from harness.checker.stalls import Stalls
from harness.history import HistoryBuilder
from tests.checker.histories import builder, part, run, violated


def _waiting_from_1(prefetch: int | None = 10) -> HistoryBuilder:
    """c1 consumes from t=0; p1-1 is confirmed at t=1."""
    b = builder()
    b.consume("c1", prefetch=prefetch)
    b.at(1.0).publish("p1-1")
    return b


def _delivered_at(b: HistoryBuilder, time: float) -> HistoryBuilder:
    b.at(time).deliver("p1-1")
    b.ack("p1-1")
    b.at(time + 1).drain()
    return b


def test_a_message_ready_long_while_a_consumer_had_room_is_a_stall() -> None:
    result = run(_delivered_at(_waiting_from_1(), 20.0))
    assert violated(result, "stalled") == ["c1"]
    assert result.valid is False


def test_a_delivery_within_the_bound_is_no_stall() -> None:
    assert run(_delivered_at(_waiting_from_1(), 5.5)).valid is True


def test_the_bound_is_configurable() -> None:
    history = _delivered_at(_waiting_from_1(), 20.0).build()
    assert check(history, [Stalls(bound_s=30.0)]).valid is True


def test_a_consumer_without_room_is_not_stalled() -> None:
    b = builder()
    b.consume("c1", prefetch=1)
    b.publish("p1-0")
    b.deliver("p1-0")  # held unacked: no room left
    b.at(1.0).publish("p1-1")
    b.at(20.0).ack("p1-0")
    b.deliver("p1-1")
    b.ack("p1-1")
    b.drain()
    assert run(b).valid is True


def test_room_made_by_an_ack_starts_the_idle_time() -> None:
    b = builder()
    b.consume("c1", prefetch=1)
    b.publish("p1-0")
    b.deliver("p1-0")
    b.at(1.0).publish("p1-1")
    b.at(10.0).ack("p1-0")
    b.at(20.0).deliver("p1-1")
    b.ack("p1-1")
    b.drain()
    assert violated(run(b), "stalled") == ["c1"]


def test_a_fault_in_force_or_just_healed_excuses_idleness() -> None:
    b = _waiting_from_1()
    b.at(2.0).heal(b.fault("latency", ["n3"]))
    assert run(_delivered_at(b, 20.0)).valid is True


def test_a_fault_healed_well_before_excuses_nothing() -> None:
    b = builder()
    b.heal(b.fault("latency", ["n3"]))
    b.at(5.0).consume("c1", prefetch=10)
    b.at(6.0).publish("p1-1")
    assert violated(run(_delivered_at(b, 20.0)), "stalled") == ["c1"]


def test_a_message_never_delivered_is_lost_not_a_stall() -> None:
    b = _waiting_from_1()
    b.at(20.0).drain()
    result = run(b)
    assert violated(result, "lost") == ["p1-1"]
    assert part(result, "stalled").valid is True


def test_a_consumer_without_a_known_prefetch_is_not_judged() -> None:
    assert run(_delivered_at(_waiting_from_1(prefetch=None), 20.0)).valid is True


def test_a_consumer_that_stopped_consuming_is_not_idle() -> None:
    b = _waiting_from_1()
    b.at(2.0).cancel("c1")
    assert run(_delivered_at(b, 20.0)).valid is True


def test_a_foreign_delivery_held_unacked_takes_room_too() -> None:
    b = builder()
    b.consume("c1", prefetch=1)
    b.deliver("garbage")  # not a message the harness published, but it fills the prefetch
    b.at(1.0).publish("p1-1")
    assert part(run(_delivered_at(b, 20.0)), "stalled").valid is True
