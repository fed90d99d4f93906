"""The toxic types, with toxiproxy's names, attributes and per-link behaviour.

Each type is a frozen dataclass of its attributes (all integers, as in toxiproxy)
whose ``pipe`` moves chunks from a stub's input to its output until the stream ends
or the stub is interrupted. On an interrupt a toxic hands on the chunk it holds
without applying its effect, exactly as toxiproxy's toxics do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from typing import Any, ClassVar, Final, TypeVar

from . import wire
from .stream import Chunk
from .stub import Stub


@dataclasses.dataclass(frozen=True)
class ToxicAttributes:
    type_name: ClassVar[str]
    go_name: ClassVar[str]  # toxiproxy's struct name, for decoding errors
    # Toxiproxy's timeout toxic closes the link when it is removed.
    closes_on_removal: ClassVar[bool] = False

    async def pipe(self, stub: Stub) -> None:
        raise NotImplementedError

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)


async def pass_through(stub: Stub) -> None:
    """The no-op stage: every link starts with one, and a toxic that lost its toxicity
    roll runs this instead."""
    while (chunk := await stub.input.get()) is not None:
        stub.output.put(chunk)
    stub.close()


@dataclasses.dataclass(frozen=True)
class Noop(ToxicAttributes):
    type_name = "noop"
    go_name = "NoopToxic"

    async def pipe(self, stub: Stub) -> None:
        await pass_through(stub)


@dataclasses.dataclass(frozen=True)
class Latency(ToxicAttributes):
    type_name = "latency"
    go_name = "LatencyToxic"
    latency: int = 0  # ms
    jitter: int = 0  # ms

    def delay(self, rng: random.Random) -> float:
        """Seconds: latency plus a whole number of ms drawn uniformly from [-jitter, jitter)."""
        ms = self.latency
        if self.jitter > 0:
            ms += rng.randrange(2 * self.jitter) - self.jitter
        return ms / 1000

    async def pipe(self, stub: Stub) -> None:
        loop = asyncio.get_running_loop()
        while (chunk := await stub.input.get()) is not None:
            # Counted from when the chunk was read, so queued chunks are not delayed twice.
            sleep = self.delay(stub.rng) - (loop.time() - chunk.timestamp)
            if sleep > 0:
                try:
                    await asyncio.sleep(sleep)
                except asyncio.CancelledError:
                    stub.output.put(chunk)
                    raise
            # A later latency toxic in the chain then adds its delay on top of this one.
            chunk.timestamp += sleep
            stub.output.put(chunk)
        stub.close()


@dataclasses.dataclass(frozen=True)
class Bandwidth(ToxicAttributes):
    type_name = "bandwidth"
    go_name = "BandwidthToxic"
    rate: int = 0  # KB/s, 1 KB = 1000 bytes as in toxiproxy

    async def pipe(self, stub: Stub) -> None:
        loop = asyncio.get_running_loop()
        # Seconds still owed; carrying it over absorbs the timer's overshoot.
        owed = 0.0
        slice_size = self.rate * 100  # what 100 ms of the rate allows
        while (chunk := await stub.input.get()) is not None:
            if self.rate <= 0:
                stub.output.put(chunk)
                continue
            owed += len(chunk.data) / (self.rate * 1000)
            try:
                # Big chunks at low rates go out in 100 ms slices, not in one late burst.
                while len(chunk.data) > slice_size:
                    await asyncio.sleep(0.1)
                    stub.output.put(Chunk(chunk.data[:slice_size], chunk.timestamp))
                    chunk.data = chunk.data[slice_size:]
                    owed -= 0.1
                start = loop.time()
                if owed > 0:
                    await asyncio.sleep(owed)
                owed -= loop.time() - start
            except asyncio.CancelledError:
                stub.output.put(chunk)
                raise
            stub.output.put(chunk)
        stub.close()


@dataclasses.dataclass(frozen=True)
class SlowClose(ToxicAttributes):
    type_name = "slow_close"
    go_name = "SlowCloseToxic"
    delay: int = 0  # ms

    async def pipe(self, stub: Stub) -> None:
        while (chunk := await stub.input.get()) is not None:
            stub.output.put(chunk)
        # An interrupt here leaves the end-of-stream queued, so a restart waits again.
        await asyncio.sleep(self.delay / 1000)
        stub.close()


@dataclasses.dataclass(frozen=True)
class Timeout(ToxicAttributes):
    type_name = "timeout"
    go_name = "TimeoutToxic"
    closes_on_removal = True
    timeout: int = 0  # ms; 0 = never close, a black hole

    async def pipe(self, stub: Stub) -> None:
        while True:
            if self.timeout > 0:
                # As in toxiproxy the clock restarts with each chunk: the link closes
                # after `timeout` ms without data in this direction.
                try:
                    async with asyncio.timeout(self.timeout / 1000):
                        chunk = await stub.input.get()
                except TimeoutError:
                    stub.close()
                    return
            else:
                chunk = await stub.input.get()
            if chunk is None:
                stub.close()
                return
            stub.discard(len(chunk.data))


@dataclasses.dataclass(frozen=True)
class ResetPeer(ToxicAttributes):
    type_name = "reset_peer"
    go_name = "ResetToxic"
    timeout: int = 0  # ms after the first data (or end of stream) before the reset

    async def pipe(self, stub: Stub) -> None:
        chunk = await stub.input.get()
        if chunk is not None:
            stub.discard(len(chunk.data))
        wait = asyncio.ensure_future(asyncio.sleep(self.timeout / 1000))
        try:
            await asyncio.shield(wait)
        except asyncio.CancelledError:
            if stub.stopped:
                wait.cancel()
                raise
            # Once triggered the reset is committed: an interrupt waits for it, as in
            # toxiproxy.
            await wait
        stub.host.reset_peer()
        stub.close()


@dataclasses.dataclass(frozen=True)
class Slicer(ToxicAttributes):
    type_name = "slicer"
    go_name = "SlicerToxic"
    average_size: int = 0  # bytes
    size_variation: int = 0  # bytes, should be below average_size
    delay: int = 0  # µs after each slice

    def pieces(self, size: int, rng: random.Random) -> list[tuple[int, int]]:
        """Split [0, size) into slices of about average_size ± size_variation bytes.

        Halves recursively with a random shift of the midpoint, like toxiproxy, but
        never makes an empty slice: toxiproxy recurses forever when average_size is 0.
        """
        result: list[tuple[int, int]] = []
        todo = [(0, size)]
        while todo:
            start, end = todo.pop()
            if end - start <= 1 or (end - start) - self.average_size <= self.size_variation:
                result.append((start, end))
                continue
            mid = start + (end - start) // 2
            if self.size_variation > 0:
                mid += rng.randrange(2 * self.size_variation) - self.size_variation
            mid = min(max(mid, start + 1), end - 1)
            todo.append((mid, end))
            todo.append((start, mid))
        return result

    async def pipe(self, stub: Stub) -> None:
        while (chunk := await stub.input.get()) is not None:
            data = chunk.data
            for start, end in self.pieces(len(data), stub.rng):
                stub.output.put(Chunk(data[start:end], chunk.timestamp))
                try:
                    await asyncio.sleep(self.delay / 1_000_000)
                except asyncio.CancelledError:
                    if end < len(data):
                        stub.output.put(Chunk(data[end:], chunk.timestamp))
                    raise
        stub.close()


@dataclasses.dataclass(frozen=True)
class LimitData(ToxicAttributes):
    type_name = "limit_data"
    go_name = "LimitDataToxic"
    bytes: int = 0

    async def pipe(self, stub: Stub) -> None:
        assert stub.state is not None
        state = stub.state
        while (chunk := await stub.input.get()) is not None:
            allowed = max(self.bytes - state.transmitted, 0)
            if allowed < len(chunk.data):
                stub.discard(len(chunk.data) - allowed)
                chunk.data = chunk.data[:allowed]
            if chunk.data:
                stub.output.put(chunk)
                state.transmitted += len(chunk.data)
            if self.bytes - state.transmitted <= 0:
                break
        stub.close()


KINDS: Final[dict[str, type[ToxicAttributes]]] = {
    kind.type_name: kind
    for kind in (Noop, Latency, Bandwidth, SlowClose, Timeout, ResetPeer, Slicer, LimitData)
}

A = TypeVar("A", bound=ToxicAttributes)


def decode_attributes(base: A, raw: Any) -> A:
    """Apply a JSON ``attributes`` value over ``base`` as Go decodes into a struct:
    absent or null fields keep their value, unknown keys are ignored."""
    if raw is None:
        return base
    kind = type(base)
    obj = wire.expect_object(raw, f"toxics.{kind.go_name}")
    changes: dict[str, int] = {}
    for field in dataclasses.fields(kind):
        value = wire.int_field(obj, field.name, kind.go_name)
        if value is not None:
            changes[field.name] = value
    return dataclasses.replace(base, **changes)
