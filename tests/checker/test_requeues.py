"""``reordered`` across requeues: a message requeued by a consumer with prefetch P
comes back before that consumer gets more than P later messages of its producer; and
the final drain's gets are excused by a failover only."""

from __future__ import annotations

from harness.history import HistoryBuilder
from tests.checker.histories import builder, part, run, violated


def _requeued_by_c1(prefetch: int | None = 2) -> HistoryBuilder:
    """c1 (prefetch ``prefetch``) gets p1-1 and nacks it with requeue."""
    b = builder()
    b.consume("c1", prefetch=prefetch)
    b.consume("c2", prefetch=prefetch)
    for seq in range(1, 7):
        b.publish(f"p1-{seq}")
    b.deliver("p1-1")
    b.nack("p1-1", requeue=True)
    return b


def _then(b: HistoryBuilder, *later: str, back_to: str = "c1") -> HistoryBuilder:
    for msg in later:
        b.deliver(msg)
        b.ack(msg)
    b.deliver("p1-1", back_to, redelivered=True)
    b.ack("p1-1", back_to)
    for seq in range(1, 7):
        if f"p1-{seq}" not in later and seq != 1:
            b.deliver(f"p1-{seq}")
            b.ack(f"p1-{seq}")
    b.drain()
    return b


def test_more_than_prefetch_later_messages_before_the_requeued_one_is_a_reordering() -> None:
    result = run(_then(_requeued_by_c1(), "p1-2", "p1-3", "p1-4"))
    assert violated(result, "reordered") == ["p1-1"]
    assert part(result, "ordering").counts["reordered_after_requeue"] == 1


def test_up_to_prefetch_later_messages_may_have_been_in_flight() -> None:
    result = run(_then(_requeued_by_c1(), "p1-2", "p1-3"))
    assert result.valid is True


def test_a_requeued_message_that_goes_to_another_consumer_is_not_judged() -> None:
    result = run(_then(_requeued_by_c1(), "p1-2", "p1-3", "p1-4", back_to="c2"))
    assert part(result, "ordering").valid is True
    assert part(result, "ordering").counts["requeue_order_unjudged"] == 1


def test_a_consumer_without_a_known_prefetch_is_not_judged() -> None:
    result = run(_then(_requeued_by_c1(prefetch=None), "p1-2", "p1-3", "p1-4"))
    assert part(result, "ordering").valid is True


def test_a_disconnect_in_between_may_requeue_anything() -> None:
    b = _requeued_by_c1()
    b.disconnect("c2", type="info")
    result = run(_then(b, "p1-2", "p1-3", "p1-4"))
    assert part(result, "ordering").valid is True


def test_redeliveries_of_later_messages_do_not_count() -> None:
    b = _requeued_by_c1()
    b.deliver("p1-2", "c2")
    b.disconnect("c2")  # requeues p1-2, flagged when it comes again
    b.deliver("p1-2", redelivered=True)
    b.ack("p1-2")
    result = run(_then(b, "p1-3", "p1-4"))
    assert part(result, "ordering").valid is True


def _drain_gets(b: HistoryBuilder, *msgs: str) -> None:
    for msg in msgs:
        b.add("drain", "get", "ok", msg=msg, queue="q", redelivered=False, mode="ack")
        b.ack(msg, "drain")


def test_the_drain_gets_a_requeued_message_at_its_place() -> None:
    b = builder()
    b.consume("c1")
    for seq in range(1, 4):
        b.publish(f"p1-{seq}")
    b.deliver("p1-2")
    b.disconnect("c1")  # p1-2 goes back before p1-3
    b.at(5.0)
    _drain_gets(b, "p1-1", "p1-3")
    b.add("drain", "get", "ok", msg="p1-2", queue="q", redelivered=True, mode="ack")
    b.ack("p1-2", "drain")
    b.drain()
    result = run(b)
    assert violated(result, "reordered") == ["p1-2"]
    assert result.data["reordered"] == [["p1-2", "p1-3"]]


def test_a_requeue_recorded_just_before_the_drain_may_still_be_under_way() -> None:
    b = builder()
    b.consume("c1")
    for seq in range(1, 4):
        b.publish(f"p1-{seq}")
    b.deliver("p1-2")
    b.at(5.0).disconnect("c1")
    b.at(5.5)
    _drain_gets(b, "p1-1", "p1-3")
    b.add("drain", "get", "ok", msg="p1-2", queue="q", redelivered=True, mode="ack")
    b.ack("p1-2", "drain")
    b.drain()
    assert run(b).valid is True


