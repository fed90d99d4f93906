"""``lost-unacked``: deliveries in ack mode never settled and never delivered again."""

from __future__ import annotations

from tests.checker.histories import builder, excused, part, run, violated


def test_an_unacked_delivery_not_redelivered_after_its_connection_closed_is_lost() -> None:
    b = builder()
    b.consume("c1")
    b.publish("p1-1")
    b.deliver("p1-1")
    b.disconnect("c1", type="info")
    b.drain()
    result = run(b)
    assert violated(result, "lost-unacked") == ["p1-1"]
    assert violated(result, "lost") == []  # it was delivered: not the lost checker's
    assert result.valid is False


def test_an_unacked_delivery_redelivered_elsewhere_is_valid() -> None:
    b = builder()
    b.consume("c1")
    b.publish("p1-1")
    b.deliver("p1-1")
    b.disconnect("c1", type="info")
    b.deliver("p1-1", "c2", redelivered=True)
    b.ack("p1-1", "c2")
    b.drain()
    assert run(b).valid is True


def test_an_unacked_delivery_got_by_the_drain_is_valid() -> None:
    b = builder()
    b.consume("c1")
    b.publish("p1-1")
    b.deliver("p1-1")
    b.disconnect("c1")
    b.add("drain", "get", "ok", msg="p1-1", queue="q", redelivered=True, mode="ack")
    b.ack("p1-1", "drain")
    b.drain()
    assert run(b).valid is True


def test_a_nack_without_requeue_settles_but_with_requeue_it_must_come_back() -> None:
    b = builder()
    b.consume("c1")
    b.publish("p1-1")
    b.publish("p1-2")
    b.deliver("p1-1")
    b.nack("p1-1", requeue=False)
    b.deliver("p1-2")
    b.reject("p1-2", requeue=True)
    b.disconnect("c1")
    b.drain()
    assert violated(run(b), "lost-unacked") == ["p1-2"]


def test_a_get_with_ack_left_unacked_is_judged_like_a_delivery() -> None:
    b = builder()
    b.publish("p1-1")
    b.add("g1", "get", "ok", msg="p1-1", queue="q", redelivered=False, mode="ack")
    b.disconnect("g1", type="info")
    b.drain()
    assert violated(run(b), "lost-unacked") == ["p1-1"]


def test_no_ack_deliveries_are_not_concerned() -> None:
    b = builder()
    b.consume("c1", mode="no-ack")
    b.publish("p1-1")
    b.deliver("p1-1", mode="no-ack")
    b.disconnect("c1")
    b.drain()
    assert run(b).valid is True


def test_a_delivery_whose_connection_is_still_open_is_not_judged() -> None:
    b = builder()
    b.consume("c1")
    b.publish("p1-1")
    b.deliver("p1-1")
    b.drain()
    result = run(b)
    assert result.valid is True
    assert part(result, "lost-unacked").counts["unacked_held"] == 1


def test_an_unacked_delivery_lost_with_an_unsynchronised_promotion_is_a_caveat() -> None:
    b = builder()
    b.consume("c1", node="n1")
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n2", "n3"]))  # the mirrors rejoin empty
    b.deliver("p1-1")
    kill = b.fault("kill", ["n1"])
    b.disconnect("c1", type="info")
    b.heal(kill)
    b.drain()
    result = run(b)
    assert excused(result, "unsynchronised-promotion") == ["p1-1"]
    assert violated(result, "lost-unacked") == []
    assert result.valid is True


def test_without_a_drain_an_unacked_loss_cannot_be_told() -> None:
    b = builder()
    b.consume("c1")
    b.publish("p1-1")
    b.deliver("p1-1")
    b.disconnect("c1")
    assert part(run(b), "lost-unacked").valid == "unknown"


def test_a_message_never_confirmed_carries_no_promise() -> None:
    """A paused master that resumes may deliver what it took in before it learnt it was
    deposed, then drop it: the publisher never had a confirm."""
    b = builder()
    b.consume("c1")
    b.publish("p1-1", outcome="info")
    b.deliver("p1-1")
    b.disconnect("c1", type="info")
    b.drain()
    result = run(b)
    assert result.valid is True
    assert part(result, "lost-unacked").counts["unacked_unjudged"] == 1


def test_a_stale_copy_of_a_message_acked_before_is_not_owed_again() -> None:
    """A node paused with a delivery in its buffers passes it on when it resumes, after
    the master had requeued it and another consumer acked it."""
    b = builder()
    b.consume("c1")
    b.consume("c2")
    b.publish("p1-1")
    b.deliver("p1-1", "c2", redelivered=True)
    b.ack("p1-1", "c2")
    b.deliver("p1-1", "c1")
    b.disconnect("c1", type="info")
    b.drain()
    assert violated(run(b), "lost-unacked") == []
