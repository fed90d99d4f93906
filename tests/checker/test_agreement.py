"""Cross-node agreement from ``cluster-state`` lines: ``disagreement`` and
``split-brain`` (a caveat only under ``ignore``)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.checker import check
from harness.checker.lost import Lost
from harness.history import HistoryBuilder
from tests.checker.histories import NODES, builder, part, run


def _view(master: str = "n1", mirrors: tuple[str, ...] = ("n2", "n3"),
          local: int | None = 5, role: str = "mirror") -> dict[str, Any]:
    view: dict[str, Any] = {"master": master, "mirrors": list(mirrors),
                            "synchronised": list(mirrors), "messages": 5}
    if local is not None:
        view["local"] = {"role": role, "messages": local}
    return view


def _states(b: HistoryBuilder, phase: str = "before-drain",
            **overrides: dict[str, Any]) -> HistoryBuilder:
    """Every node reports queue ``q`` as in :func:`_view`, unless overridden."""
    for node in NODES:
        queues = overrides.get(node, {"q": _view(role="master" if node == "n1" else "mirror")})
        b.cluster_state(node, phase, queues)
    b.drain()
    return b


def _kinds(b: HistoryBuilder) -> list[tuple[str, str | None]]:
    result = run(b)
    return sorted((a.kind, a.caveat) for a in result.violations + result.caveats)


def test_nodes_that_agree_are_valid() -> None:
    result = run(_states(builder()))
    assert result.valid is True
    assert part(result, "disagreement").data["cluster_state_phases"] == ["before-drain"]


def test_different_mirror_sets_are_a_disagreement() -> None:
    b = _states(builder(), n3={"q": _view(mirrors=("n2",))})
    assert _kinds(b) == [("disagreement", None)]
    assert run(b).valid is False


def test_mirror_order_does_not_matter() -> None:
    b = _states(builder(), n3={"q": _view(mirrors=("n3", "n2"))})
    assert run(b).valid is True


def test_a_queue_missing_on_one_node_is_a_disagreement() -> None:
    b = _states(builder(), n2={})
    assert _kinds(b) == [("disagreement", None)]


def test_a_synchronised_mirror_with_another_count_before_the_drain_disagrees() -> None:
    b = _states(builder(), n3={"q": _view(local=4)})
    (anomaly,) = part(run(b), "disagreement").violations
    assert anomaly.kind == "disagreement" and anomaly.messages == ["n1", "n3"]


def test_counts_are_compared_at_every_quiet_moment() -> None:
    for phase in ("quiet", "before-drain", "end"):
        b = _states(builder(), phase=phase, n3={"q": _view(local=4)})
        assert _kinds(b) == [("disagreement", None)], phase


def test_counts_are_not_compared_mid_run_while_clients_work() -> None:
    b = _states(builder(), phase="settled-1", n3={"q": _view(local=4)})
    assert _kinds(b) == []


def test_two_masters_once_settled_mid_run_are_a_split_brain_under_autoheal() -> None:
    """An autoheal loser that never restarts keeps its own master after the heal."""
    b = _states(builder(partition_handling="autoheal"), phase="settled-1",
                n1={"q": _view(master="n1", mirrors=(), role="master")},
                n2={"q": _view(master="n2", mirrors=("n3",), role="master")},
                n3={"q": _view(master="n2", mirrors=("n3",))})
    assert _kinds(b) == [("split-brain", None)]
    assert run(b).valid is False


def test_two_masters_are_a_split_brain_violation_under_pause_minority() -> None:
    b = _states(builder(), n3={"q": _view(master="n3", mirrors=())})
    assert _kinds(b) == [("split-brain", None)]
    assert run(b).valid is False


def test_two_masters_are_a_split_brain_violation_under_autoheal() -> None:
    b = _states(builder(partition_handling="autoheal"),
                n3={"q": _view(master="n3", mirrors=())})
    assert _kinds(b) == [("split-brain", None)]


def _split_after(*fault: tuple[str, tuple[str, ...], dict[str, Any]],
                 heal_at: float = 10.0) -> HistoryBuilder:
    """Under ``ignore``: the faults start at 1 s and heal at ``heal_at``; two masters
    are seen at 20 s."""
    b = builder(partition_handling="ignore").at(1.0)
    ids = [b.fault(kind, targets, **detail) for kind, targets, detail in fault]
    b.at(heal_at)
    for fault_id in ids:
        b.heal(fault_id)
    b.at(20.0)
    return _states(b, n3={"q": _view(master="n3", mirrors=())})


LINK = {"links": ["link:n1->n2"]}


@pytest.mark.parametrize("fault", [
    ("partition", ("n3",), {}),
    ("pause", ("n1",), {}),
    ("timeout", ("n1", "n2"), LINK),
    ("reset_peer", ("n1", "n2"), LINK),
    ("latency", ("n1", "n2"), {**LINK, "attributes": {"latency": 1800, "jitter": 300}}),
])
def test_two_masters_after_a_cut_are_a_split_brain_caveat_under_ignore(
    fault: tuple[str, tuple[str, ...], dict[str, Any]]
) -> None:
    b = _split_after(fault)
    assert _kinds(b) == [("split-brain", "partition-split-brain")]
    assert run(b).valid is True


@pytest.mark.parametrize("faults", [
    [],
    [("kill", ("n1",), {})],
    [("stop", ("n1",), {})],
    [("latency", ("n1", "n2"), {**LINK, "attributes": {"latency": 1000, "jitter": 0}}),
     ("kill", ("n1",), {})],
    [("timeout", ("c1", "n1"), {"links": ["client:c1->n1"]})],
])
def test_two_masters_no_fault_could_explain_are_a_violation_under_ignore(
    faults: list[tuple[str, tuple[str, ...], dict[str, Any]]]
) -> None:
    """A kill, a stop, a latency below failure detection or a client link's fault cuts
    no live nodes apart: a split brain after them is the broker's doing."""
    b = _split_after(*faults)
    assert _kinds(b) == [("split-brain", None)]
    assert run(b).valid is False


