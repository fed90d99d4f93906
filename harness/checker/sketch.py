"""A log-bucketed histogram: percentiles within 1 % in fixed memory, whatever the count.

Confirm latencies of a long soak would otherwise have to be kept one float per message.
"""

from __future__ import annotations

import math


class LogHistogram:
    """Non-negative values in buckets whose bounds grow by ``precision`` each."""

    def __init__(self, precision: float = 0.01, lowest: float = 0.001) -> None:
        self._lowest = lowest
        self._growth = 1.0 + precision
        self._scale = 1.0 / math.log(self._growth)
        self._counts: list[int] = []
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = 0.0

    def add(self, value: float) -> None:
        value = max(value, 0.0)
        index = (0 if value <= self._lowest
                 else 1 + int(math.log(value / self._lowest) * self._scale))
        counts = self._counts
        if index >= len(counts):
            counts.extend([0] * (index + 1 - len(counts)))
        counts[index] += 1
        self.count += 1
        self.total += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)

    def quantile(self, q: float) -> float | None:
        """The value below which a fraction ``q`` of the values lie (None if empty)."""
        if not self.count:
            return None
        if q <= 0.0:
            return self.min
        if q >= 1.0:
            return self.max
        rank = q * (self.count - 1)
        seen = 0
        for index, count in enumerate(self._counts):
            seen += count
            if seen > rank:
                if index == 0:
                    return self.min
                middle = self._lowest * self._growth ** (index - 0.5)
                return min(max(middle, self.min), self.max)
        return self.max

    def mean(self) -> float | None:
        return self.total / self.count if self.count else None
