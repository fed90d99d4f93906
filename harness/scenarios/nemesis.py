"""A scenario's nemesis package as a schedule of ops for `faults.nemesis.run_schedule`.

Targets ``master`` and ``mirror`` stay symbolic in the ops: the run resolves them when
the op is invoked (the master may have moved by then). Every other choice is made here
or by the nemeses from the run's seed, so a schedule replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations
from typing import Any

from cluster.core.policy import PolicyError, validate_definition
from faults.nemesis import HEAL, Op, ScheduleConfig, Step, grudges, plan
from faults.nemesis.links import DEFAULTS as TOXICS
from faults.nemesis.links import STREAMS
from faults.nemesis.partition import MODES
from faults.nemesis.schedule import FINAL
from faults.topology import client_link_name, node_link_name
from harness.scenarios.model import Scenario
from harness.workload.spec import CHURN_PREFIX

POLICY_NAME = "mirrorchaos"  # the run's own policy, set at the start on the workload's queues
# Set beside it and never in force on a correct broker (README "Running a campaign"):
# a lower priority on the same queues, and a higher one on a name no queue has. Either
# one's single replica on a workload queue shows a broker that matches policies wrong.
_DECOY = {"ha-mode": "exactly", "ha-params": 1}
DECOY_POLICIES = {"mirrorchaos-decoy-lower": (-1, None),
                  "mirrorchaos-decoy-elsewhere": (9, "^mirrorchaos-decoy$")}
SYMBOLIC = ("master", "mirror")  # targets resolved when the op is invoked
# what a set-policy's ha-mode nodes list may name, resolved when the op is invoked
POLICY_NODES = (*SYMBOLIC, "youngest")
MASTER_OUT = "master-out"  # degrade links: the node links from the master when invoked
# degrade links: the one node link from the master to its youngest mirror, when invoked
# (what the master sends that node's consumers, not its broadcasts to the eldest mirror)
MASTER_TO_YOUNGEST = "master-to-youngest"
# degrade links: every node link into the queue's youngest mirror, when invoked (the
# master's publishes and the eldest mirror's broadcasts alike: it falls behind)
TO_YOUNGEST = "to-youngest"
# not a fault: record every node's view once they agree again (harness.run.cluster_state)
SETTLED_STATE = "cluster-state"
_PROCESS = ("kill", "stop", "pause", "power-loss")
_SEQUENCE_FS = ("kill", "stop", "pause", "power-loss", "resume", "start", "restart",
                "rolling-restart", "partition", "degrade", "set-policy", "clear-policy",
                "sync-queue", "forget", HEAL, SETTLED_STATE)


class PlanError(ValueError):
    """The scenario's nemesis cannot be planned (its author's fault)."""


def queue_pattern(scenario: Scenario) -> str:
    """The policy pattern that matches exactly the workload's queues (and its churners'
    and rule probers' queues, when it has them)."""
    alternatives = [_escape(q) for q in scenario.workload.queues]
    if scenario.workload.churners or scenario.workload.rule_probers:
        alternatives.append(_escape(CHURN_PREFIX) + ".+")
    return "^(" + "|".join(alternatives) + ")$"


def decoy_policies(scenario: Scenario) -> dict[str, dict[str, Any]]:
    """The decoys' policy bodies by name (none for a scenario without a policy)."""
    if not scenario.policy:
        return {}
    return {name: {"pattern": pattern or queue_pattern(scenario), "definition": dict(_DECOY),
                   "priority": priority, "apply-to": "queues"}
            for name, (priority, pattern) in DECOY_POLICIES.items()}


def _escape(name: str) -> str:
    return "".join("\\" + c if not (c.isalnum() or c in "_-") else c for c in name)


def plan_steps(scenario: Scenario, seed: int, node_links: Sequence[str] = (),
               client_links: Sequence[str] = ()) -> list[Step]:
    spec = scenario.nemesis
    duration = scenario.phases.faults
    nodes = scenario.node_names
    final = Step(duration, Op(HEAL, dict(FINAL)))
    if spec.package == "none":
        return [final]
    if spec.package == "combined":
        config = _schedule_config(scenario)
        return plan(seed, config, nodes, node_links, client_links)
    if spec.package == "rolling-restart":
        return [Step(0.0, Op("rolling-restart")), final]
    if spec.package == "sequence":
        return [*_sequence(scenario, spec.options.get("steps", [])), final]
    fault = _cycle_op(scenario)
    steps: list[Step] = []
    at = 0.0
    while at < duration:
        steps.append(Step(at, fault))
        if at + spec.hold >= duration:
            break  # the final heal ends it
        if spec.package != "restart":  # a restart ends by itself
            steps.append(Step(at + spec.hold, Op(HEAL)))
        at += spec.hold + spec.quiet
    return [*steps, final]


