"""Counts per fixed time bucket since the start of the run."""

from __future__ import annotations


class Buckets:
    def __init__(self, t0: float, width: float) -> None:
        self.t0 = t0
        self.width = width
        self._per_s = 1.0 / width
        self.counts: list[int] = []

    def index(self, time: float) -> int:
        return max(int((time - self.t0) * self._per_s), 0)

    def add(self, time: float) -> int:
        index = int((time - self.t0) * self._per_s)
        if index < 0:
            index = 0
        try:
            self.counts[index] += 1
        except IndexError:
            self.counts.extend([0] * (index + 1 - len(self.counts)))
            self.counts[index] += 1
        return index

    def padded(self, size: int) -> list[int]:
        return self.counts + [0] * (size - len(self.counts))
