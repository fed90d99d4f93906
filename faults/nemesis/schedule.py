"""The combined random nemesis's schedule: alternating fault and quiet windows, each
fault drawn with concrete targets, and a final heal at the end of the fault phase.

Everything is drawn from the run's root seed, one stream per part (timing and the
choice of fault; partitions; process faults; link faults; admin faults), so the same
seed and the same cluster give the same schedule, and what one part draws does not
shift another's draws. Ops carry what was drawn (grudges, nodes, links, attributes),
so the schedule alone says what the run did.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from faults.seeds import stream

from . import grudges, targets
from .core import HEAL, Op
from .partition import MODES

PARTITIONS = ("halves", "isolate", "majority-ring", "bridge", "one-way")
PROCESS = ("kill", "stop", "pause", "restart")
LINKS = ("latency", "bandwidth", "slicer", "reset-peer", "limit-data")
# "policy" is drawn only when the config lists policies to set.
FAULTS = (*(f"partition-{kind}" for kind in PARTITIONS), *PROCESS, *LINKS, "policy")

FINAL = {"final": True}


@dataclass(frozen=True)
class ScheduleConfig:
    duration: float  # seconds of fault phase; the final heal is at its end
    faults: tuple[str, ...] = tuple(f for f in FAULTS if f != "policy")
    fault_seconds: tuple[float, float] = (5.0, 15.0)
    quiet_seconds: tuple[float, float] = (5.0, 15.0)
    partition_modes: tuple[str, ...] = MODES
    # Bodies for set-policy ops (name, pattern, definition, ...), for "policy" faults.
    policies: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        unknown = set(self.faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
        if not self.faults:
            raise ValueError("a schedule needs at least one kind of fault")
        if "policy" in self.faults and not self.policies:
            raise ValueError("'policy' faults need policies to set")
        if set(self.partition_modes) - set(MODES) or not self.partition_modes:
            raise ValueError(f"partition modes must be among {MODES}")


@dataclass(frozen=True)
class Step:
    at: float  # seconds from the start of the fault phase
    op: Op


def is_final(op: Op) -> bool:
    return op.f == HEAL and op.value == FINAL


@dataclass
class _Draw:
    """What the fault builders draw from: the cluster, and one stream per part."""

    seed: int
    config: ScheduleConfig
    nodes: list[str]
    node_links: list[str]
    client_links: list[str]
    streams: dict[str, random.Random] = field(default_factory=dict)

    def rng(self, part: str) -> random.Random:
        if part not in self.streams:
            self.streams[part] = stream(self.seed, "nemesis", "plan", part)
        return self.streams[part]


def plan(seed: int, config: ScheduleConfig, nodes: Sequence[str],
         node_links: Sequence[str] = (), client_links: Sequence[str] = ()) -> list[Step]:
    if not nodes:
        raise ValueError("a schedule needs the cluster's nodes")
    draw = _Draw(seed, config, sorted(nodes), sorted(node_links), sorted(client_links))
    timing = draw.rng("schedule")
    steps: list[Step] = []
    at = timing.uniform(*config.quiet_seconds)
    while at < config.duration:
        kind = timing.choice(config.faults)
        steps.append(Step(at, _BUILDERS[kind](draw, kind)))
        end = at + timing.uniform(*config.fault_seconds)
        if end >= config.duration:
            break  # the final heal ends this window
        steps.append(Step(end, Op(HEAL)))
        at = end + timing.uniform(*config.quiet_seconds)
    steps.append(Step(config.duration, Op(HEAL, dict(FINAL))))
    return steps


# -- the faults -------------------------------------------------------------------------


def _partition(draw: _Draw, kind: str) -> Op:
    rng = draw.rng("partition")
    name = kind.removeprefix("partition-")
    grudge = grudges.resolve({"kind": name}, draw.nodes, rng)
    return Op("partition", {"kind": name, "mode": rng.choice(draw.config.partition_modes),
                            "grudge": grudges.to_json(grudge)})


def _process(draw: _Draw, kind: str) -> Op:
    rng = draw.rng("process")
    share = "one" if kind == "restart" else rng.choice(("one", "minority"))
    return Op(kind, {"nodes": targets.select(share, draw.nodes, rng)})


def _links(draw: _Draw, rng: random.Random) -> list[str]:
    groups = [group for group in (draw.node_links, draw.client_links) if group]
    if not groups:
        raise ValueError("link faults need the topology's links")
    group = rng.choice(groups)
    return sorted(rng.sample(group, rng.randint(1, len(group))))


def _degrade(draw: _Draw, kind: str) -> Op:
    rng = draw.rng("link")
    links = _links(draw, rng)
    toxic = kind.replace("-", "_")
    attributes: dict[str, int]
    stream_name = rng.choice(("upstream", "downstream", "both"))
    if toxic == "latency":
        latency = rng.randint(20, 300)
        attributes = {"latency": latency, "jitter": rng.randint(0, latency // 2)}
        stream_name = "both"
    elif toxic == "bandwidth":
        attributes = {"rate": rng.choice((16, 64, 256, 1024))}
    elif toxic == "slicer":
        size = rng.randint(16, 256)
        attributes = {"average_size": size, "size_variation": size // 4,
                      "delay": rng.randint(100, 5000)}
    elif toxic == "reset_peer":
        attributes = {"timeout": rng.randint(0, 2000)}
    else:
        attributes = {"bytes": rng.randint(1024, 65536)}
    return Op("degrade", {"toxic": toxic, "links": links, "stream": stream_name,
                          "attributes": attributes})


def _policy(draw: _Draw, kind: str) -> Op:
    rng = draw.rng("admin")
    return Op("set-policy", {**rng.choice(draw.config.policies), "node": rng.choice(draw.nodes)})


_BUILDERS: dict[str, Callable[[_Draw, str], Op]] = {
    **{f"partition-{kind}": _partition for kind in PARTITIONS},
    **{kind: _process for kind in PROCESS},
    **{kind: _degrade for kind in LINKS},
    "policy": _policy,
}
