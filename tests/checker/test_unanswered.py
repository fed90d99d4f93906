"""``unanswered``: a confirm the publisher gave up on while the cluster was whole, and the
timeouts a fault or a memory alarm explains."""

from __future__ import annotations

from harness.history import HistoryBuilder
from tests.checker.histories import builder, part, run, violated


def _timed_out(b: HistoryBuilder, msg: str, published: float, gave_up: float,
               error: str = "TimeoutError") -> None:
    b.at(published).add("p1", "publish", "invoke", msg=msg, queue="q", node="n1")
    b.at(gave_up).add("p1", "confirm", "info", msg=msg, queue="q", node="n1", error=error)


def _finished(b: HistoryBuilder) -> HistoryBuilder:
    b.at(b.now + 1).drain()
    return b


def test_a_confirm_timeout_with_no_fault_near_is_a_violation() -> None:
    b = builder()
    _timed_out(b, "p1-1", 1.0, 11.0)
    result = run(_finished(b))
    assert violated(result, "unanswered") == ["p1-1"]
    assert result.valid is False


def test_a_confirm_timeout_stuck_behind_a_mirror_gone_since_long_ago() -> None:
    """The mirror died while the confirm waited and came back 3 s later: the confirm must
    still come once the cluster saw it go."""
    b = builder()
    b.at(1.0).add("p1", "publish", "invoke", msg="p1-1", queue="q", node="n1")
    killed = b.at(1.5).fault("kill", ["n3"])
    b.at(4.5).heal(killed)
    b.at(11.0).add("p1", "confirm", "info", msg="p1-1", queue="q", node="n1",
                   error="TimeoutError")
    assert violated(run(_finished(b)), "unanswered") == ["p1-1"]


def test_timeouts_a_fault_or_an_alarm_explains_are_not_violations() -> None:
    in_force = builder()
    in_force.at(0.5).fault("kill", ["n1"])  # never healed
    _timed_out(in_force, "p1-1", 1.0, 11.0)
    healed_just_before = builder()
    cut = healed_just_before.at(2.0).fault("partition", ["n1"])
    healed_just_before.at(8.0).heal(cut)
    _timed_out(healed_just_before, "p1-1", 9.0, 11.0)
    alarm = builder()
    alarm.at(0.5).node_event("node-event", "n1", node="n1", event="memory_alarm",
                             state="set")
    _timed_out(alarm, "p1-1", 1.0, 11.0)
    for name, b in (("in force", in_force), ("healed just before", healed_just_before),
                    ("memory alarm", alarm)):
        checked = part(run(_finished(b)), "unanswered")
        assert checked.valid is True, name
        assert checked.counts["timeouts_during_faults"] == 1, name


def test_other_unknown_outcomes_are_not_judged() -> None:
    b = builder()
    _timed_out(b, "p1-1", 1.0, 2.0, error="ConnectionLost: channel closed")
    b.publish("p1-2", outcome="info")  # no error said
    checked = part(run(_finished(b)), "unanswered")
    assert checked.valid is True
    assert checked.counts == {"unanswered": 0, "timeouts_during_faults": 0}
