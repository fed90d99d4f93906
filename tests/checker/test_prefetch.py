"""``over-prefetch``: a consumer never holds more unanswered deliveries than its prefetch
(plus the slack for answers recorded late), also across a failover."""

from __future__ import annotations

from harness.checker import check
from harness.checker.prefetch import SLACK
from harness.history import HistoryBuilder

PREFETCH = 3


def consumer_history(held_at_most: int, *, deliveries: int = 12) -> HistoryBuilder:
    """c1 (prefetch 3) gets ``deliveries`` messages, answering the oldest whenever it
    holds ``held_at_most``."""
    b = HistoryBuilder()
    for i in range(1, deliveries + 1):
        b.publish(f"p1-{i}")
    b.consume(prefetch=PREFETCH)
    held: list[str] = []
    for i in range(1, deliveries + 1):
        if len(held) == held_at_most:
            b.ack(held.pop(0))
        b.deliver(f"p1-{i}")
        held.append(f"p1-{i}")
    for msg in held:
        b.ack(msg)
    b.drain()
    return b


def over_prefetch(b: HistoryBuilder) -> list[tuple[str, list[str]]]:
    result = check(b.build())
    return [(a.kind, a.messages) for a in result.violations if a.kind == "over-prefetch"]


def test_a_consumer_within_its_prefetch_and_slack_is_valid() -> None:
    result = check(consumer_history(PREFETCH + SLACK).build())
    assert result.valid is True, result.violations
    assert result.counts["over_prefetch"] == 0 and result.counts["prefetch_judged"] == 12


def test_a_broker_that_ignores_the_prefetch_is_caught() -> None:
    found = over_prefetch(consumer_history(PREFETCH + SLACK + 2, deliveries=8))
    # the 6th delivery held is the first past 3 + 2; then each one while 7 are held
    assert found == [("over-prefetch", ["p1-6", "p1-7", "p1-8"])]


def test_nacks_rejects_and_recover_free_slots_and_a_cancel_starts_again() -> None:
    b = HistoryBuilder()
    for i in range(1, 13):
        b.publish(f"p1-{i}")
    b.consume(prefetch=PREFETCH)
    for i in range(1, 5):
        b.deliver(f"p1-{i}")
    b.nack("p1-1", requeue=True)
    b.reject("p1-2", requeue=False)
    b.add("c1", "recover", "ok", queue="q", requeue=True)  # gives back p1-3, p1-4
    for i in range(5, 10):
        b.deliver(f"p1-{i}")
    b.cancel(type="info")  # cancelled by the broker, still holding five
    b.consume(prefetch=PREFETCH)
    for i in range(10, 13):
        b.deliver(f"p1-{i}")
    for i in (1, 3, 4, *range(5, 13)):
        b.ack(f"p1-{i}")
    b.drain()
    assert over_prefetch(b) == []


def failover_history(answer_first: bool) -> HistoryBuilder:
    """c1 (prefetch 3) on n2 holds three deliveries when the master's node dies; the
    promoted master redelivers them, after c1 answered the old copies or not."""
    b = HistoryBuilder()
    for i in range(1, 4):
        b.publish(f"p1-{i}")
    b.consume(prefetch=PREFETCH, node="n2")
    for i in range(1, 4):
        b.deliver(f"p1-{i}", node="n2")
    kill = b.fault("kill", ["n1"])
    b.node_event("promotion", "n2", queue="q")
    for i in range(1, 4):
        if answer_first:
            b.ack(f"p1-{i}")
        b.deliver(f"p1-{i}", redelivered=True, node="n2")
    b.heal(kill)
    for i in range(1, 4):
        b.ack(f"p1-{i}")
        if not answer_first:
            b.ack(f"p1-{i}")
    b.drain()
    return b


def test_copies_held_across_a_failover_count_until_answered() -> None:
    assert over_prefetch(failover_history(answer_first=True)) == []
    # six held: the redelivery of p1-3 is the first past 3 + 2
    assert over_prefetch(failover_history(answer_first=False)) == [
        ("over-prefetch", ["p1-3"])]


def test_unlimited_no_ack_and_get_are_not_judged() -> None:
    b = HistoryBuilder()
    for i in range(1, 10):
        b.publish(f"p1-{i}")
    b.consume()  # no prefetch said: unlimited
    b.consume("a1", mode="no-ack", prefetch=PREFETCH)
    for i in range(1, 7):
        b.deliver(f"p1-{i}", "c1" if i % 2 else "a1", mode="ack" if i % 2 else "no-ack")
    for i in range(7, 10):
        b.get(f"p1-{i}")
    for i in (1, 3, 5, 7, 8, 9):
        b.ack(f"p1-{i}", "c1" if i < 7 else "g1")
    b.drain()
    result = check(b.build())
    assert result.counts["over_prefetch"] == 0 and result.counts["prefetch_judged"] == 0
