"""Placement as pure functions: which nodes a policy puts mirrors on, the view a master
makes of it (additions, drops, hand-over), who succeeds the dead, and when a policy
refuses the promotion. Tables of (policy, record, running nodes) -> outcome."""

from __future__ import annotations

from typing import Any

import pytest

from cluster.gm import View
from cluster.ha.placement import (
    Placement,
    Succession,
    master_fits,
    place,
    promotion_refused,
    succession,
    wanted_mirror_nodes,
)
from cluster.ha.record import QueueRecord

ALL = {"ha-mode": "all"}
NODES = ["n1", "n2", "n3", "n4"]


def exactly(count: int) -> dict[str, Any]:
    return {"ha-mode": "exactly", "ha-params": count}


def on(*nodes: str) -> dict[str, Any]:
    return {"ha-mode": "nodes", "ha-params": list(nodes)}


@pytest.mark.parametrize(("definition", "current", "running", "wanted"), [
    ({}, [], NODES, []),
    ({"ha-mode": "unknown"}, ["n2"], NODES, []),
    (ALL, [], NODES, ["n2", "n3", "n4"]),
    (ALL, [], ["n1", "n3"], ["n3"]),
    (exactly(1), ["n2"], NODES, []),
    (exactly(2), [], NODES, ["n2"]),  # the first other node in cluster order
    (exactly(2), ["n4"], NODES, ["n4"]),  # the current mirror is kept
    (exactly(2), ["n4", "n3"], NODES, ["n4"]),  # the elder current mirror is kept
    (exactly(3), ["n4"], NODES, ["n4", "n2"]),  # then spares in cluster order
    (exactly(3), ["n4"], ["n1", "n3", "n4"], ["n4", "n3"]),  # the running ones
    (exactly(9), [], NODES, ["n2", "n3", "n4"]),  # no more than there are
    (exactly(0), [], NODES, []),
    (on("n2", "n3"), [], NODES, ["n2", "n3"]),
    (on("n1", "n3"), [], NODES, ["n3"]),  # the master's own node holds no mirror
    (on("n3", "n9"), [], NODES, ["n3"]),  # unknown nodes hold none
    (on("n3"), [], ["n1", "n2"], []),  # nor nodes that are down
])
def test_the_nodes_a_policy_wants_mirrors_on(definition: dict[str, Any], current: list[str],
                                             running: list[str], wanted: list[str]) -> None:
    assert wanted_mirror_nodes(definition, "n1", current, running) == wanted


@pytest.mark.parametrize(("definition", "fits"), [
    ({}, True), (ALL, True), (exactly(1), True), (on("n1", "n2"), True), (on("n2"), False)])
def test_only_ha_mode_nodes_can_refuse_the_master_its_node(definition: dict[str, Any],
                                                           fits: bool) -> None:
    assert master_fits(definition, "n1") is fits


def record(*members: str, synced: tuple[str, ...] = (), aliases: tuple[tuple[str, str], ...] = (),
           version: int = 1) -> QueueRecord:
    return QueueRecord("/", "q", True, False, {}, View(version, members, aliases), synced)


RUNNING = {"n2": "i2", "n3": "i3", "n4": "i4"}


@pytest.mark.parametrize(("definition", "before", "running", "members", "added", "dropped"), [
    # a new queue: its mirrors in cluster order, the eldest the first other node
    (ALL, record("n1/i1"), RUNNING, ("n1/i1", "n2/i2", "n3/i3", "n4/i4"),
     ("n2/i2", "n3/i3", "n4/i4"), ()),
    (exactly(2), record("n1/i1"), RUNNING, ("n1/i1", "n2/i2"), ("n2/i2",), ()),
    # nothing to do
    (exactly(2), record("n1/i1", "n3/i3"), RUNNING, ("n1/i1", "n3/i3"), (), ()),
    ({}, record("n1/i1"), RUNNING, ("n1/i1",), (), ()),
    # no policy any more: every mirror goes
    ({}, record("n1/i1", "n2/i2"), RUNNING, ("n1/i1",), (), ("n2/i2",)),
    # fewer wanted: the younger mirror goes
    (exactly(2), record("n1/i1", "n3/i3", "n2/i2"), RUNNING, ("n1/i1", "n3/i3"), (),
     ("n2/i2",)),
    # a lost mirror replaced under exactly: the next running node
    (exactly(2), record("n1/i1"), {"n3": "i3"}, ("n1/i1", "n3/i3"), ("n3/i3",), ()),
    # taken back in the same run of its node: a new member id, the old is an alias
    (ALL, record("n1/i1", aliases=(("n2/i2", "n1/i1"),)), {"n2": "i2"},
     ("n1/i1", "n2/i2#2"), ("n2/i2#2",), ()),
    # ha-mode nodes without the master's node: hand over to the synchronised mirror,
    # which must be left the eldest
    (on("n2", "n3"), record("n1/i1", "n3/i3", "n2/i2", synced=("n2/i2",)), RUNNING,
     ("n2/i2",), (), ("n3/i3", "n1/i1")),
    (on("n2", "n3"), record("n1/i1", "n2/i2", synced=("n2/i2",)), RUNNING,
     ("n2/i2", "n3/i3"), ("n3/i3",), ("n1/i1",)),
    # ... never to one that is not: the master stays until one is
    (on("n2", "n3"), record("n1/i1", "n2/i2"), RUNNING, ("n1/i1", "n2/i2", "n3/i3"),
     ("n3/i3",), ()),
])
def test_the_view_a_master_makes(definition: dict[str, Any], before: QueueRecord,
                                 running: dict[str, str], members: tuple[str, ...],
                                 added: tuple[str, ...], dropped: tuple[str, ...]) -> None:
    placed = place(definition, before, running)
    assert (placed.view.members, placed.added, placed.dropped) == (members, added, dropped)


