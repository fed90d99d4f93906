"""One stage of a link: the queue it reads, the outlet it writes, the toxic it runs.

A running toxic is a task; interrupting it (to add, update or remove a toxic on a
live connection, as toxiproxy re-chains its links) cancels the task, and each toxic
hands on whatever chunk it held before it stops, so no data is lost or reordered.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from .stream import ChunkQueue, Outlet


@dataclass(slots=True)
class ToxicState:
    """What one toxic keeps for one link."""

    rng: random.Random
    # Drawn once per connection; the toxic acts on the link while roll < toxicity.
    roll: float
    # limit_data's count, kept across interrupts like toxiproxy's stateful toxics.
    transmitted: int = 0


class StubHost(Protocol):
    """The link a stub belongs to."""

    def release(self, nbytes: int) -> None:
        """Bytes left the link without reaching the destination (a toxic dropped them)."""

    def reset_peer(self) -> None:
        """Make the link's closes send TCP RST instead of FIN."""


Pipe = Callable[["Stub"], Awaitable[None]]


class Stub:
    def __init__(
        self, host: StubHost, inlet: ChunkQueue, outlet: Outlet, state: ToxicState | None
    ) -> None:
        self.host = host
        self.input = inlet
        self.output = outlet
        self.state = state
        self.closed = False
        self.stopped = False  # the link is gone; nothing will run here again
        self._task: asyncio.Task[None] | None = None

    @property
    def rng(self) -> random.Random:
        assert self.state is not None, "only the link's leading no-op stage has no state"
        return self.state.rng

    def close(self) -> None:
        """End the stream here: everything after this stage sees end-of-stream."""
        if not self.closed:
            self.closed = True
            self.output.put(None)

    def discard(self, nbytes: int) -> None:
        self.host.release(nbytes)

    def run(self, pipe: Pipe) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(pipe))

    async def _run(self, pipe: Pipe) -> None:
        # Cancelled means interrupted: the pipe has already handed on what it held.
        with contextlib.suppress(asyncio.CancelledError):
            await pipe(self)

    async def interrupt(self) -> bool:
        """Stop the running toxic so the chain can be rewired.

        False when the stage has already closed, as toxiproxy's InterruptToxic.
        """
        task = self._task
        if self.closed or task is None or task.done():
            return False
        task.cancel()
        await asyncio.wait([task])
        return not self.closed

    def stop(self) -> None:
        self.stopped = True
        if self._task is not None:
            self._task.cancel()
