"""A scenario: everything one run needs besides its seed's draws."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.workload.spec import WorkloadSpec

# What nemesis packages a scenario can name; see harness/scenarios/nemesis.py.
PACKAGES = ("none", "kill", "stop", "pause", "power-loss", "restart", "rolling-restart",
            "partition", "degrade", "policy", "sequence", "combined")
PartitionHandling = Literal["ignore", "pause_minority", "autoheal"]
RuntimeName = Literal["process", "docker"]
# The broker the cluster runs: our own nodes, or real RabbitMQ (Docker only).
TargetName = Literal["mirrorchaos", "rabbitmq"]


@dataclass(frozen=True)
class NemesisSpec:
    """Which faults, aimed where, for how long.

    ``targets`` is ``master`` (the first queue's master when the fault starts),
    ``mirror`` (one of its mirrors), ``one``/``minority``/``majority``/``all`` (drawn
    from the nemesis's random stream) or a list of node names. Cycle packages (kill,
    stop, pause, partition, degrade, policy) repeat fault → ``hold`` seconds → heal →
    ``quiet`` seconds through the fault phase. ``options`` are the package's own:
    ``kind``/``mode``/``from``/``to`` for partition, ``toxic``/``links``/``stream``/
    ``attributes`` for degrade (``links``: names, ``nodes``, ``clients``, ``all``, or
    ``master-out``: the node links from the master when the op starts), ``definition``
    for policy, ``faults`` for combined, ``steps`` (``[{at, f, value}]``) for sequence.
    """

    package: str = "none"
    targets: str | tuple[str, ...] = "master"
    hold: float = 5.0
    quiet: float = 5.0
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Phases:
    warmup: float = 3.0  # workload only
    faults: float = 20.0  # the nemesis acts; its final heal is at the end
    recovery: float = 5.0  # workload goes on after the heal
    drain_timeout: float = 60.0  # the final drain of every queue, in all
    # After the workload: sync every mirrored queue, SIGKILL their master and drain
    # each queue from the promoted mirror before the final drain, so a mirror whose
    # contents diverged from its master's shows up as lost, resurrected, reordered or
    # duplicated messages.
    promotion_drain: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    nodes: int = 3
    # The policy every workload queue gets at the start (an empty one: no mirroring).
    policy: Mapping[str, Any] = field(default_factory=lambda: {"ha-mode": "all"})
    partition_handling: PartitionHandling = "pause_minority"
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    nemesis: NemesisSpec = field(default_factory=NemesisSpec)
    phases: Phases = field(default_factory=Phases)
    runtime: RuntimeName = "process"
    target: TargetName = "mirrorchaos"
    seed: int | None = None  # None: drawn at run time (and printed)
    tick: float = 0.5  # node heartbeat seconds; a peer is down after 4 missed ticks
    node_args: tuple[str, ...] = ()  # appended to every node's command line

    @property
    def node_names(self) -> list[str]:
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    @property
    def loses_power(self) -> bool:
        """Whether its nemesis can lose the nodes' unsynced writes (``power-loss``)."""
        spec = self.nemesis
        steps = spec.options.get("steps", []) if spec.package == "sequence" else []
        return spec.package == "power-loss" or any(
            isinstance(step, dict) and step.get("f") == "power-loss" for step in steps)

    @property
    def runtime_seconds(self) -> float:
        """Warm-up, faults and recovery: how long the workload runs before the drain."""
        p = self.phases
        return p.warmup + p.faults + p.recovery