def test_the_planted_bugs_of_placement() -> None:
    before = record("n1/i1", "n2/i2")
    assert place({}, before, RUNNING, keep_unwanted=True) == Placement(before.view)
    assert place(on("n2"), before, RUNNING, unsynced_handover=True).view.members == (
        "n2/i2",)


@pytest.mark.parametrize(("before", "up", "after"), [
    # nobody died, or nobody is left
    (record("n1/a", "n2/b"), {"n1", "n2", "n3"}, None),
    (record("n1/a", "n2/b"), {"n3"}, None),
    # the master died: the eldest mirror is promoted
    (record("n1/a", "n2/b", "n3/c"), {"n2", "n3"},
     Succession("n2/b", ("n1/a",), True, View(2, ("n2/b", "n3/c"), (("n1/a", "n2/b"),)))),
    # a mirror died: the master writes the view
    (record("n1/a", "n2/b", "n3/c"), {"n1", "n3"},
     Succession("n1/a", ("n2/b",), False, View(2, ("n1/a", "n3/c"), (("n2/b", "n3/c"),)))),
    # two died at once: the eldest survivor looks past both
    (record("n1/a", "n2/b", "n3/c"), {"n3"},
     Succession("n3/c", ("n1/a", "n2/b"), True,
                View(2, ("n3/c",), (("n1/a", "n3/c"), ("n2/b", "n3/c"))))),
])
def test_who_succeeds_the_dead(before: QueueRecord, up: set[str],
                               after: Succession | None) -> None:
    assert succession(before, up) == after


def test_the_planted_bug_youngest_promoted() -> None:
    after = succession(record("n1/a", "n2/b", "n3/c"), {"n2", "n3"}, youngest=True)
    assert after is not None
    assert (after.acting, after.view.members) == ("n3/c", ("n3/c", "n2/b"))
    # a mirror's death promotes nobody, so the bug changes nothing
    assert succession(record("n1/a", "n2/b", "n3/c"), {"n1", "n2"}, youngest=True) == \
        succession(record("n1/a", "n2/b", "n3/c"), {"n1", "n2"})


WHEN_SYNCED = "when-synced"


@pytest.mark.parametrize(("definition", "graceful", "synced", "refused"), [
    # a failure promotes whatever the mirror holds, unless told otherwise
    ({}, False, False, None),
    ({"ha-promote-on-failure": "always"}, False, False, None),
    ({"ha-promote-on-failure": WHEN_SYNCED}, False, False, "ha-promote-on-failure"),
    ({"ha-promote-on-failure": WHEN_SYNCED}, False, True, None),
    # a graceful stop promotes only a synchronised mirror, unless told otherwise
    ({}, True, False, "ha-promote-on-shutdown"),
    ({}, True, True, None),
    ({"ha-promote-on-shutdown": "always"}, True, False, None),
    # each setting is read for its own case only
    ({"ha-promote-on-failure": WHEN_SYNCED, "ha-promote-on-shutdown": "always"}, True, False,
     None),
    ({"ha-promote-on-shutdown": WHEN_SYNCED}, False, False, None),
])
def test_when_a_policy_refuses_the_promotion(definition: dict[str, Any], graceful: bool,
                                             synced: bool, refused: str | None) -> None:
    before = record("n1/a", "n2/b", synced=("n2/b",) if synced else ())
    assert promotion_refused(definition, before, "n2/b", graceful=graceful) == refused
    assert promotion_refused(definition, before, "n2/b", graceful=graceful,
                             ignore=True) is None  # the planted bugs *-promotes-unsynced
