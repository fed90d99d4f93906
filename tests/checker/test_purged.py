"""``purged``: what a purge removed must never be delivered again, unless a fault near
the purge may have kept it from the mirrors; ``lost`` counts nothing a purge may have
removed."""

from __future__ import annotations

from harness.checker.purges import GRACE_S
from harness.history import HistoryBuilder
from tests.checker.histories import builder, part, run, violated


def _purged_then_drained(*, fault_at: float | None = None) -> HistoryBuilder:
    """p1-1 and p1-2 confirmed, then purged; p1-3 published after the purge; a fault
    (if any) at ``fault_at``; the drain delivers p1-2 and p1-3."""
    b = builder()
    b.at(1.0).publish("p1-1")
    b.publish("p1-2")
    b.at(2.0).purge(count=2)
    b.publish("p1-3")
    if fault_at is not None:
        b.at(fault_at).fault("kill", ["n1"])
    b.at(10.0).get("p1-2", "drain")
    b.get("p1-3", "drain")
    b.drain()
    return b


def test_a_purged_message_delivered_again_is_resurrected() -> None:
    result = run(_purged_then_drained())
    assert result.valid is False
    assert violated(result, "resurrected") == ["p1-2"]
    purged = part(result, "purged")
    assert purged.counts["purged_resurrected"] == 1 and purged.counts["purged"] == 2


def test_a_fault_right_after_the_purge_excuses_a_return() -> None:
    result = run(_purged_then_drained(fault_at=2.0 + GRACE_S / 2))
    assert violated(result, "resurrected") == []
    assert part(result, "purged").counts["purged_allowed"] == 1


def test_a_fault_long_after_the_purge_excuses_nothing() -> None:
    result = run(_purged_then_drained(fault_at=2.0 + GRACE_S * 2))
    assert violated(result, "resurrected") == ["p1-2"]


def test_what_a_purge_may_have_removed_is_not_lost_but_what_came_after_is() -> None:
    b = builder()
    b.at(1.0).publish("p1-1")
    b.at(2.0).purge(count=1)
    b.publish("p1-2")  # after the purge answered: must be drained
    b.at(10.0).drain()
    result = run(b)
    assert violated(result, "lost") == ["p1-2"]
    assert part(result, "lost").counts["maybe_purged"] == 1


def test_a_purge_without_an_answer_may_remove_anything_before_the_end() -> None:
    b = builder()
    b.at(1.0).publish("p1-1")
    b.at(2.0).purge(type="info")
    b.publish("p1-2")
    b.get("p1-1", "drain")  # it may not have happened: judged by nobody
    b.at(10.0).drain()
    result = run(b)
    assert result.valid is True, result.violations
    assert part(result, "purged").counts["purged"] == 0


def test_a_message_delivered_before_the_purge_is_not_judged() -> None:
    """Taken before the purge and given back: whether the requeue reached the master
    before the purge did, the record cannot tell."""
    b = builder()
    b.at(1.0).publish("p1-1")
    b.get("p1-1", "g1")
    b.reject("p1-1", "g1")
    b.at(2.0).purge()
    b.at(10.0).get("p1-1", "drain", redelivered=True)
    b.drain()
    result = run(b)
    assert violated(result, "resurrected") == []
