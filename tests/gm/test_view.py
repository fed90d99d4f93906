from __future__ import annotations

from collections.abc import Callable

import pytest

from cluster.gm import View, ViewError


def ring(*members: str) -> View:
    view = View.first(members[0])
    for member in members[1:]:
        view = view.joined(member)
    return view


def test_ring_is_join_order_and_wraps() -> None:
    view = ring("a", "b", "c")
    assert view.version == 3
    assert view.members == ("a", "b", "c")
    assert [view.right_of(m) for m in "abc"] == ["b", "c", "a"]
    assert [view.left_of(m) for m in "abc"] == ["c", "a", "b"]


def test_a_lone_member_is_its_own_neighbour() -> None:
    view = View.first("a")
    assert view.left_of("a") == view.right_of("a") == "a"


def test_dead_member_is_inherited_by_the_next_live_one_to_its_right() -> None:
    view = ring("a", "b", "c", "d").without("b")
    assert view.members == ("a", "c", "d")
    assert view.heirs == {"b": "c"}
    assert view.owner_of("b") == "c"
    assert view.owner_of("c") == "c"
    assert view.right_of("a") == "c"


def test_the_last_member_is_inherited_across_the_wrap() -> None:
    view = ring("a", "b", "c").without("c")
    assert view.heirs == {"c": "a"}


def test_neighbours_dying_together_share_an_heir() -> None:
    view = ring("a", "b", "c", "d").without("b", "c")
    assert view.heirs == {"b": "d", "c": "d"}


def test_an_heir_that_dies_passes_on_what_it_inherited() -> None:
    view = ring("a", "b", "c", "d").without("b").without("c")
    assert view.heirs == {"b": "d", "c": "d"}
    assert view.without("d").heirs == {"b": "a", "c": "a", "d": "a"}


def test_a_joiner_does_not_come_between_a_dead_member_and_its_heir() -> None:
    # c died after the last live member b, so a inherited it; d joins after b, and
    # c is still a's, as gm.erl's "insert right of the chosen left" keeps it.
    view = ring("a", "b", "c").without("c").joined("d")
    assert view.members == ("a", "b", "d")
    assert view.heirs == {"c": "a"}
    assert view.right_of("d") == "a"


def test_views_are_values() -> None:
    assert ring("a", "b").without("b") == ring("a", "b").without("b")
    assert hash(ring("a", "b")) == hash(ring("a", "b"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda v: v.joined("b"), "already"),
        (lambda v: v.without("c").joined("c"), "already"),
        (lambda v: v.without("x"), "not live"),
        (lambda v: v.without("c").without("c"), "not live"),
        (lambda v: v.without("a", "b", "c"), "at least one"),
    ],
)
def test_impossible_changes_are_refused(change: Callable[[View], View], message: str) -> None:
    with pytest.raises(ViewError, match=message):
        change(ring("a", "b", "c"))
