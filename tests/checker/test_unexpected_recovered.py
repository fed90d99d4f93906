"""``unexpected`` deliveries and ``recovered`` messages."""

from __future__ import annotations

from tests.checker.histories import builder, part, run, violated


def test_a_delivery_of_a_message_never_published_is_unexpected() -> None:
    b = builder()
    b.publish("p1-1")
    b.deliver("p1-1")
    b.deliver("p1-2")  # same producer, never published
    b.deliver("p9-1")  # unknown producer
    b.deliver("not-an-id")
    b.ack("not-an-id")
    b.drain()
    result = run(b)
    assert result.valid is False
    assert violated(result, "unexpected") == ["not-an-id", "p1-2", "p9-1"]
    assert result.counts["unexpected"] == 3


def test_a_message_delivered_from_another_queue_is_unexpected() -> None:
    b = builder()
    b.publish("p1-1", queue="q")
    b.deliver("p1-1", queue="other")
    b.drain(queue="q")
    result = run(b)
    assert violated(result, "unexpected") == ["p1-1"]
    assert "published to q but delivered from other" in result.violations[0].explanation


def test_a_message_whose_publish_definitely_failed_must_not_be_delivered() -> None:
    b = builder()
    b.publish("p1-1", outcome="fail")
    b.deliver("p1-1")
    b.drain()
    result = run(b)
    assert violated(result, "unexpected") == ["p1-1"]
    assert result.counts["failed"] == 1


def test_a_rolled_back_message_must_not_be_delivered_a_nacked_one_may() -> None:
    """A nack leaves open whether the broker kept the message; a tx.rollback-ok does
    not: the transaction's messages were never published."""
    b = builder()
    for msg, rolled_back in (("t1-1", True), ("t1-2", None)):
        b.add("t1", "publish", "invoke", msg=msg, queue="q", node="n1")
        b.add("t1", "confirm", "fail", msg=msg, queue="q", node="n1", rolled_back=rolled_back)
        b.deliver(msg)
    b.drain()
    result = run(b)
    assert violated(result, "unexpected") == ["t1-1"]
    assert (result.counts["failed"], result.counts["nacked"]) == (1, 1)


def test_every_published_message_delivered_is_not_unexpected() -> None:
    b = builder()
    b.publish("p1-1", outcome="info")
    b.deliver("p1-1")
    b.drain()
    assert part(run(b), "unexpected").valid is True


def test_indeterminate_nacked_and_pending_publishes_that_arrive_are_recovered() -> None:
    b = builder()
    b.publish("p1-1", outcome="info")
    b.publish("p1-2", outcome="nack")
    b.publish("p1-3", outcome=None)
    b.publish("p1-4")
    b.publish("p1-5", outcome="info")  # never delivered: indeterminate, not recovered
    for msg in ("p1-1", "p1-2", "p1-3", "p1-4"):
        b.deliver(msg)
    b.drain()
    result = run(b)
    assert result.valid is True
    assert result.data["recovered"] == ["p1-1", "p1-2", "p1-3"]
    counts = result.counts
    assert (counts["recovered"], counts["recovered_nacked"]) == (3, 1)
    assert (counts["attempted"], counts["confirmed"], counts["nacked"],
            counts["indeterminate"], counts["delivered"]) == (5, 1, 1, 3, 4)
