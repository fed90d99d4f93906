"""Replicated metadata: replicas that saw the same writes agree, whatever the order,
duplication or snapshot exchanges in between (Hypothesis against a model)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster.meta.replica import Replica, Update, Version
from tests.examples import examples

NODES = ["n1", "n2", "n3"]
KEYS = [("queue", "/", "q1"), ("queue", "/", "q2"), ("policy", "/", "ha")]

writes = st.lists(
    st.tuples(st.sampled_from(NODES), st.sampled_from(KEYS),
              st.none() | st.integers(0, 5)),
    max_size=30,
)


@settings(max_examples=examples(200), deadline=None)
@given(writes=writes, seed=st.integers(0, 2**32))
def test_replicas_converge_whatever_the_delivery_order(
    writes: list[tuple[str, tuple[str, ...], int | None]], seed: int
) -> None:
    rng = random.Random(seed)
    replicas = {node: Replica(node) for node in NODES}
    in_flight: list[tuple[str, Update]] = []
    for node, key, value in writes:
        replica = replicas[node]
        update = replica.delete(key) if value is None else replica.put(key, {"v": value})
        in_flight += [(other, update) for other in NODES if other != node]
        # Deliver a random part of what is in flight, possibly twice, in random order.
        rng.shuffle(in_flight)
        cut = rng.randrange(len(in_flight) + 1)
        for target, delivered in in_flight[:cut] + in_flight[: rng.randrange(cut + 1)]:
            replicas[target].apply(delivered)
        in_flight = in_flight[cut:]
        if rng.random() < 0.2:
            a, b = rng.sample(NODES, 2)
            replicas[b].merge(replicas[a].snapshot())
    for target, delivered in in_flight:
        replicas[target].apply(delivered)
    states = [{k: r.get(k) for k in KEYS} for r in replicas.values()]
    assert states[0] == states[1] == states[2]
    # Each key holds the write with the highest version among all writes made.
    for key in KEYS:
        newest = max((u for r in replicas.values() for u in r.snapshot() if u.key == key),
                     key=lambda u: u.version, default=None)
        assert states[0][key] == (None if newest is None else newest.value)


def test_a_later_local_write_beats_what_was_seen_before_it() -> None:
    a, b = Replica("n1"), Replica("n2")
    for _ in range(5):
        a.put(("queue", "/", "q"), {"master": "n1"})
    b.apply(a.snapshot()[0])
    rewrite = b.put(("queue", "/", "q"), {"master": "n2"})
    assert rewrite.version > Version(5, "n1")
    assert a.apply(rewrite) and a.get(("queue", "/", "q")) == {"master": "n2"}
    assert not b.apply(Update(("queue", "/", "q"), {"master": "old"}, Version(1, "n1")))


def test_deletions_are_kept_as_tombstones_and_survive_json() -> None:
    a = Replica("n1")
    a.put(("exchange", "/", "x"), {"type": "direct"})
    gone = a.delete(("exchange", "/", "x"))
    assert list(a.items("exchange")) == []
    b = Replica("n2")
    b.apply(Update(("exchange", "/", "x"), {"type": "fanout"}, Version(1, "n2")))
    b.merge(Update.from_json(u.to_json()) for u in a.snapshot())
    assert b.get(("exchange", "/", "x")) is None
    assert Update.from_json(gone.to_json()) == gone


def test_a_provisional_write_loses_to_any_other_replicas_write() -> None:
    restarted, cluster = Replica("n2"), Replica("n1")
    key = ("queue", "/", "q")
    restarted.put_provisional(key, {"master": "n2"})
    assert restarted.is_provisional(key)
    theirs = cluster.put(key, {"master": "n1"})  # clock 1, the lowest there is
    assert restarted.apply(theirs)
    assert restarted.get(key) == {"master": "n1"} and not restarted.is_provisional(key)
    # and the other way round: the provisional write never replaces a real one
    assert not cluster.apply(Update(key, {"master": "n2"}, Version(0, "n2")))


def test_provisional_writes_rank_by_place_and_every_real_write_beats_them() -> None:
    mirror, master, other = Replica("n3"), Replica("n1"), Replica("n2")
    key = ("queue", "/", "q")
    partial = mirror.put_provisional(key, {"master": "n3"}, place=2)
    first = master.put_provisional(key, {"master": "n1"}, place=0)
    assert mirror.is_provisional(key) and master.is_provisional(key)
    assert not master.apply(partial) and master.is_provisional(key)
    assert mirror.apply(first)
    assert mirror.get(key) == {"master": "n1"} and not mirror.is_provisional(key)
    real = other.put(key, {"master": "n2"})
    assert master.apply(real) and not master.is_provisional(key)
