"""Choosing the nodes an op acts on: an explicit list, or a named share of the
cluster drawn from the nemesis's random stream (as Jepsen's node specs)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from .core import InvalidOp

SPECS = ("one", "minority", "majority", "all")


def select(spec: Any, nodes: Sequence[str], rng: random.Random) -> list[str]:
    """``"one"``, ``"minority"`` (fewer than half), ``"majority"``, ``"all"`` (in a
    random order), or a list of node names (as given)."""
    ordered = sorted(nodes)
    if isinstance(spec, list | tuple):
        unknown = set(spec) - set(ordered)
        if unknown:
            raise InvalidOp(f"unknown nodes {sorted(unknown)}; nodes: {ordered}")
        return [str(node) for node in spec]
    counts = {"one": 1, "minority": (len(ordered) - 1) // 2,
              "majority": len(ordered) // 2 + 1, "all": len(ordered)}
    if spec not in counts:
        raise InvalidOp(f"nodes must be a list or one of {', '.join(SPECS)}, got {spec!r}")
    return rng.sample(ordered, max(1, counts[spec]) if ordered else 0)
