"""Data moving through a link: chunks, directions and the queues between toxic stages."""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from dataclasses import dataclass
from typing import Protocol


class Direction(enum.Enum):
    UPSTREAM = "upstream"  # client -> server
    DOWNSTREAM = "downstream"  # server -> client

    @classmethod
    def parse(cls, text: str) -> Direction | None:
        # Toxiproxy matches the stream name case-insensitively.
        try:
            return cls(text.lower())
        except ValueError:
            return None


@dataclass(slots=True)
class Chunk:
    data: bytes
    # Loop time when the bytes were read from the source; latency counts from here.
    timestamp: float


class Outlet(Protocol):
    """Where a stage sends its output: the next stage's queue or the link's sink.

    ``put`` never blocks, so a stage can hand over what it holds even while being
    interrupted; the link bounds memory by pausing its source instead.
    """

    def put(self, chunk: Chunk | None) -> None: ...


class ChunkQueue:
    """Single-consumer queue whose end-of-stream marker (None) is sticky.

    Like a closed Go channel, a closed queue keeps answering None once drained, so a
    stage restarted after an interrupt still sees the end of the stream.
    """

    __slots__ = ("_eof", "_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Chunk] = deque()
        self._eof = False
        self._waiter: asyncio.Future[None] | None = None

    def put(self, chunk: Chunk | None) -> None:
        if chunk is None:
            self._eof = True
        else:
            self._items.append(chunk)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Chunk | None:
        while not self._items:
            if self._eof:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._items.popleft()

    def drain(self) -> tuple[list[Chunk], bool]:
        """Take everything queued now; the flag tells whether the stream has ended."""
        items = list(self._items)
        self._items.clear()
        return items, self._eof
