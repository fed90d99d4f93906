"""``overtaken``: a confirmed message kept from every consumer while later messages of
its producer keep being delivered, long after the faults ended; and the passing-over a
correct broker does show (in flight around a failure, across a publisher's reconnect)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.checker import check
from harness.checker.overtaken import Overtaken
from harness.checker.result import Result
from harness.history import HistoryBuilder
from tests.checker.histories import builder, excused, run, violated

LATER = 20  # p1-1 .. p1-20, first delivered one every 1.5 s from t=1
_ISOLATE_N1 = {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}


def _passed_over(heal_at: float = 2.0, back_at: float | None = 40.0, *,
                 fault: str = "kill", partition_handling: str = "pause_minority",
                 reconnect: bool = False, consumer: str = "c1") -> HistoryBuilder:
    """p1-0 .. p1-20 published at t=0 (p1 reconnects after p1-0 if ``reconnect``); a
    ``fault`` of n1 from 0.4 s to ``heal_at``; ``consumer`` gets p1-1 .. p1-20 first,
    one every 1.5 s from t=1; p1-0 comes at ``back_at`` (never if None)."""
    b = builder(partition_handling=partition_handling)
    b.consume("c1", prefetch=5)
    b.publish("p1-0")
    if reconnect:
        b.disconnect("p1", type="info")
    for n in range(1, LATER + 1):
        b.publish(f"p1-{n}")
    detail: dict[str, Any] = {"grudge": _ISOLATE_N1} if fault == "partition" else {}
    started = b.at(0.4).fault(fault, ["n1"], **detail)
    events = [(heal_at, "heal", "")]
    events += [(1.0 + 1.5 * (n - 1), "deliver", f"p1-{n}") for n in range(1, LATER + 1)]
    if back_at is not None:
        events.append((back_at, "back", "p1-0"))
    for time, what, msg in sorted(events):
        b.at(time)
        if what == "heal":
            b.heal(started)
        elif what == "deliver" and consumer == "drain":
            b.get(msg, consumer="drain")
        else:
            b.deliver(msg, redelivered=what == "back")
            b.ack(msg)
    b.drain()
    return b


def _overtaken(b: HistoryBuilder, checker: Overtaken | None = None) -> Result:
    return check(b.build(), [checker or Overtaken()])


def test_a_message_passed_over_long_after_the_faults_ended_is_overtaken() -> None:
    assert violated(_overtaken(_passed_over()), "overtaken") == ["p1-0"]


def test_the_full_checker_calls_such_a_run_invalid() -> None:
    result = run(_passed_over())
    assert result.valid is False
    assert violated(result, "overtaken") == ["p1-0"]


def test_a_message_that_comes_back_soon_after_the_heal_is_fine() -> None:
    """The promoted mirror requeued it: it came again within the bound."""
    assert _overtaken(_passed_over(back_at=6.5)).valid is True


def test_passing_over_while_faults_last_is_not_judged() -> None:
    """Faults until t=25.2: the bound counts from there, past the last overtaking."""
    assert _overtaken(_passed_over(heal_at=25.2)).valid is True


def test_the_bound_is_configurable() -> None:
    assert _overtaken(_passed_over(), Overtaken(bound_s=30.0)).valid is True


def test_messages_published_before_the_producer_reconnected_have_no_order() -> None:
    assert _overtaken(_passed_over(reconnect=True)).valid is True


def test_the_drain_does_not_overtake() -> None:
    """Gets of the final drain decide nothing (the ordering checker judges those)."""
    assert _overtaken(_passed_over(consumer="drain")).valid is True


def test_a_message_never_delivered_is_left_to_lost() -> None:
    result = _overtaken(_passed_over(back_at=None))
    assert result.valid is True and result.counts["overtaken"] == 0


def test_a_message_a_split_brain_may_have_lost_is_a_caveat() -> None:
    result = _overtaken(_passed_over(heal_at=3.0, fault="partition",
                                     partition_handling="autoheal"))
    assert result.valid is True
    assert excused(result, "partition-split-brain") == ["p1-0"]


def _l1_holding_p1_0() -> HistoryBuilder:
    """c1 and l1 consume; p1-0 .. p1-20 published at t=0; l1 gets p1-0 at 0.5."""
    b = builder()
    b.consume("c1", prefetch=5)
    b.consume("l1", prefetch=5)
    for n in range(LATER + 1):
        b.publish(f"p1-{n}")
    b.at(0.5).deliver("p1-0", consumer="l1")
    return b


def _given_back(back_at: float | None, *, how: str = "disconnect",
                fault_until: float | None = None) -> HistoryBuilder:
    """`_l1_holding_p1_0`, then l1 gives p1-0 back unsettled at 1.0 (``how``: its own
    close, a lost connection, or a recover); c1 gets
    p1-1 .. p1-20 one every 1.5 s from 1.5; p1-0 comes again at ``back_at`` (in the
    drain if None)."""
    b = _l1_holding_p1_0()
    if fault_until is not None:
        started = b.at(0.8).fault("kill", ["n2"])
    b.at(1.0)
    if how == "recover":
        b.add("l1", "recover", "ok", queue="q", requeue=True)
    else:
        b.disconnect("l1", type="ok" if how == "disconnect" else "info")
    events = [(1.5 + 1.5 * (n - 1), "deliver", f"p1-{n}") for n in range(1, LATER + 1)]
    if back_at is not None:
        events.append((back_at, "back", "p1-0"))
    if fault_until is not None:
        events.append((fault_until, "heal", ""))
    for time, what, msg in sorted(events):
        b.at(time)
        if what == "heal":
            b.heal(started)
        else:
            b.deliver(msg, redelivered=what == "back")
            b.ack(msg)
    if back_at is None:
        b.at(40.0).get("p1-0", consumer="drain", redelivered=True)
    b.drain()
    return b


@pytest.mark.parametrize("how", ["disconnect", "recover"])
def test_a_delivery_given_back_and_kept_back_while_later_ones_flow_is_overtaken(
        how: str) -> None:
    """A close (or recover) that requeued nothing: the message came only with the drain."""
    result = _overtaken(_given_back(None, how=how))
    assert violated(result, "overtaken") == ["p1-0"]
    assert "given back unsettled by l1" in result.violations[0].explanation


def test_a_delivery_given_back_that_comes_again_soon_is_fine() -> None:
    assert _overtaken(_given_back(2.5)).valid is True


def test_a_delivery_on_a_lost_connection_is_left_to_failure_detection() -> None:
    assert _overtaken(_given_back(None, how="lost")).valid is True


def test_a_delivery_given_back_while_a_fault_lasts_counts_from_its_end() -> None:
    assert _overtaken(_given_back(31.0, fault_until=26.9)).valid is True
    assert violated(_overtaken(_given_back(31.0, fault_until=19.9)), "overtaken") == ["p1-0"]


def test_a_delivery_that_came_again_before_its_receiver_left_is_not_given_back_twice() -> None:
    """The broker requeued l1's delivery as the close began and c1 got it before l1
    recorded its disconnect: l1 no longer held it when it left."""
    b = _l1_holding_p1_0()
    b.at(0.9).deliver("p1-0", consumer="c1", redelivered=True)  # held by c1 to the end
    b.at(1.0).disconnect("l1")
    for n in range(1, LATER + 1):
        b.at(1.5 + 1.5 * (n - 1)).deliver(f"p1-{n}")
        b.ack(f"p1-{n}")
    b.at(40.0).deliver("p1-0", redelivered=True)  # c1 gave it back some other way
    b.drain()
    assert _overtaken(b).valid is True
