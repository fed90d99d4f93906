"""``duplicated``: a flagged redelivery is allowed but counted; an unflagged one is not."""

from __future__ import annotations

import pytest

from tests.checker.histories import builder, run, violated


def test_a_redelivery_flagged_redelivered_is_allowed_and_counted() -> None:
    b = builder()
    b.consume("c1")
    b.publish("p1-1")
    b.deliver("p1-1")
    b.nack("p1-1", requeue=True)
    b.deliver("p1-1", redelivered=True)
    b.ack("p1-1")
    b.drain()
    result = run(b)
    assert result.valid is True
    assert result.counts["duplicated"] == 1 and result.counts["redelivered"] == 1
    assert result.counts["duplicated_unflagged"] == 0


def test_a_second_delivery_without_the_flag_is_a_violation() -> None:
    b = builder()
    b.publish("p1-1")
    b.deliver("p1-1")
    b.ack("p1-1")
    b.deliver("p1-1", "c2")
    b.drain()
    result = run(b)
    assert result.valid is False
    assert violated(result, "duplicate") == ["p1-1"]
    assert result.counts["duplicated"] == 1 and result.counts["duplicated_unflagged"] == 1
    assert "without redelivered=true" in result.violations[0].explanation


# The first case: the broker sent p1-1 to c2, closed c2's connection and requeued it to
# c1, which read its flagged copy before c2 read the first one from its socket buffer.
@pytest.mark.parametrize(("flagged", "valid"), [((True, False), True),
                                                ((True, False, False), False)])
def test_only_a_second_delivery_without_the_flag_is_a_violation(
        flagged: tuple[bool, ...], valid: bool) -> None:
    b = builder()
    b.publish("p1-1")
    for i, redelivered in enumerate(flagged, start=1):
        b.deliver("p1-1", f"c{i}", redelivered=redelivered)
    b.drain()
    result = run(b)
    assert result.valid is valid
    assert result.counts["duplicated_unflagged"] == (0 if valid else 1)


def test_a_first_seen_delivery_flagged_redelivered_is_not_a_duplicate() -> None:
    # delivered before to a consumer whose connection died before it saw it
    b = builder()
    b.publish("p1-1")
    b.deliver("p1-1", redelivered=True)
    b.drain()
    result = run(b)
    assert result.valid is True
    assert result.counts["duplicated"] == 0 and result.counts["redelivered"] == 1


def test_a_flagged_redelivery_after_an_ack_is_allowed() -> None:
    # acks are not confirmed: one lost on the wire before a failover comes back
    b = builder()
    b.publish("p1-1")
    b.deliver("p1-1")
    b.ack("p1-1")
    b.heal(b.fault("kill", ["n1"]))
    b.deliver("p1-1", "c2", redelivered=True)
    b.drain()
    assert run(b).valid is True


def test_duplicates_through_basic_get_count_too() -> None:
    b = builder()
    b.publish("p1-1")
    b.get("p1-1")
    b.get("p1-1")
    b.get(None)
    b.drain()
    assert violated(run(b), "duplicate") == ["p1-1"]


def test_a_duplicate_carries_the_faults_between_publish_and_the_duplicate() -> None:
    b = builder()
    before = b.fault("latency", ["n2"])
    b.heal(before)
    b.publish("p1-1")
    b.deliver("p1-1")
    during = b.fault("partition", ["n3"])
    b.deliver("p1-1")
    b.heal(during)
    b.drain()
    (dup,) = run(b).violations
    assert [f.id for f in dup.faults] == [during]
    assert dup.faults[0].end is not None  # the context shows how the fault ended
