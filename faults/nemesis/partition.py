"""Partitions built from directed links.

For every (speaker, listener) in the grudge the listener must stop hearing the
speaker. As a black-hole (``timeout`` 0: bytes dropped, connections left open) that
is the upstream of the speaker's link to the listener, and when nodes also answer
over links they accept (a duplex topology) the downstream of the listener's link to
the speaker too. Our nodes never do, and cutting that stream anyway would be felt:
removing a ``timeout`` toxic closes the connections through it, so the speaker would
see the listener's link drop at heal time. As resets, the proxy of the speaker's link
to the listener is disabled (its connections drop, new ones are refused), and in a
duplex topology the listener's link to the speaker too: a disabled proxy cannot pass
one way of a connection, so a one-way grudge there is cut both ways. Cuts accumulate
until healed.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from typing import Any, Literal

from faults.client import HealError, HealVerifier, ToxiproxyClient, ToxiproxyError
from faults.client.errors import AlreadyExists
from faults.topology import Topology

from . import grudges
from .core import HEAL, InvalidOp, Op, option, require
from .healing import LinkFaults, heal_links, undo_links

Mode = Literal["black-hole", "reset"]
MODES: tuple[Mode, ...] = ("black-hole", "reset")
# One toxic per direction of a link; each direction is cut at most once.
TOXIC = {"upstream": "partition-upstream", "downstream": "partition-downstream"}


@dataclass
class _Cut:
    toxics: set[str] = field(default_factory=set)
    disabled: bool = False


class PartitionNemesis:
    fs = frozenset({"partition", HEAL})

    def __init__(self, client: ToxiproxyClient, topology: Topology, rng: random.Random, *,
                 mode: Mode = "black-hole", verifier: HealVerifier | None = None) -> None:
        self.client = client
        self.topology = topology
        self.rng = rng
        self.mode = mode
        self.verifier = verifier or HealVerifier(client)
        self.cuts: dict[str, _Cut] = {}  # link name -> what this nemesis did to it

    def setup(self) -> None:
        return None

    def invoke(self, op: Op) -> Op:
        require(op, self.fs)
        return self._heal(op) if op.f == HEAL else self._partition(op)

    def teardown(self) -> None:
        result = self._heal(Op(HEAL))
        if result.type != "ok":
            raise HealError(", ".join(sorted(self.cuts)), result.error or "not healed")

    # -- partition ----------------------------------------------------------------------

    def _partition(self, op: Op) -> Op:
        mode = option(op, "mode", self.mode)
        if mode not in MODES:
            raise InvalidOp(f"partition mode must be one of {MODES}, got {mode!r}")
        grudge = grudges.resolve(op.value or {}, list(self.topology.nodes), self.rng)
        steps = [step for speaker, listener in grudges.cut_pairs(grudge)
                 for step in self._steps(speaker, listener, mode)]
        value: dict[str, Any] = {"kind": option(op, "kind", "grudge"), "mode": mode,
                                 "grudge": grudges.to_json(grudge),
                                 "links": sorted({link for link, _ in steps})}
        done = 0
        try:
            for link, stream in steps:
                self._cut(link, stream)
                done += 1
        except ToxiproxyError as exc:
            if done == 0:
                return op.fail(str(exc), value)
            return op.info(f"partly applied ({done} of {len(steps)} cuts): {exc}", value)
        return op.ok(value)

    def _steps(self, speaker: str, listener: str, mode: Mode) -> list[tuple[str, str | None]]:
        """(link, stream to black-hole) pairs; stream None means disable the link."""
        out = self.topology.node_link(speaker, listener).name
        if not self.topology.duplex:
            return [(out, "upstream" if mode == "black-hole" else None)]
        back = self.topology.node_link(listener, speaker).name
        if mode == "reset":  # a proxy is disabled whole: both ways of its connections
            return [(out, None), (back, None)]
        return [(out, "upstream"), (back, "downstream")]

    def _cut(self, link: str, stream: str | None) -> None:
        cut = self.cuts.get(link, _Cut())
        if stream is None:
            if not cut.disabled:
                self.client.disable(link)
                cut.disabled = True
        else:
            name = TOXIC[stream]
            if name not in cut.toxics:
                # Already there: left by an attempt whose answer we lost; it is ours.
                with contextlib.suppress(AlreadyExists):
                    self.client.add_toxic(link, name, "timeout", stream=stream,
                                          attributes={"timeout": 0})
                cut.toxics.add(name)
        self.cuts[link] = cut

    # -- heal ---------------------------------------------------------------------------

    def undo(self) -> None:
        undo_links(self.verifier, self.topology, self._faults())

    def _faults(self) -> LinkFaults:
        return {name: (cut.toxics, cut.disabled) for name, cut in self.cuts.items()}

    def _heal(self, op: Op) -> Op:
        faults = self._faults()
        result, healed = heal_links(op, self.verifier, self.topology, faults)
        for name in healed:
            del self.cuts[name]
        return result
