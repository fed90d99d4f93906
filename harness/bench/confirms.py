"""Bookkeeping of one publishing run's confirms: which delivery tags are settled
(acked or nacked), each ack's latency, and when acks arrived. No I/O: the client
feeds it what it sends and what the broker confirms."""

from __future__ import annotations

import asyncio


class ConfirmRun:
    """Delivery tags of one publishing run, with their send times and confirm times."""

    def __init__(self, first_tag: int, count: int, loop: asyncio.AbstractEventLoop) -> None:
        self.first_tag = first_tag
        self.count = count
        self.sent_at = [0.0] * count
        self.latencies: list[float] = []
        self.published = 0
        self.confirmed = 0
        self.nacked = 0
        self.finished: asyncio.Future[None] = loop.create_future()
        # When each batch of acks arrived (one entry per settle call that acked any).
        self.ack_times: list[float] = []
        self._settled = bytearray(count)  # 0 unsettled, 1 acked, 2 nacked
        self._lowest = 0  # index of the lowest unsettled tag

    @property
    def outstanding(self) -> int:
        return self.published - self.confirmed - self.nacked

    def acked_indices(self) -> list[int]:
        """Offsets (tag - first_tag) of the acked messages."""
        return [i for i, state in enumerate(self._settled) if state == 1]

    def mark_sent(self, k: int, now: float) -> None:
        self.sent_at[self.published : self.published + k] = [now] * k
        self.published += k

    def settle(self, tag: int, multiple: bool, ack: bool, now: float) -> None:
        index = tag - self.first_tag
        if not 0 <= index < self.published:
            return  # a tag from before this run (e.g. warm-up) or a broker bug
        start = self._lowest if multiple else index
        settled, sent_at, latencies = self._settled, self.sent_at, self.latencies
        acked_before = self.confirmed
        for i in range(start, index + 1):
            if settled[i]:
                continue
            if ack:
                settled[i] = 1
                self.confirmed += 1
                latencies.append(now - sent_at[i])
            else:
                settled[i] = 2
                self.nacked += 1
        if self.confirmed > acked_before:
            self.ack_times.append(now)
        while self._lowest < self.published and settled[self._lowest]:
            self._lowest += 1
        if self.confirmed + self.nacked == self.count and not self.finished.done():
            self.finished.set_result(None)