def test_a_split_seen_before_the_cut_is_no_caveat() -> None:
    b = builder(partition_handling="ignore")
    b.at(5.0)
    _states(b, phase="settled-1", n3={"q": _view(master="n3", mirrors=())})
    b.at(6.0).fault("partition", ("n3",))
    assert _kinds(b) == [("split-brain", None)]


def test_a_node_that_could_not_be_asked_decides_no_agreement() -> None:
    b = builder()
    b.cluster_state("n1", "before-drain", {"q": _view(role="master")})
    b.cluster_state("n2", "before-drain", {"q": _view()})
    b.cluster_state("n3", "before-drain", type="fail")
    b.drain()
    result = part(run(b), "split-brain")
    assert result.valid is True
    assert [u["node"] for u in result.data["cluster_state_unasked"]] == ["n3"]


def test_a_running_node_that_does_not_answer_once_every_fault_healed_is_unavailable(
) -> None:
    """At quiet and before-drain (a paused minority that never resumed); not mid-run
    nor at the end, where the drain by promotion has just restarted a node."""
    for phase, valid in (("quiet", False), ("before-drain", False), ("settled-1", True),
                         ("end", True)):
        b = builder()
        b.cluster_state("n1", phase, {"q": _view(role="master")})
        b.cluster_state("n2", phase, {"q": _view()})
        b.cluster_state("n3", phase, type="fail")
        b.drain()
        result = part(run(b), "node-unavailable")
        assert result.valid is valid, phase
        if not valid:
            assert result.violations[0].messages == ["n3"]


def test_a_pass_without_the_agreement_checker_skips_cluster_state_lines() -> None:
    b = _states(builder())
    assert check(b.build(), [Lost()]).valid is True


def _unsynced_n3(phase: str) -> HistoryBuilder:
    view = {**_view(role="master"), "synchronised": ["n2"]}
    return _states(builder(), phase=phase, n1={"q": view})


def test_a_mirror_left_unsynchronised_by_the_harness_sync_is_a_violation() -> None:
    b = _unsynced_n3("before-drain")
    assert _kinds(b) == [("sync-incomplete", None)]
    assert part(run(b), "sync-incomplete").valid is False


def test_an_unsynchronised_mirror_is_no_anomaly_before_the_harness_syncs() -> None:
    assert _kinds(_unsynced_n3("quiet")) == []


def _churn_view() -> dict[str, Any]:
    return {"master": "n1", "mirrors": ["n2", "n3"], "synchronised": [], "messages": 0,
            "local": {"role": "mirror", "messages": 3}}


def test_a_churned_queue_some_nodes_list_during_its_delete_is_not_compared() -> None:
    """The nodes learn of a declare or delete a moment apart."""
    b = builder()
    b.at(1.0).declare("churn.k1.1")
    b.add("k1", "delete", "invoke", queue="churn.k1.1", node="n1")
    _states(b, phase="settled-1", n1={"q": _view(role="master")},
            n2={"q": _view(), "churn.k1.1": _churn_view()})
    assert _kinds(b) == []


def test_a_churned_queue_one_node_keeps_long_after_its_delete_is_a_disagreement() -> None:
    b = builder()
    b.at(1.0).declare("churn.k1.1")
    b.delete("churn.k1.1")
    b.at(b.now + 1.5)
    _states(b, phase="settled-1", n2={"q": _view(), "churn.k1.1": _churn_view()})
    assert ("disagreement", None) in _kinds(b)


def test_a_churned_queue_counts_and_sync_state_are_not_judged() -> None:
    """The harness neither syncs nor drains churned queues."""
    b = builder()
    b.at(1.0).declare("churn.k1.1")
    b.at(3.0)
    churned = {"churn.k1.1": _churn_view()}
    _states(b, n1={"q": _view(role="master"), **churned}, n2={"q": _view(), **churned},
            n3={"q": _view(), **churned})
    assert _kinds(b) == []


