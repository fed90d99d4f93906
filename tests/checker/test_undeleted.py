"""``undeleted``: a queue a churner deleted must not be listed by any node afterwards,
unless a failure took away the node that answered the delete."""

from __future__ import annotations

from typing import Any

from harness.checker import Result
from harness.checker.undeleted import GRACE_S
from harness.history import HistoryBuilder
from tests.checker.histories import NODES, builder, part, run

CHURNED = "churn.k1.1"


def _view(master: str = "n1") -> dict[str, Any]:
    return {"master": master, "mirrors": ["n2", "n3"], "synchronised": ["n2", "n3"],
            "messages": 0}


def _states(b: HistoryBuilder, phase: str = "end", listing: tuple[str, ...] = NODES) -> None:
    for node in NODES:
        b.cluster_state(node, phase, {CHURNED: _view()} if node in listing else {})


def _deleted_then_listed(b: HistoryBuilder, listing: tuple[str, ...], after: float) -> None:
    b.at(1.0).declare(CHURNED)
    b.delete(CHURNED)
    b.at(b.now + after)
    _states(b, listing=listing)
    b.drain()


def _judged(b: HistoryBuilder, listing: tuple[str, ...] = NODES) -> Result:
    """What ``undeleted`` says of ``listing`` reporting the queue past the grace."""
    b.at(b.now + GRACE_S + 1)
    _states(b, listing=listing)
    return part(run(b), "undeleted")


def _killed_after_the_delete(victim: str, listing: tuple[str, ...]) -> Result:
    b = builder()
    b.at(1.0).declare(CHURNED)
    b.delete(CHURNED)
    b.at(b.now + 0.5).fault("kill", [victim])
    return _judged(b, listing)


def test_a_deleted_queue_listed_again_later_is_undeleted() -> None:
    b = builder()
    _deleted_then_listed(b, NODES, GRACE_S + 1)
    result = part(run(b), "undeleted")
    assert result.valid is False
    (anomaly,) = result.violations
    assert anomaly.kind == "undeleted" and anomaly.queue == CHURNED
    assert anomaly.messages == ["n1", "n2", "n3"]
    assert "delete-ok from n1" in anomaly.explanation


def test_one_node_still_listing_a_deleted_queue_is_named_alone() -> None:
    b = builder()
    _deleted_then_listed(b, ("n3",), GRACE_S + 1)
    (anomaly,) = part(run(b), "undeleted").violations
    assert anomaly.messages == ["n3"]


def test_a_deleted_queue_nobody_lists_is_valid() -> None:
    b = builder()
    _deleted_then_listed(b, (), GRACE_S + 1)
    assert part(run(b), "undeleted").valid is True


def test_a_queue_listed_within_the_grace_after_its_delete_is_not_judged() -> None:
    b = builder()
    _deleted_then_listed(b, NODES, GRACE_S / 2)
    assert part(run(b), "undeleted").valid is True


def test_a_queue_declared_again_after_its_delete_may_exist() -> None:
    b = builder()
    b.at(1.0).declare(CHURNED)
    b.delete(CHURNED)
    b.declare(CHURNED)
    assert _judged(b).valid is True


def test_a_delete_without_an_answer_proves_nothing() -> None:
    b = builder()
    b.at(1.0).declare(CHURNED)
    b.delete(CHURNED, type="info")
    assert _judged(b).valid is True


def test_a_delete_answered_just_before_its_node_crashed_may_be_undone() -> None:
    """The deletion may not have reached the peers before the kill: allowed, counted."""
    result = _killed_after_the_delete("n1", ("n2", "n3"))
    assert result.valid is True and result.counts["undeleted_allowed"] == 2


def test_a_crash_of_another_node_excuses_nothing() -> None:
    assert _killed_after_the_delete("n3", ("n1", "n2")).valid is False


def test_a_queue_declared_on_a_node_cut_off_before_the_delete_may_come_back() -> None:
    """The declare never left n1; n2 deleted nothing, and n1 brings the queue back."""
    b = builder()
    b.at(1.0).declare(CHURNED, node="n1")
    partition = b.fault("partition", ["n1"])
    b.at(b.now + 0.5).delete(CHURNED, node="n2")
    b.heal(partition)
    assert _judged(b).valid is True


def test_the_declaring_node_killed_after_its_declare_spread_excuses_nothing() -> None:
    """n1 dies holding the queue, n2 deletes it, n1 comes back: the tombstone must win."""
    b = builder()
    b.at(1.0).declare(CHURNED, node="n1")
    b.at(b.now + GRACE_S + 1)
    killed = b.fault("kill", ["n1"])
    b.at(b.now + 0.5).delete(CHURNED, node="n2")
    b.at(b.now + GRACE_S + 1).heal(killed)
    assert _judged(b).valid is False


def test_a_partition_of_another_node_excuses_nothing() -> None:
    b = builder()
    b.at(1.0).declare(CHURNED, node="n2")
    b.at(b.now + GRACE_S + 1)
    cut = b.fault("partition", ["n1"], grudge={"n1": ["n2", "n3"], "n2": ["n1"],
                                               "n3": ["n1"]})
    b.at(b.now + 0.3).delete(CHURNED, node="n2")
    b.heal(cut)
    assert _judged(b).valid is False


def test_a_delete_answered_while_its_nodes_links_were_reset_may_be_undone() -> None:
    """The tombstone may never have reached the peers (kept only in memory, it is gone
    once a pause restarts the deleting node's app too)."""
    b = builder()
    b.at(1.0).declare(CHURNED, node="n2")
    reset = b.fault("reset_peer", ["n1", "n2", "n3"])
    b.delete(CHURNED, node="n2")
    b.heal(reset)
    assert _judged(b).valid is True
