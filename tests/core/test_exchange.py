"""Routing of direct, fanout and topic exchanges."""

from __future__ import annotations

import pytest

from cluster.core.exchange import Exchange


@pytest.mark.parametrize(
    "pattern, key, matches",
    [
        ("a.#", "a", True), ("a.#", "a.b.c", True), ("#", "", True), ("#", "x.y", True),
        ("#.b", "b", True), ("#.b", "a.b", True), ("#.b", "a.c", False), ("a.*", "a", False),
        ("a.*", "a.b", True), ("a.*.c", "a.b.c", True), ("a.#.c", "a.c", True),
        ("a.#.c", "a.x.y.c", True), ("a.#.c", "a.x.y.d", False), ("*.*", "a", False),
        ("a.b", "a.bc", False), ("a", "a.b", False), ("a.b", "a.b", True),
        ("*.x", "x", False), ("a+b", "a+b", True), ("a+b", "aab", False),
    ],
)
def test_topic_matching(pattern: str, key: str, matches: bool) -> None:
    exchange = Exchange("t", "topic")
    exchange.bind("q", pattern)
    assert exchange.route(key) == ({"q"} if matches else set())


def test_direct_routes_by_exact_key_and_fanout_ignores_it() -> None:
    direct, fanout = Exchange("d", "direct"), Exchange("f", "fanout")
    for exchange in (direct, fanout):
        exchange.bind("q1", "k1")
        exchange.bind("q2", "k2")
    assert direct.route("k1") == {"q1"}
    assert direct.route("k3") == set()
    assert fanout.route("anything") == {"q1", "q2"}
    assert direct.unbind("q1", "k1") and not direct.unbind("q1", "k1")
    assert direct.route("k1") == set()
    direct.bind("q1", "k2")  # a second queue by the same key: each gets the message
    assert direct.route("k2") == {"q1", "q2"}