def _two_replicas(b: HistoryBuilder, phase: str, nodes: tuple[str, ...] = NODES) -> None:
    """Every answering node agrees: q lives on n1 and n2 only."""
    for node in nodes:
        b.cluster_state(node, phase, {"q": _view(mirrors=("n2",),
                                                 role="master" if node == "n1" else "mirror")})
    b.drain()


def test_a_running_node_the_policy_covers_without_a_replica_is_under_replicated() -> None:
    for phase in ("quiet", "before-drain", "settled-1"):
        b = builder()
        _two_replicas(b, phase)
        (anomaly,) = part(run(b), "under-replicated").violations
        assert anomaly.messages == ["n1", "n3"] and anomaly.queue == "q", phase


def test_replicas_are_judged_only_on_answering_nodes_and_by_the_policy() -> None:
    b = builder()
    _two_replicas(b, "quiet", nodes=("n1", "n2"))  # n3 is down
    assert part(run(b), "under-replicated").valid is True
    b = builder(policy={"ha-mode": "exactly", "ha-params": 2})
    _two_replicas(b, "quiet")
    assert part(run(b), "under-replicated").valid is True


def test_replicas_are_not_judged_at_the_end_a_drain_by_promotion_just_restarted_a_node(
) -> None:
    b = builder()
    _two_replicas(b, "end")
    assert part(run(b), "under-replicated").valid is True


def test_mid_run_replicas_are_judged_by_the_policy_in_force_then() -> None:
    """exactly 2 set mid-run: two replicas is what it asks, until its heal puts back
    ha-mode all."""
    for healed, valid in ((False, True), (True, False)):
        b = builder()
        policy = b.fault("policy", pattern="^q$",
                         definition={"ha-mode": "exactly", "ha-params": 2})
        if healed:
            b.heal(policy)
        _two_replicas(b, "settled-1")
        assert part(run(b), "under-replicated").valid is valid, healed


def test_mirrors_past_what_the_policy_allows_are_over_replicated() -> None:
    """Three replicas under exactly 2, a mirror on a node that ha-mode nodes does not
    name, a mirror under a policy that does not mirror: each policy left unapplied."""
    for policy, extra in (({"ha-mode": "exactly", "ha-params": 2}, ["n1", "n3"]),
                          ({"ha-mode": "nodes", "ha-params": ["n1", "n2"]}, ["n1", "n3"]),
                          ({}, ["n1", "n2", "n3"])):
        for phase in ("quiet", "before-drain", "settled-1"):
            b = builder(policy=policy)
            _states(b, phase=phase)
            (anomaly,) = part(run(b), "over-replicated").violations
            assert anomaly.messages == extra and anomaly.queue == "q", (policy, phase)


def test_a_master_off_the_nodes_list_and_the_replicas_a_policy_allows_are_not_over_replicated(
) -> None:
    """Under ha-mode nodes the master stays where it is until a mirror on the list is
    synchronised; exactly 2 with two replicas is what it asks."""
    b = builder(policy={"ha-mode": "nodes", "ha-params": ["n2", "n3"]})
    _states(b, phase="quiet")
    assert part(run(b), "over-replicated").valid is True
    b = builder(policy={"ha-mode": "exactly", "ha-params": 2})
    _two_replicas(b, "quiet")
    assert part(run(b), "over-replicated").valid is True
    b = builder(policy={"ha-mode": "exactly", "ha-params": 2})
    _states(b, phase="end")  # the drain by promotion has just restarted a node
    assert part(run(b), "over-replicated").valid is True


def _exclusive(mirrors: list[str], *, listed: bool) -> dict[str, Any]:
    view = {"master": "n1", "mirrors": mirrors, "synchronised": [], "messages": 0,
            "policy": {"ha-mode": "all"}}
    return {**view, "exclusive": True} if listed else view


def test_an_exclusive_queue_on_its_node_alone_is_not_a_disagreement() -> None:
    b = builder()
    b.declare("churn.k1.2", exclusive=True)
    b.at(5.0)
    _states(b, phase="quiet", n1={"q": _view(role="master"),
                                  "churn.k1.2": _exclusive([], listed=True)})
    result = run(b)
    assert result.valid is True, result.violations


def test_an_exclusive_queue_with_mirrors_is_over_replicated() -> None:
    """Declared exclusive by the record, whether the broker lists it so or not."""
    for listed in (True, False):
        b = builder()
        b.declare("churn.k1.2", exclusive=listed is False)
        b.at(5.0)
        shown = {"q": _view(role="master"),
                 "churn.k1.2": _exclusive(["n2", "n3"], listed=listed)}
        _states(b, phase="settled-1", n1=shown,
                n2={**shown, "q": _view(role="mirror")}, n3={**shown, "q": _view(role="mirror")})
        (anomaly,) = part(run(b), "over-replicated").violations
        assert anomaly.queue == "churn.k1.2" and anomaly.messages == ["n1", "n2", "n3"], listed
