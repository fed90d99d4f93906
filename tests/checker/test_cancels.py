"""Broker cancels against ``x-cancel-on-ha-failover``: ``cancel-missing`` and
``cancel-unexpected``, with the sessions the record cannot judge."""

from __future__ import annotations

from harness.checker import check
from harness.checker.cancels import CancelMissing
from harness.history import HistoryBuilder
from tests.checker.histories import NODES, builder, run, violated


def _consumer_on_n2(asked: bool | None = True, members: tuple[str, ...] = NODES,
                    policy: dict[str, str] | None = None) -> HistoryBuilder:
    b = builder(members=members, policy=policy)
    b.connect("c1", node="n2")
    b.consume("c1", node="n2", cancel_on_failover=asked)
    return b


def _master_killed_at_5(b: HistoryBuilder) -> HistoryBuilder:
    b.at(5.0)
    b.fault("kill", ["n1"])
    return b


def _ends_at_30(b: HistoryBuilder) -> HistoryBuilder:
    b.at(30.0).drain()
    return b


def test_no_cancel_after_the_masters_failure_is_missing() -> None:
    result = run(_ends_at_30(_master_killed_at_5(_consumer_on_n2())))
    assert violated(result, "cancel-missing") == ["c1"]
    assert result.valid is False


def test_a_cancel_within_the_bound_is_valid() -> None:
    b = _master_killed_at_5(_consumer_on_n2())
    b.at(8.0).cancel("c1", type="info")
    assert run(_ends_at_30(b)).valid is True


def test_a_cancel_after_the_bound_is_missing() -> None:
    b = _master_killed_at_5(_consumer_on_n2())
    b.at(16.0).cancel("c1", type="info")
    assert violated(run(_ends_at_30(b)), "cancel-missing") == ["c1"]


def test_a_promotion_report_times_the_bound_but_its_absence_excuses_nothing() -> None:
    b = _master_killed_at_5(_consumer_on_n2())
    b.at(9.0).node_event("promotion", "n2", queue="q", node="n2")
    b.at(18.0).cancel("c1", type="info")  # 9 s after the report, 13 s after the kill
    assert run(_ends_at_30(b)).valid is True


def test_the_bound_is_configurable() -> None:
    b = _master_killed_at_5(_consumer_on_n2())
    b.at(16.0).cancel("c1", type="info")
    assert check(_ends_at_30(b).build(), [CancelMissing(bound_s=20.0)]).valid is True


def test_a_session_that_ends_before_the_bound_is_not_judged() -> None:
    b = _master_killed_at_5(_consumer_on_n2())
    b.at(7.0).disconnect("c1", type="info")
    assert run(_ends_at_30(b)).valid is True


def test_a_history_that_ends_before_the_bound_is_not_judged() -> None:
    b = _master_killed_at_5(_consumer_on_n2())
    b.at(9.0).drain()
    assert run(b).valid is True


def test_a_mirror_failing_moves_no_master_and_asks_for_no_cancel() -> None:
    b = _consumer_on_n2()
    b.at(5.0).fault("kill", ["n3"])
    assert run(_ends_at_30(b)).valid is True


def test_a_consumer_whose_own_node_is_paused_is_not_judged() -> None:
    b = builder()
    b.consume("c1", node="n1", cancel_on_failover=True)
    b.at(5.0).fault("pause", ["n1"])
    assert run(_ends_at_30(b)).valid is True


def test_a_consumer_that_did_not_ask_is_not_cancelled_on_failover() -> None:
    b = _master_killed_at_5(_consumer_on_n2(asked=False))
    b.at(7.0).cancel("c1", type="info")
    assert violated(run(_ends_at_30(b)), "cancel-unexpected") == ["c1"]


def test_a_consumer_that_did_not_ask_may_be_cancelled_when_its_queue_is_down() -> None:
    b = _consumer_on_n2(asked=False, members=("n1",), policy={"ha-mode": "none"})
    _master_killed_at_5(b)
    b.at(7.0).cancel("c1", type="info")
    assert run(_ends_at_30(b)).valid is True


def test_sessions_whose_consume_line_does_not_say_are_not_judged() -> None:
    b = _master_killed_at_5(_consumer_on_n2(asked=None))
    b.at(7.0).cancel("c1", type="info")
    b.consume("c1", node="n2")
    assert run(_ends_at_30(b)).valid is True


ISOLATE_N1 = {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}  # as the nemesis records it


def _master_cut_off_then_killed(b: HistoryBuilder) -> HistoryBuilder:
    b.at(4.0)
    cut = b.fault("partition", ["n1"], grudge=ISOLATE_N1)
    b.at(4.8)
    b.fault("kill", ["n1"])
    b.at(8.0).heal(cut)
    return b


def test_a_cut_that_pauses_only_the_master_still_judges_consumers_elsewhere() -> None:
    """Under pause_minority, isolating n1 pauses n1 alone: a consumer on n2 keeps its
    connection and must be cancelled when the master moves."""
    b = _master_cut_off_then_killed(_consumer_on_n2())
    assert violated(run(_ends_at_30(b)), "cancel-missing") == ["c1"]


def test_a_consumer_on_a_node_the_partition_pauses_is_not_judged() -> None:
    b = builder()
    b.connect("c1", node="n1")
    b.consume("c1", node="n1", cancel_on_failover=True)
    b.at(4.0)
    cut = b.fault("partition", ["n1"], grudge=ISOLATE_N1)
    b.at(12.0).heal(cut)
    assert run(_ends_at_30(b)).valid is True


def test_under_autoheal_any_partition_touching_the_node_excuses_it() -> None:
    b = builder(partition_handling="autoheal")
    b.connect("c1", node="n2")
    b.consume("c1", node="n2", cancel_on_failover=True)
    assert violated(run(_ends_at_30(_master_cut_off_then_killed(b))), "cancel-missing") == []


def test_a_degraded_link_of_the_consumers_node_excuses_nothing() -> None:
    """A black-hole on the master's link to n2 (before its kill) leaves n2 running: it
    hears of the new master from the others and must cancel."""
    b = _consumer_on_n2()
    b.at(4.4).fault("timeout", ["n1", "n2"], links=["link:n1->n2"])
    b = _master_killed_at_5(b)
    assert violated(run(_ends_at_30(b)), "cancel-missing") == ["c1"]
