"""Grudges and target selection are pure: their shapes, and the same seed giving the
same choice."""

from __future__ import annotations

import random

import pytest

from faults.nemesis import InvalidOp, grudges
from faults.nemesis.targets import select

FIVE = ["n1", "n2", "n3", "n4", "n5"]


def heard_by(grudge: grudges.Grudge, listener: str, nodes: list[str]) -> set[str]:
    return {n for n in nodes if grudges.hears(grudge, listener, n)}


def test_halves_and_isolate_are_complete_and_symmetric() -> None:
    assert grudges.halves(FIVE) == {
        "n1": {"n3", "n4", "n5"}, "n2": {"n3", "n4", "n5"},
        "n3": {"n1", "n2"}, "n4": {"n1", "n2"}, "n5": {"n1", "n2"},
    }
    assert grudges.isolate("n2", ["n1", "n2", "n3"]) == {
        "n1": {"n2"}, "n2": {"n1", "n3"}, "n3": {"n2"}}


def test_a_bridge_node_hears_and_is_heard_by_everybody() -> None:
    grudge = grudges.bridge(FIVE)
    assert grudge == {"n1": {"n4", "n5"}, "n2": {"n4", "n5"},
                      "n4": {"n1", "n2"}, "n5": {"n1", "n2"}}
    assert all(grudges.hears(grudge, n, "n3") for n in FIVE)
    assert heard_by(grudge, "n3", FIVE) == set(FIVE)


@pytest.mark.parametrize("n", [3, 4, 5, 7])
def test_in_a_majority_ring_each_node_hears_its_own_majority(n: int) -> None:
    nodes = [f"n{i}" for i in range(n)]
    grudge = grudges.majority_ring(nodes)
    views = [frozenset(heard_by(grudge, node, nodes)) for node in nodes]
    for node, view in zip(nodes, views, strict=True):
        assert len(view) == n // 2 + 1 and node in view
    assert len(set(views)) == n  # no two nodes hear the same majority


def test_three_node_majority_ring_is_directed() -> None:
    assert grudges.majority_ring(["a", "b", "c"]) == {"a": {"b"}, "b": {"c"}, "c": {"a"}}


def test_one_way_and_cut_pairs() -> None:
    grudge = grudges.one_way("n1", "n2")
    assert grudges.cut_pairs(grudge) == [("n1", "n2")]
    assert grudges.hears(grudge, "n1", "n2") and not grudges.hears(grudge, "n2", "n1")


@pytest.mark.parametrize("kind", ["halves", "isolate", "bridge", "majority-ring", "one-way"])
def test_resolving_a_kind_depends_only_on_the_seed(kind: str) -> None:
    drawn = [grudges.resolve({"kind": kind}, FIVE, random.Random(seed)) for seed in (1, 1, 2)]
    assert drawn[0] == drawn[1]
    choices = {repr(grudges.resolve({"kind": kind}, FIVE, random.Random(seed)))
               for seed in range(20)}
    assert len(choices) > 1  # the seed does choose


def test_an_explicit_grudge_wins_and_is_checked() -> None:
    spec = {"kind": "halves", "grudge": {"n2": ["n1"]}}
    assert grudges.resolve(spec, FIVE, random.Random(0)) == {"n2": {"n1"}}
    with pytest.raises(InvalidOp, match="unknown nodes"):
        grudges.resolve({"grudge": {"n9": ["n1"]}}, FIVE, random.Random(0))
    with pytest.raises(InvalidOp, match="itself"):
        grudges.resolve({"grudge": {"n1": ["n1"]}}, FIVE, random.Random(0))
    with pytest.raises(InvalidOp, match="unknown partition kind"):
        grudges.resolve({"kind": "thirds"}, FIVE, random.Random(0))
    with pytest.raises(InvalidOp, match="unknown node"):
        grudges.resolve({"kind": "isolate", "node": "n9"}, FIVE, random.Random(0))


def test_node_selection() -> None:
    rng = random.Random(4)
    assert len(select("one", FIVE, rng)) == 1
    assert len(select("minority", FIVE, rng)) == 2
    assert len(select("majority", FIVE, rng)) == 3
    assert sorted(select("all", FIVE, rng)) == FIVE
    assert select(["n4", "n2"], FIVE, rng) == ["n4", "n2"]
    assert select("majority", FIVE, random.Random(9)) == select("majority", FIVE,
                                                                random.Random(9))
    with pytest.raises(InvalidOp):
        select(["n6"], FIVE, rng)
    with pytest.raises(InvalidOp):
        select("most", FIVE, rng)