def _targets(scenario: Scenario) -> Any:
    targets = scenario.nemesis.targets
    if isinstance(targets, tuple):
        unknown = set(targets) - set(scenario.node_names)
        if unknown or not targets:
            raise PlanError(f"targets must name nodes of {scenario.node_names}, got "
                            f"{list(targets)}")
        return list(targets)
    if targets not in (*SYMBOLIC, "one", "minority", "majority", "all"):
        raise PlanError("targets must be master, mirror, one, minority, majority, all or a "
                        f"list of nodes, got {targets!r}")
    return targets


def _cycle_op(scenario: Scenario) -> Op:
    spec = scenario.nemesis
    options = dict(spec.options)
    if spec.package in (*_PROCESS, "restart"):
        return Op(spec.package, {"nodes": _targets(scenario)})
    if spec.package == "partition":
        return Op("partition", _partition_value(scenario, options))
    if spec.package == "degrade":
        toxic = options.get("toxic", "latency")
        if toxic not in TOXICS:
            raise PlanError(f"toxic must be one of {sorted(TOXICS)}, got {toxic!r}")
        stream = options.get("stream", "both")
        if stream not in STREAMS:
            raise PlanError(f"stream must be one of {sorted(STREAMS)}, got {stream!r}")
        links = options.get("links", "all")
        if (links not in ("nodes", "clients", "all", MASTER_OUT, MASTER_TO_YOUNGEST,
                          TO_YOUNGEST)
                and not isinstance(links, list)):
            raise PlanError(f"links must be nodes, clients, all, {MASTER_OUT}, "
                            f"{MASTER_TO_YOUNGEST}, {TO_YOUNGEST} or a list, "
                            f"got {links!r}")
        return Op("degrade", {"toxic": toxic, "stream": stream, "links": links,
                              "attributes": dict(options.get("attributes", {})),
                              "toxicity": float(options.get("toxicity", 1.0))})
    if spec.package == "policy":
        definition = options.get("definition")
        try:
            definition = validate_definition(definition)
        except PolicyError as exc:
            raise PlanError(f"policy definition: {exc}") from None
        return Op("set-policy", {"name": POLICY_NAME,
                                 "pattern": options.get("pattern", queue_pattern(scenario)),
                                 "definition": definition, "priority": 1})
    raise PlanError(f"package {spec.package!r} has no fault cycle")


def _partition_value(scenario: Scenario, options: dict[str, Any]) -> dict[str, Any]:
    if scenario.nodes < 2:
        raise PlanError("a partition needs at least two nodes")
    kind = options.get("kind", "halves")
    if kind not in grudges.KINDS or kind == "grudge":
        raise PlanError(f"partition kind must be one of {grudges.KINDS[:-1]}, got {kind!r}")
    mode = options.get("mode", "black-hole")
    if mode not in MODES:
        raise PlanError(f"partition mode must be one of {MODES}, got {mode!r}")
    value: dict[str, Any] = {"kind": kind, "mode": mode}
    if kind == "isolate":
        targets = _targets(scenario)
        if isinstance(targets, list) and len(targets) != 1:
            raise PlanError(f"isolate takes one target node, got {targets}")
        if isinstance(targets, list):
            value["node"] = targets[0]
        elif targets in SYMBOLIC:
            value["node"] = targets
    if kind == "one-way":
        for key in ("from", "to"):
            if key in options:
                if options[key] not in (*SYMBOLIC, *scenario.node_names):
                    raise PlanError(f"partition {key} must be master, mirror or a node, "
                                    f"got {options[key]!r}")
                value[key] = options[key]
    return value


