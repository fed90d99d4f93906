"""``wrong-promotion``: a node's promotion report against the replay's prediction, and
the reports the replay cannot judge."""

from __future__ import annotations

import pytest

from harness.history import HistoryBuilder, InconsistentHistory
from tests.checker.histories import builder, part, run, violated


def _master_killed_at_5(b: HistoryBuilder | None = None) -> HistoryBuilder:
    b = b or builder()
    b.at(5.0).fault("kill", ["n1"])
    return b


def _reported(b: HistoryBuilder, master: str, at: float = 8.0) -> HistoryBuilder:
    b.at(at).node_event("promotion", master, queue="q", node=master)
    b.at(at + 1).drain()
    return b


def test_the_eldest_surviving_mirror_promoted_is_valid() -> None:
    assert run(_reported(_master_killed_at_5(), "n2")).valid is True


def test_another_mirror_promoted_is_a_wrong_promotion() -> None:
    result = run(_reported(_master_killed_at_5(), "n3"))
    assert violated(result, "wrong-promotion") == ["n3"]
    assert result.valid is False


def test_a_mirror_that_rejoined_is_younger_than_the_others() -> None:
    b = builder()
    b.heal(b.fault("kill", ["n2"]))  # n2 rejoins last: n3 is now the eldest mirror
    _master_killed_at_5(b)
    assert violated(run(_reported(b, "n2")), "wrong-promotion") == ["n2"]
    b = builder()
    b.heal(b.fault("kill", ["n2"]))
    assert run(_reported(_master_killed_at_5(b), "n3")).valid is True


def test_several_changes_close_together_are_not_judged() -> None:
    b = _master_killed_at_5()
    b.at(6.0).fault("kill", ["n2"])  # n2 promoted then lost: n3 next
    result = run(_reported(b, "n3"))
    assert part(result, "wrong-promotion").valid is True
    b = _master_killed_at_5()
    b.at(6.0).fault("kill", ["n2"])
    result = run(_reported(b, "n2"))
    assert part(result, "wrong-promotion").counts["promotions_unjudged"] == 1


def test_a_report_taking_over_from_another_master_than_the_replays_is_not_judged() -> None:
    """The replay lost track of the queue (say a mirror synchronised by draining, which
    the record cannot show): the report names the master it took over from."""
    for previous, judged in ((["n1/a1"], True), (["n3/c1"], False)):
        b = _master_killed_at_5()
        b.at(8.0).node_event("promotion", "n3", queue="q", node="n3", previous=previous)
        b.at(9.0).drain()
        assert part(run(b), "wrong-promotion").valid is not judged, previous


def test_a_report_the_replay_does_not_explain_is_not_judged() -> None:
    b = builder()
    b.at(5.0).fault("kill", ["n3"])  # a mirror: no master change in the record
    assert part(run(_reported(b, "n2")), "wrong-promotion").valid is True


def test_a_report_long_after_the_change_is_not_matched() -> None:
    result = run(_reported(_master_killed_at_5(), "n3", at=60.0))
    assert part(result, "wrong-promotion").valid is True


def test_a_link_fault_on_the_predicted_heir_is_not_judged() -> None:
    b = _master_killed_at_5()
    b.at(6.0).fault("latency", ["n2"])
    assert part(run(_reported(b, "n3")), "wrong-promotion").valid is True


def test_a_short_cut_of_the_dying_master_or_of_its_link_to_another_mirror_is_judged(
) -> None:
    """The master cut off for less than failure detection and killed, after its link to
    n3 alone black-holed: n2 and n3 heard each other throughout, so n2 is the heir."""
    b = builder()
    b.at(4.4).fault("timeout", ["n1", "n3"], links=["link:n1->n3"])
    b.at(4.9).fault("partition", ["n1"], grudge={"n1": ["n2", "n3"], "n2": ["n1"],
                                                 "n3": ["n1"]})
    _master_killed_at_5(b)
    assert violated(run(_reported(b, "n3")), "wrong-promotion") == ["n3"]


def test_a_detected_cut_off_the_heir_or_a_degraded_link_of_its_own_is_not_judged() -> None:
    for fault, detail in (("partition", {"grudge": {"n2": ["n1", "n3"], "n1": ["n2"],
                                                    "n3": ["n2"]}}),
                          ("reset_peer", {"links": ["link:n2->n3"]})):
        b = builder()
        b.at(2.0).fault(fault, ["n2", "n3"] if fault != "partition" else ["n2"], **detail)
        _master_killed_at_5(b)
        assert part(run(_reported(b, "n3")), "wrong-promotion").valid is True, fault


def test_when_synced_keeps_an_unsynchronised_eldest_mirror_from_being_predicted() -> None:
    b = builder(policy={"ha-mode": "all", "ha-promote-on-failure": "when-synced"})
    b.heal(b.fault("kill", ["n2", "n3"]))  # both mirrors rejoin empty: the queue goes down
    _master_killed_at_5(b)
    result = run(_reported(b, "n3"))  # no change predicted: nothing to match
    assert part(result, "wrong-promotion").counts["promotions_unjudged"] == 1
    b = builder(policy={"ha-mode": "all", "ha-promote-on-failure": "when-synced"})
    b.heal(b.fault("kill", ["n2"]))  # n2 rejoins last
    b.at(1.0).add("nemesis", "fault-start", "ok", fault="sync", fault_id="s1", queue="q")
    b.add("nemesis", "fault-end", "ok", fault="sync", fault_id="s1", queue="q")
    _master_killed_at_5(b)  # every mirror synchronised: the eldest, n3, is the heir
    assert violated(run(_reported(b, "n2")), "wrong-promotion") == ["n2"]


def test_a_churned_queues_promotion_is_not_judged() -> None:
    """The header gives no membership for a queue a churner declared on some node."""
    b = builder()
    b.at(1.0).declare("churn.k1.1", node="n3")
    _master_killed_at_5(b)
    b.at(8.0).node_event("promotion", "n3", queue="churn.k1.1", node="n3")
    b.at(9.0).drain()
    assert part(run(b), "wrong-promotion").valid is True
    b = builder()
    _master_killed_at_5(b)
    b.at(8.0).node_event("promotion", "n3", queue="churn.k1.1", node="n3")
    b.at(9.0).drain()
    assert part(run(b), "wrong-promotion").valid is False


def _members(b: HistoryBuilder, *order: str) -> HistoryBuilder:
    b.add("harness", "members", "ok", queue="q", members=list(order))
    return b


def test_a_join_order_read_from_the_broker_decides_the_eldest_mirror() -> None:
    # RabbitMQ starts a new queue's mirrors at once: n3 may join before n2.
    b = _members(builder(), "n1", "n3", "n2")
    assert run(_reported(_master_killed_at_5(b), "n3")).valid is True
    b = _members(builder(), "n1", "n3", "n2")
    assert violated(run(_reported(_master_killed_at_5(b), "n2")), "wrong-promotion") == ["n2"]


def test_a_join_order_must_name_the_header_members_before_any_fault() -> None:
    late = builder()
    late.fault("latency", ["n2"])
    _members(late, "n1", "n3", "n2")
    other_master = _members(builder(), "n2", "n1", "n3")
    missing = _members(builder(), "n1", "n3")
    for b, why in ((late, "before any fault"), (other_master, "its master n1 first"),
                   (missing, "its master n1 first")):
        with pytest.raises(InconsistentHistory, match=why):
            run(_reported(_master_killed_at_5(b), "n3"))
