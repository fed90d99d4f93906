"""Grudges: who cannot hear whom. Pure functions, as Jepsen's.

A grudge maps a node to the nodes it cannot hear. It is directed: ``{"n2": {"n1"}}``
is a one-way cut (n2 stops hearing n1; n1 still hears n2). The constructors take node
lists in the order to use; the random ones take the `random.Random` to draw from.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from .core import InvalidOp

Grudge = dict[str, frozenset[str]]

KINDS = ("halves", "isolate", "majority-ring", "bridge", "one-way", "grudge")


def complete(components: Sequence[Collection[str]]) -> Grudge:
    """Each node hears only the nodes of its own component."""
    everyone = {node for component in components for node in component}
    return {node: frozenset(everyone - set(component))
            for component in components for node in component}


def bisect(nodes: Sequence[str]) -> tuple[list[str], list[str]]:
    """The smaller half first, as Jepsen splits."""
    middle = len(nodes) // 2
    return list(nodes[:middle]), list(nodes[middle:])


def halves(nodes: Sequence[str]) -> Grudge:
    return complete(bisect(nodes))


def isolate(node: str, nodes: Sequence[str]) -> Grudge:
    return complete([[node], [n for n in nodes if n != node]])


def bridge(nodes: Sequence[str]) -> Grudge:
    """Two halves that cannot hear each other, and one node (the first of the larger
    half) that hears and is heard by everybody."""
    first, second = bisect(nodes)
    middle = second[0]
    grudge = complete([first, second])
    return {node: frozenset(hated - {middle})
            for node, hated in grudge.items() if node != middle}


def majority_ring(nodes: Sequence[str]) -> Grudge:
    """Each node hears a majority: the window of that many consecutive nodes of the
    ring that has it in the middle; no two nodes hear the same majority. With an even
    window the middle is right of centre, so for three nodes each hears itself and its
    left neighbour only: a directed ring."""
    n = len(nodes)
    size = n // 2 + 1
    grudge: Grudge = {}
    for start in range(n):
        window = [nodes[(start + i) % n] for i in range(size)]
        grudge[window[size // 2]] = frozenset(set(nodes) - set(window))
    return grudge


def one_way(source: str, target: str) -> Grudge:
    """``target`` stops hearing ``source``."""
    return {target: frozenset({source})}


def explicit(raw: Mapping[str, Collection[str]], nodes: Collection[str]) -> Grudge:
    grudge = {}
    for node, hated in raw.items():
        unknown = ({node} | set(hated)) - set(nodes)
        if unknown:
            raise InvalidOp(f"grudge names unknown nodes {sorted(unknown)}")
        if node in hated:
            raise InvalidOp(f"a node cannot be cut from itself: {node}")
        grudge[node] = frozenset(hated)
    return grudge


def resolve(spec: Mapping[str, Any], nodes: Sequence[str], rng: random.Random) -> Grudge:
    """The grudge a partition op asks for: ``{"kind": ..., ...}``; an explicit
    ``"grudge"`` wins (schedules carry the grudge they drew, so a run replays)."""
    kind = spec.get("kind", "grudge")
    if kind not in KINDS:
        raise InvalidOp(f"unknown partition kind {kind!r}; kinds: {', '.join(KINDS)}")
    if "grudge" in spec:
        return explicit(spec["grudge"], nodes)
    if kind == "grudge":
        raise InvalidOp("a partition of kind 'grudge' needs the grudge")
    ordered = sorted(nodes)
    if len(ordered) < 2:
        raise InvalidOp(f"a partition needs at least two nodes, got {ordered}")
    if kind == "isolate":
        return isolate(_node(spec, "node", ordered, rng), ordered)
    if kind == "one-way":
        source = _node(spec, "from", ordered, rng)
        target = _node(spec, "to", [n for n in ordered if n != source], rng)
        return one_way(source, target)
    rng.shuffle(ordered)
    return {"halves": halves, "bridge": bridge, "majority-ring": majority_ring}[kind](ordered)


def _node(spec: Mapping[str, Any], key: str, nodes: list[str], rng: random.Random) -> str:
    node = spec.get(key)
    if node is None:
        return rng.choice(nodes)
    if node not in nodes:
        raise InvalidOp(f"{key}: unknown node {node!r}; nodes: {nodes}")
    return str(node)


def hears(grudge: Mapping[str, Collection[str]], listener: str, speaker: str) -> bool:
    return speaker not in grudge.get(listener, ())


def cut_pairs(grudge: Mapping[str, Collection[str]]) -> list[tuple[str, str]]:
    """Every ``(speaker, listener)`` whose bytes must be dropped, sorted."""
    return sorted((speaker, listener)
                  for listener, speakers in grudge.items() for speaker in speakers)


def to_json(grudge: Mapping[str, Collection[str]]) -> dict[str, list[str]]:
    return {node: sorted(hated) for node, hated in sorted(grudge.items()) if hated}