def _sequence(scenario: Scenario, raw: Any) -> list[Step]:
    if not isinstance(raw, list) or not raw:
        raise PlanError("steps must be a non-empty list of {at, f, value}")
    steps = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) - {"at", "f", "value"}:
            raise PlanError(f"step {i}: expected a table with at, f and optional value")
        at, f = item.get("at"), item.get("f")
        if isinstance(at, bool) or not isinstance(at, int | float) or at < 0:
            raise PlanError(f"step {i}: at must be seconds into the fault phase, got {at!r}")
        if f not in _SEQUENCE_FS:
            raise PlanError(f"step {i}: f must be one of {', '.join(_SEQUENCE_FS)}, got {f!r}")
        value = item.get("value")
        if f == "sync-queue":
            value = _sync_value(scenario, value, i)
        elif f == "set-policy":
            value = _policy_value(scenario, value, i)
        elif f == "forget" and (not isinstance(value, dict) or set(value) != {"node"} or (
                value["node"] not in (*SYMBOLIC, *scenario.node_names))):
            raise PlanError(f"step {i}: forget takes {{node = master|mirror|<node>}} "
                            f"(nodes {list(scenario.node_names)}), got {value!r}")
        elif f == SETTLED_STATE and value is not None and (
                not isinstance(value, dict) or set(value) - {"answering"}):
            raise PlanError(f"step {i}: cluster-state takes only {{answering = true|false}}, "
                            f"got {value!r}")
        steps.append(Step(float(at), Op(f, value)))
    return sorted(steps, key=lambda s: s.at)


def _sync_value(scenario: Scenario, value: Any, step: int) -> dict[str, Any]:
    """A sync of the named workload queue, by default the first."""
    queues = scenario.workload.queues
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise PlanError(f"step {step}: sync-queue takes {{queue = NAME}}, got {value!r}")
    queue = value.get("queue", queues[0])
    if queue not in queues:
        raise PlanError(f"step {step}: sync-queue's queue must be one of the workload's "
                        f"queues {list(queues)}, got {queue!r}")
    return {**value, "queue": queue}


def _policy_value(scenario: Scenario, value: Any, step: int) -> dict[str, Any]:
    """A new definition of the run's own policy, on the workload's queues unless the
    step names another policy or pattern; the heal restores the run's policy."""
    if not isinstance(value, dict) or not isinstance(value.get("definition"), dict):
        raise PlanError(f"step {step}: set-policy takes {{definition = {{...}}}} and "
                        f"optionally name, pattern, priority and queue, got {value!r}")
    if "queue" in value and value["queue"] not in scenario.workload.queues:
        raise PlanError(f"step {step}: set-policy's queue (whose master and mirrors "
                        f"ha-params may name) must be one of the workload's queues "
                        f"{list(scenario.workload.queues)}, got {value['queue']!r}")
    return {"name": POLICY_NAME, "pattern": queue_pattern(scenario), "priority": 0,
            "apply-to": "queues", **value}


def _schedule_config(scenario: Scenario) -> ScheduleConfig:
    options = scenario.nemesis.options
    kwargs: dict[str, Any] = {"duration": scenario.phases.faults}
    for key in ("faults", "partition_modes", "fault_seconds", "quiet_seconds"):
        if key in options:
            kwargs[key] = tuple(options[key])
    if "fault_seconds" not in options:
        kwargs["fault_seconds"] = (scenario.nemesis.hold, scenario.nemesis.hold * 2)
    if "quiet_seconds" not in options:
        kwargs["quiet_seconds"] = (scenario.nemesis.quiet, scenario.nemesis.quiet * 2)
    try:
        return ScheduleConfig(**kwargs)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"combined: {exc}") from None


def every_link(scenario: Scenario) -> tuple[list[str], list[str]]:
    """The node links and client links a run of ``scenario`` makes (every directed
    node pair, every client to every node) before its nemesis plans."""
    nodes = scenario.node_names
    node_links = [node_link_name(a, b) for a, b in permutations(nodes, 2)]
    clients = [c for ids in scenario.workload.client_ids().values() for c in ids]
    return node_links, [client_link_name(c, n) for c in clients for n in nodes]


def check_plan(scenario: Scenario) -> list[Step]:
    """Plan with every link the run would make, to find errors before a cluster starts."""
    try:
        return plan_steps(scenario, 0, *every_link(scenario))
    except (ValueError, TypeError) as exc:
        if isinstance(exc, PlanError):
            raise
        raise PlanError(str(exc)) from None