def test_a_producer_that_reconnected_has_no_order_across_its_connections() -> None:
    b = builder()
    b.publish("p1-1")
    b.disconnect("p1", type="info")
    b.publish("p1-2")
    b.at(5.0)
    _drain_gets(b, "p1-2", "p1-1")
    b.drain()
    assert run(b).valid is True


def test_a_failover_during_the_drain_excuses_its_reordering() -> None:
    b = builder()
    for seq in range(1, 3):
        b.publish(f"p1-{seq}")
    _drain_gets(b, "p1-2")
    b.heal(b.fault("kill", ["n1"]))
    _drain_gets(b, "p1-1")
    b.drain()
    assert run(b).valid is True


def _got_and_requeued_by_g1() -> HistoryBuilder:
    b = builder()
    for seq in range(1, 4):
        b.publish(f"p1-{seq}")
    b.get("p1-1")
    b.reject("p1-1", "g1", requeue=True)
    return b


def test_a_getter_that_requeued_a_message_must_get_it_before_later_ones() -> None:
    b = _got_and_requeued_by_g1()
    for msg in ("p1-2", "p1-1", "p1-3"):
        b.get(msg, redelivered=msg == "p1-1")
        b.ack(msg, "g1")
    b.drain()
    assert violated(run(b), "reordered") == ["p1-1"]


def test_a_getter_that_gets_its_requeued_message_next_is_valid() -> None:
    b = _got_and_requeued_by_g1()
    for msg in ("p1-1", "p1-2", "p1-3"):
        b.get(msg, redelivered=msg == "p1-1")
        b.ack(msg, "g1")
    b.drain()
    assert run(b).valid is True


def test_a_consumer_that_requeues_a_get_is_judged_by_its_prefetch() -> None:
    b = builder()
    b.consume("g1", prefetch=5)  # also consuming: deliveries may be in flight
    for seq in range(1, 4):
        b.publish(f"p1-{seq}")
    b.get("p1-1")
    b.reject("p1-1", "g1", requeue=True)
    for msg in ("p1-2", "p1-1", "p1-3"):
        b.deliver(msg, "g1", redelivered=msg == "p1-1")
        b.ack(msg, "g1")
    b.drain()
    assert run(b).valid is True


def _six_later(b: HistoryBuilder) -> HistoryBuilder:
    for seq in range(7, 13):
        b.publish(f"p1-{seq}")
    return b


def test_a_message_requeued_behind_many_is_accused_before_it_comes_back() -> None:
    """Put at the tail of a long queue, it returns only after a fault or disconnect
    (which ends every watch); the consumer's fifth later message already tells."""
    b = _six_later(_requeued_by_c1())
    for seq in range(2, 7):
        b.deliver(f"p1-{seq}")
        b.ack(f"p1-{seq}")
    b.disconnect("c1", type="info")
    assert violated(run(_then(b, back_to="c2")), "reordered") == ["p1-1"]


def test_a_copy_another_consumer_got_first_may_be_recorded_slightly_late() -> None:
    b = _six_later(_requeued_by_c1())
    result = run(_then(b, "p1-2", "p1-3", "p1-4", "p1-5", back_to="c2"))
    assert part(result, "ordering").valid is True


def test_a_requeue_made_while_a_failover_is_under_way_is_not_judged() -> None:
    """c1 holds p1-1 when the master is killed; the promoted mirror has already given it
    to c2 when c1's reject (of its stale copy) comes: that requeue moves nothing. The
    same requeue once every fault has ended is judged."""
    for in_force, judged in ((True, False), (False, True)):
        b = builder()
        b.consume("c1", prefetch=1)
        b.consume("c2", prefetch=1)
        for seq in range(1, 7):
            b.publish(f"p1-{seq}")
        b.deliver("p1-1")
        kill = b.fault("kill", ["n1"])
        if not in_force:
            b.heal(kill)
        b.deliver("p1-1", "c2", redelivered=True)
        b.reject("p1-1", requeue=True)
        for seq in range(2, 7):
            b.deliver(f"p1-{seq}")
            b.ack(f"p1-{seq}")
        b.ack("p1-1", "c2")
        if in_force:
            b.heal(kill)
        b.drain()
        result = run(b)
        assert (violated(result, "reordered") == ["p1-1"]) is judged, result.violations
