"""The bench's arithmetic: nearest-rank percentiles, ratios to the first URL's figures,
and the pauses in a failover run's confirm stream. Pure functions, no I/O."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile: the smallest sample with at least q% of samples <= it."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def ratios(first: Mapping[str, float], other: Mapping[str, float]) -> dict[str, float | None]:
    """other / first for every figure both have; None where the reference is zero."""
    out: dict[str, float | None] = {}
    for name, reference in first.items():
        if name not in other:
            continue
        out[name] = None if reference == 0 else round(other[name] / reference, 3)
    return out


@dataclass(frozen=True)
class ConfirmGaps:
    longest: float  # the longest pause between consecutive confirms, kill or not
    longest_before_kill: float  # the same, among confirms that came before the kill
    kill_to_first_confirm: float | None  # None: no confirm came after the kill


def confirm_gaps(ack_times: Sequence[float], kill_at: float) -> ConfirmGaps:
    """Pauses in a run's confirm stream (times in seconds, in arrival order); a kill
    that falls inside a pause is measured from kill_at to the end of that pause."""
    if not ack_times:
        raise ValueError("no confirms at all")
    times = list(ack_times)
    if any(b < a for a, b in itertools.pairwise(times)):
        raise ValueError("confirm times are not in arrival order")
    longest = longest_before = 0.0
    first_after: float | None = None
    for previous, current in itertools.pairwise(times):
        longest = max(longest, current - previous)
        if current <= kill_at:
            longest_before = max(longest_before, current - previous)
    after = [t for t in times if t > kill_at]
    if after:
        first_after = after[0] - kill_at
    return ConfirmGaps(longest, longest_before, first_after)
