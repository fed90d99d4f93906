"""A proxy's toxics: the chain for each direction, and the live links they apply to."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from faults import seeds

from . import errors, wire
from .link import LinkOwner, ToxicLink
from .stream import Direction
from .stub import ToxicState
from .toxics import KINDS, Noop, ToxicAttributes, decode_attributes


@dataclass(eq=False)
class Toxic:
    name: str
    type: str
    stream: str  # as the client wrote it: toxiproxy echoes it back unchanged
    direction: Direction
    toxicity: float
    attributes: ToxicAttributes
    seed: int  # root of this toxic's per-connection random streams

    def to_json(self) -> dict[str, Any]:
        return {
            "attributes": self.attributes.to_json(),
            "name": self.name,
            "type": self.type,
            "stream": self.stream,
            "toxicity": self.toxicity,
        }

    def link_state(self, connection: int) -> ToxicState:
        """The state this toxic starts with on the given connection of its proxy: the
        connection's own random stream, and its toxicity roll drawn first from it."""
        stream = seeds.stream(self.seed, connection)
        return ToxicState(rng=stream, roll=stream.random())


class ToxicCollection:
    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._serials = seeds.Serials()
        self._chains: dict[Direction, list[Toxic]] = {d: [] for d in Direction}
        self._links: dict[ToxicLink, None] = {}

    def all(self) -> list[Toxic]:
        """Upstream toxics, then downstream ones, each in the order they were added."""
        return self._chains[Direction.UPSTREAM] + self._chains[Direction.DOWNSTREAM]

    def find(self, name: str) -> Toxic | None:
        return next((toxic for toxic in self.all() if toxic.name == name), None)

    def get(self, name: str) -> Toxic:
        toxic = self.find(name)
        if toxic is None:
            raise errors.toxic_not_found()
        return toxic

    def _links_for(self, direction: Direction) -> list[ToxicLink]:
        return [link for link in self._links if link.direction is direction]

    async def add(self, body: Any) -> Toxic:
        """Create a toxic from a decoded request body, checking it in toxiproxy's order."""
        struct = "ToxicWrapper"
        obj = wire.expect_object(body, f"toxics.{struct}")
        name = wire.string_field(obj, "name", struct) or ""
        type_name = wire.string_field(obj, "type", struct) or ""
        stream = wire.string_field(obj, "stream", struct)
        stream = "downstream" if stream is None else stream
        toxicity = wire.float_field(obj, "toxicity", struct)
        raw_attributes = wire.lookup(obj, "attributes")
        # Toxiproxy first reads the attributes into a no-op toxic: only their shape counts.
        decode_attributes(Noop(), raw_attributes)

        direction = Direction.parse(stream)
        if direction is None:
            raise errors.invalid_stream()
        name = name or f"{type_name}_{stream}"
        kind = KINDS.get(type_name)
        if kind is None:
            raise errors.invalid_toxic_type()
        if self.find(name) is not None:
            raise errors.toxic_already_exists()
        toxic = Toxic(
            name=name,
            type=type_name,
            stream=stream,
            direction=direction,
            toxicity=1.0 if toxicity is None else toxicity,
            attributes=decode_attributes(kind(), raw_attributes),
            seed=seeds.derive(self._seed, "toxic", name, self._serials.next(name)),
        )
        self._chains[direction].append(toxic)
        links = self._links_for(direction)
        await asyncio.gather(*(link.add_toxic(toxic) for link in links))
        return toxic

    async def update(self, name: str, body: Any) -> Toxic:
        """Change a toxic's attributes and toxicity; name, type and stream stay."""
        toxic = self.get(name)
        obj = wire.expect_object(body, "struct { Attributes interface {}; Toxicity float32 }")
        attributes = decode_attributes(toxic.attributes, wire.lookup(obj, "attributes"))
        toxicity = wire.float_field(obj, "toxicity", "Toxicity")
        toxic.attributes = attributes
        if toxicity is not None:
            toxic.toxicity = toxicity
        links = self._links_for(toxic.direction)
        await asyncio.gather(*(link.update_toxic(toxic) for link in links))
        return toxic

    async def remove(self, name: str) -> None:
        toxic = self.get(name)
        self._chains[toxic.direction].remove(toxic)
        links = self._links_for(toxic.direction)
        await asyncio.gather(*(link.remove_toxic(toxic) for link in links))

    async def reset(self) -> None:
        for direction in Direction:
            while self._chains[direction]:
                await self.remove(self._chains[direction][0].name)

    def open_link(
        self,
        owner: LinkOwner,
        direction: Direction,
        source: asyncio.Transport,
        dest: asyncio.Transport,
    ) -> ToxicLink:
        link = ToxicLink(owner, direction, self._chains[direction], source, dest)
        self._links[link] = None
        link.start()
        return link

    def close_link(self, link: ToxicLink) -> None:
        self._links.pop(link, None)
        link.stop()
