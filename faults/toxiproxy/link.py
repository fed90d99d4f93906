"""A link: one direction of one proxied connection, run through its proxy's toxics.

Like toxiproxy's ToxicLink it is a chain of stages, a no-op first and then one per
toxic of its direction, each reading the previous one's queue. Chunks read from the
source enter the first stage; the last stage writes into the link itself, which
writes to the destination socket. Toxics added, updated or removed while the
connection is open are spliced into the running chain.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from .stream import Chunk, ChunkQueue, Direction, Outlet
from .stub import Pipe, Stub
from .toxics import pass_through

if TYPE_CHECKING:
    from .collection import Toxic

# Bytes read from the source but not yet written to the destination above which
# the source stops being read. Queues between stages never block (so an interrupted
# toxic can always hand on what it holds); this is what bounds their memory and
# passes back-pressure to the sender, as toxiproxy's blocking channels do.
HIGH_WATER: Final = 1 << 20
LOW_WATER: Final = HIGH_WATER // 4


class LinkOwner(Protocol):
    """The connection a link belongs to."""

    @property
    def connection_id(self) -> int: ...

    def arm_reset(self) -> None: ...

    def close_transport(self, transport: asyncio.Transport) -> None: ...


@dataclass(slots=True)
class _Stage:
    toxic: Toxic | None  # None for the leading no-op stage
    stub: Stub


class ToxicLink:
    def __init__(
        self,
        owner: LinkOwner,
        direction: Direction,
        chain: Sequence[Toxic],
        source: asyncio.Transport,
        dest: asyncio.Transport,
    ) -> None:
        self.direction = direction
        self._owner = owner
        self._source = source
        self._dest = dest
        self._loop = asyncio.get_running_loop()
        self._in_flight = 0
        self._dest_blocked = False
        self._reading_paused = True  # the connection holds reads until its links exist
        self._source_ended = False
        self._stopped = False
        self.input = ChunkQueue()
        self._stages = [_Stage(None, Stub(self, self.input, self, None))]
        for toxic in chain:
            self._stages.append(self._new_stage(toxic, self._stages[-1].stub.output))
            self._stages[-2].stub.output = self._stages[-1].stub.input

    def _new_stage(self, toxic: Toxic, outlet: Outlet) -> _Stage:
        state = toxic.link_state(self._owner.connection_id)
        return _Stage(toxic, Stub(self, ChunkQueue(), outlet, state))

    @staticmethod
    def _pipe(stage: _Stage) -> Pipe:
        toxic, state = stage.toxic, stage.stub.state
        if toxic is None or state is None or state.roll >= toxic.toxicity:
            return pass_through
        return toxic.attributes.pipe

    def start(self) -> None:
        for stage in self._stages:
            stage.stub.run(self._pipe(stage))
        self._update_reading()

    def stop(self) -> None:
        self._stopped = True
        for stage in self._stages:
            stage.stub.stop()

    # -- data in ------------------------------------------------------------

    def feed(self, data: bytes) -> None:
        self._in_flight += len(data)
        self.input.put(Chunk(data, self._loop.time()))
        self._update_reading()

    def feed_eof(self) -> None:
        self._source_ended = True
        self.input.put(None)

    # -- data out: the last stage's outlet -------------------------------------

    def put(self, chunk: Chunk | None) -> None:
        if chunk is None:
            self._owner.close_transport(self._dest)
            return
        if not self._dest.is_closing():
            self._dest.write(chunk.data)
        self.release(len(chunk.data))

    # -- flow control ---------------------------------------------------------

    def release(self, nbytes: int) -> None:
        self._in_flight -= nbytes
        self._update_reading()

    def reset_peer(self) -> None:
        self._owner.arm_reset()

    def set_dest_blocked(self, blocked: bool) -> None:
        self._dest_blocked = blocked
        self._update_reading()

    def _update_reading(self) -> None:
        limit = LOW_WATER if self._reading_paused else HIGH_WATER
        pause = self._dest_blocked or self._in_flight > limit
        if pause == self._reading_paused or self._source_ended or self._source.is_closing():
            return
        self._reading_paused = pause
        if pause:
            self._source.pause_reading()
        else:
            self._source.resume_reading()

    # -- live changes to the chain ----------------------------------------------

    def _index(self, toxic: Toxic) -> int | None:
        return next((i for i, stage in enumerate(self._stages) if stage.toxic is toxic), None)

    async def add_toxic(self, toxic: Toxic) -> None:
        last = self._stages[-1]
        stage = self._new_stage(toxic, last.stub.output)
        if not await last.stub.interrupt() or self._stopped:
            return  # the stream has ended; there is nothing left to apply it to
        last.stub.output = stage.stub.input
        self._stages.append(stage)
        stage.stub.run(self._pipe(stage))
        last.stub.run(self._pipe(last))

    async def update_toxic(self, toxic: Toxic) -> None:
        index = self._index(toxic)
        if index is None:
            return
        stage = self._stages[index]
        if await stage.stub.interrupt() and not self._stopped:
            stage.stub.run(self._pipe(stage))

    async def remove_toxic(self, toxic: Toxic) -> None:
        index = self._index(toxic)
        if index is None:
            return
        stub = self._stages[index].stub
        if not await stub.interrupt() or self._stopped:
            return
        if toxic.attributes.closes_on_removal:
            stub.close()
            return
        previous = self._stages[index - 1]
        resumed = await previous.stub.interrupt()
        if self._stopped:
            return
        # Whatever the removed stage had queued goes on, in order, ahead of anything new.
        pending, ended = stub.input.drain()
        for chunk in pending:
            stub.output.put(chunk)
        if ended:
            stub.close()
            return
        previous.stub.output = stub.output
        del self._stages[index]
        if resumed:
            previous.stub.run(self._pipe(previous))
