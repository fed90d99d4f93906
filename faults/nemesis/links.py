"""Link degradation: latency with jitter, bandwidth, slicer, reset_peer, limit_data
and timeout (a black-hole: ``timeout`` 0 holds every byte) toxics on node links and
client links.

An op names the toxic, the links (names, or ``"nodes"``/``"clients"``/``"all"``),
the stream (``upstream``, ``downstream`` or ``both``), attributes (defaults below)
and toxicity. Degrading a link again with the same toxic and stream updates it in
place. ``heal`` removes every toxic this nemesis added, verified.
"""

from __future__ import annotations

from typing import Any

from faults.client import HealError, HealVerifier, ToxiproxyClient, ToxiproxyError
from faults.client.errors import AlreadyExists
from faults.topology import Link, Topology

from .core import HEAL, InvalidOp, Op, option, require
from .healing import LinkFaults, heal_links, undo_links

DEFAULTS: dict[str, dict[str, int]] = {
    "latency": {"latency": 100, "jitter": 20},  # ms
    "bandwidth": {"rate": 64},  # KB/s
    "slicer": {"average_size": 64, "size_variation": 32, "delay": 1000},  # bytes, µs
    "reset_peer": {"timeout": 0},  # ms
    "limit_data": {"bytes": 4096},
    "timeout": {"timeout": 0},  # ms; 0: the bytes are held until the toxic goes
}
STREAMS = {"upstream": ("upstream",), "downstream": ("downstream",),
           "both": ("upstream", "downstream")}


class LinkNemesis:
    fs = frozenset({"degrade", HEAL})

    def __init__(self, client: ToxiproxyClient, topology: Topology, *,
                 verifier: HealVerifier | None = None) -> None:
        self.client = client
        self.topology = topology
        self.verifier = verifier or HealVerifier(client)
        self.toxics: dict[str, set[str]] = {}  # link name -> toxics we added

    def setup(self) -> None:
        return None

    def invoke(self, op: Op) -> Op:
        require(op, self.fs)
        return self._heal(op) if op.f == HEAL else self._degrade(op)

    def teardown(self) -> None:
        result = self._heal(Op(HEAL))
        if result.type != "ok":
            raise HealError(", ".join(sorted(self.toxics)), result.error or "not healed")

    def _links(self, spec: Any) -> list[Link]:
        groups = {"nodes": self.topology.node_links, "clients": self.topology.client_links,
                  "all": self.topology.links}
        if isinstance(spec, str) and spec in groups:
            return groups[spec]
        if not isinstance(spec, list | tuple):
            raise InvalidOp(f"links must be a list of names or one of {sorted(groups)}")
        try:
            return [self.topology.link(name) for name in spec]
        except KeyError as exc:
            raise InvalidOp(str(exc)) from None

    def _degrade(self, op: Op) -> Op:
        kind = option(op, "toxic")
        if kind not in DEFAULTS:
            raise InvalidOp(f"toxic must be one of {sorted(DEFAULTS)}, got {kind!r}")
        stream = option(op, "stream", "both")
        if stream not in STREAMS:
            raise InvalidOp(f"stream must be one of {sorted(STREAMS)}, got {stream!r}")
        attributes = {**DEFAULTS[kind], **(option(op, "attributes") or {})}
        toxicity = float(option(op, "toxicity", 1.0))
        links = self._links(option(op, "links", "all"))
        value = {"toxic": kind, "stream": stream, "attributes": attributes,
                 "toxicity": toxicity, "links": [link.name for link in links]}
        done = 0
        try:
            for link in links:
                for direction in STREAMS[stream]:
                    self._add(link.name, f"degrade-{kind}-{direction}", kind, direction,
                              attributes, toxicity)
                    done += 1
        except ToxiproxyError as exc:
            if done == 0:
                return op.fail(str(exc), value)
            return op.info(f"partly applied ({done} toxics): {exc}", value)
        return op.ok(value)

    def _add(self, link: str, name: str, kind: str, stream: str,
             attributes: dict[str, Any], toxicity: float) -> None:
        try:
            self.client.add_toxic(link, name, kind, stream=stream, toxicity=toxicity,
                                  attributes=attributes)
        except AlreadyExists:
            self.client.update_toxic(link, name, attributes=attributes, toxicity=toxicity)
        self.toxics.setdefault(link, set()).add(name)

    def undo(self) -> None:
        undo_links(self.verifier, self.topology, self._faults())

    def _faults(self) -> LinkFaults:
        return {name: (toxics, False) for name, toxics in self.toxics.items()}

    def _heal(self, op: Op) -> Op:
        faults = self._faults()
        result, healed = heal_links(op, self.verifier, self.topology, faults)
        for name in healed:
            del self.toxics[name]
        return result
