"""``corrupted``: a delivery whose client found it different from what was published
is a violation whatever the faults; whole deliveries are not."""

from __future__ import annotations

from harness.checker import check
from harness.history import HistoryBuilder


def test_a_delivery_recorded_corrupt_is_a_violation_even_during_a_fault() -> None:
    b = HistoryBuilder()
    b.publish("p1-1")
    b.publish("p1-2")
    b.consume(prefetch=5)
    b.deliver("p1-1")
    kill = b.fault("kill", ["n1"])
    b.add("c1", "deliver", "ok", msg="p1-2", queue="q", redelivered=False, mode="ack",
          node="n1", corrupt="a body of 131072 bytes, 200000 published, different from "
          "byte 131072")
    b.heal(kill)
    b.ack("p1-1")
    b.ack("p1-2")
    b.drain()
    result = check(b.build())
    assert result.valid is False
    (found,) = [a for a in result.violations if a.kind == "corrupted"]
    assert found.messages == ["p1-2"] and "131072 bytes" in found.explanation
    assert [f.id for f in found.faults] == [kill]


def test_whole_deliveries_are_valid() -> None:
    b = HistoryBuilder()
    b.publish("p1-1")
    b.get("p1-1")
    b.add("g1", "ack", "ok", msg="p1-1", queue="q")
    b.drain()
    result = check(b.build())
    assert result.valid is True and result.counts["corrupted"] == 0
