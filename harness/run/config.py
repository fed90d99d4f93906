"""What a run is, settled before anything starts: the scenario with the command line's
overrides, its root seed, each queue's members as the policy places them, and the
configuration the history's header records."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faults.seeds import fresh_seed
from harness.scenarios import Scenario


@dataclass(frozen=True)
class RunOptions:
    runtime: str | None = None  # None: the scenario's
    target: str | None = None  # None: the scenario's
    seed: int | None = None  # None: the scenario's, else drawn
    time_limit: float | None = None  # seconds of workload before the drain
    nodes: int | None = None
    store: Path = Path("store")


def effective_scenario(scenario: Scenario, options: RunOptions) -> Scenario:
    """The scenario with the command line's overrides; ``time_limit`` sets how long the
    workload runs before the drain, taken from the fault phase first."""
    changes: dict[str, Any] = {}
    if options.nodes is not None:
        changes["nodes"] = options.nodes
    if options.runtime is not None:
        changes["runtime"] = options.runtime
    if options.target is not None:
        changes["target"] = options.target
    phases = scenario.phases
    if options.time_limit is not None:
        rest = phases.warmup + phases.recovery
        if options.time_limit > rest:
            phases = dataclasses.replace(phases, faults=options.time_limit - rest)
        else:
            share = options.time_limit / (rest + phases.faults)
            phases = dataclasses.replace(phases, warmup=phases.warmup * share,
                                         faults=phases.faults * share,
                                         recovery=phases.recovery * share)
        changes["phases"] = phases
    return dataclasses.replace(scenario, **changes)


def root_seed(scenario: Scenario, options: RunOptions) -> int:
    if options.seed is not None:
        return options.seed
    return scenario.seed if scenario.seed is not None else fresh_seed()


def queue_members(scenario: Scenario) -> dict[str, list[str]]:
    """Each queue's master (its home node, round robin) then mirrors in join order, as
    the policy places them: the other nodes in cluster order (docs/cluster-design.md).
    What the history's header says the harness set up, and where the checker's replay
    of promotions starts."""
    nodes = scenario.node_names
    policy = scenario.policy
    mode = policy.get("ha-mode")
    out: dict[str, list[str]] = {}
    for i, queue in enumerate(scenario.workload.queues):
        home = nodes[i % len(nodes)]
        members = [home, *(n for n in nodes if n != home)]
        if mode == "exactly":
            members = members[:int(policy["ha-params"])]
        elif mode == "nodes":
            members = [n for n in members if n in policy["ha-params"]]
        elif mode != "all":
            members = [home]
        out[queue] = members or [home]
    return out


def history_config(scenario: Scenario, members: dict[str, list[str]]) -> dict[str, Any]:
    w = scenario.workload
    return {
        "nodes": scenario.node_names, "partition_handling": scenario.partition_handling,
        "persistent": w.persistent, "runtime": scenario.runtime, "target": scenario.target,
        "queues": {q: {"members": m, "durable": w.durable, "policy": dict(scenario.policy)}
                   for q, m in members.items()},
        "fanout": w.fanout_routes(),
        "workload": dataclasses.asdict(w), "nemesis": dataclasses.asdict(scenario.nemesis),
        "phases": dataclasses.asdict(scenario.phases),
    }

