"""A stored run's fault schedule as something to shrink, and back as a scenario.

Theory of operation. A run's schedule is planned from its scenario and seed alone
(`harness.scenarios.plan_steps`), and every op carries what was drawn for it (nodes,
grudges, links, attributes), so the planned steps, written out as a ``sequence``
nemesis with the same seed, replay the run. Any subset of those steps is a schedule the
harness can run: the final heal at the end of the fault phase ends whatever a dropped
step would have ended.

The steps fall into *windows*: a window opens with a fault and closes with the step
that ends it (a heal, a start or resume, or a fault that ends by itself, such as a
restart or a sync). Shrinking drops whole windows, then single steps, then shortens
windows (each one's later steps pulled towards its start), then moves the windows
together and ends the fault phase after the last one. Everything here is pure: the
replays are `harness.shrink.search`'s caller's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from faults.nemesis import HEAL, Step
from faults.nemesis.schedule import is_final
from harness.scenarios import SCENARIOS, Scenario, plan_steps, scenario_from_dict
from harness.scenarios.nemesis import SETTLED_STATE, every_link

# The ops that close a window: they end earlier faults, or their own fault is over
# when they return. (A cluster-state observation closes nothing: it sits inside the
# window it looks at.)
_CLOSING = frozenset({HEAL, "start", "resume", "restart", "rolling-restart", "sync-queue"})
# The ops that only end earlier faults (or observe): not faults of their own.
_ENDING_ONLY = frozenset({HEAL, "start", "resume", SETTLED_STATE})
# Seconds of fault phase after the last step of a compacted schedule, and between its
# windows: enough for the nemesis to act and the cluster to notice.
GAP = 1.0
# The end of a fault phase is where the final heal is: keep a step from sharing it.
_LAST_STEP_MARGIN = 0.5


@dataclass(frozen=True)
class Schedule:
    """The fault steps of a candidate (the final heal not among them) and the length
    of its fault phase."""

    steps: tuple[Step, ...]
    faults: float  # seconds of fault phase

    @property
    def key(self) -> str:
        """What tells candidates apart (op values are tables, which do not hash)."""
        return _compact([self.faults, [_step_doc(step) for step in self.steps]])

    @property
    def windows(self) -> list[tuple[Step, ...]]:
        return windows(self.steps)

    @property
    def fault_count(self) -> int:
        """Steps that start a fault (not those that only end one)."""
        return sum(1 for step in self.steps if step.op.f not in _ENDING_ONLY)

    def describe(self) -> list[str]:
        return [f"{step.at:7.2f}s  {step.op.f}" + ("" if step.op.value is None
                                                   else f" {_compact(step.op.value)}")
                for step in self.steps]


def windows(steps: Sequence[Step]) -> list[tuple[Step, ...]]:
    """``steps`` cut after each step that closes a window."""
    out: list[tuple[Step, ...]] = []
    current: list[Step] = []
    for step in steps:
        current.append(step)
        if step.op.f in _CLOSING:
            out.append(tuple(current))
            current = []
    if current:
        out.append(tuple(current))
    return out


def planned(scenario: Scenario, nemesis_seed: int) -> Schedule:
    """The schedule the run executed: planned as the run planned it, with the links a
    run of this scenario makes."""
    node_links, client_links = every_link(scenario)
    steps = plan_steps(scenario, nemesis_seed, node_links, client_links)
    return Schedule(tuple(s for s in steps if not is_final(s.op)), scenario.phases.faults)


# -- candidates ------------------------------------------------------------------------


def without_windows(schedule: Schedule) -> list[Schedule]:
    """Each window alone first (one may be all it takes), then the schedule with each
    window dropped in turn. Single-window schedules have none."""
    parts = schedule.windows
    if len(parts) < 2:
        return []
    alone = [_keep(schedule, [part]) for part in parts]
    dropped = [_keep(schedule, parts[:i] + parts[i + 1:]) for i in range(len(parts))]
    return alone + (dropped if len(parts) > 2 else [])


def without_steps(schedule: Schedule) -> list[Schedule]:
    """The schedule with each step dropped in turn; a last step too (the failure may
    need no fault at all)."""
    steps = schedule.steps
    return [dataclasses.replace(schedule, steps=steps[:i] + steps[i + 1:])
            for i in range(len(steps))]


def shortened(schedule: Schedule, factor: float = 0.5, minimum: float = GAP) -> list[Schedule]:
    """For each window that lasts longer than ``minimum``: its later steps pulled
    towards its first, so it lasts ``factor`` as long (at least ``minimum``)."""
    out = []
    parts = schedule.windows
    for i, part in enumerate(parts):
        length = part[-1].at - part[0].at
        if length <= minimum:
            continue
        scale = max(factor, minimum / length)
        start = part[0].at
        short = tuple(Step(start + (s.at - start) * scale, s.op) for s in part)
        out.append(_keep(schedule, [*parts[:i], short, *parts[i + 1:]]))
    return out


def compacted(schedule: Schedule, gap: float = GAP) -> Schedule | None:
    """The windows moved together (the first at ``gap``, each next one ``gap`` after
    the one before ends) and the fault phase ended ``gap`` after the last step (``gap``
    long with no step at all); None when that changes nothing."""
    if not schedule.steps:
        return None if schedule.faults == gap else Schedule((), gap)
    moved: list[Step] = []
    at = gap
    for part in schedule.windows:
        shift = at - part[0].at
        moved.extend(Step(round(s.at + shift, 3), s.op) for s in part)
        at = moved[-1].at + gap
    faults = max(at, moved[-1].at + _LAST_STEP_MARGIN)
    candidate = Schedule(tuple(moved), round(faults, 3))
    return None if candidate == schedule else candidate


def _keep(schedule: Schedule, parts: Sequence[Sequence[Step]]) -> Schedule:
    steps = sorted((s for part in parts for s in part), key=lambda s: s.at)
    return dataclasses.replace(schedule, steps=tuple(steps))


# -- a candidate as a scenario ---------------------------------------------------------


def scenario_doc(scenario: Scenario, schedule: Schedule) -> dict[str, Any]:
    """A scenario file's contents (every field that differs from a bare scenario's
    default) that runs ``scenario`` with ``schedule`` as a ``sequence`` nemesis."""
    doc = _differences(_plain(dataclasses.asdict(scenario)),
                       _plain(dataclasses.asdict(Scenario(scenario.name, ""))))
    doc.pop("seed", None)  # the replay command gives it
    doc["name"], doc["description"] = scenario.name, scenario.description
    doc["policy"] = _plain(dict(scenario.policy))  # an empty policy differs from the default
    # no step left: the failure needs no fault at all
    doc["nemesis"] = ({"package": "sequence",
                       "options": {"steps": [_step_doc(s) for s in schedule.steps]}}
                      if schedule.steps else {"package": "none"})
    doc["phases"] = {**doc.get("phases", {}), "faults": schedule.faults}
    return doc


def scenario_of(doc: Mapping[str, Any], source: str) -> Scenario:
    """The scenario a document from `scenario_doc` describes, as `mirrorchaos run`
    will load it (so a document it would refuse is refused here)."""
    return scenario_from_dict(doc, source, SCENARIOS, default_name=str(doc["name"]))


def stored_scenario(stored: Mapping[str, Any], source: str) -> Scenario:
    """A run's scenario as its config.json keeps it (every field, as the run had it)."""
    return scenario_of(_plain(dict(stored)), source)


def _step_doc(step: Step) -> dict[str, Any]:
    out: dict[str, Any] = {"at": round(step.at, 3), "f": step.op.f}
    if step.op.value is not None:
        out["value"] = _plain(step.op.value)
    return out


def _plain(value: Any) -> Any:
    """JSON's types only (tuples as lists), None dropped from tables (TOML has none)."""
    value = json.loads(json.dumps(value))
    return _drop_none(value)


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def _differences(doc: dict[str, Any], default: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        base = default.get(key)
        if isinstance(value, dict) and isinstance(base, dict) and key != "policy":
            nested = _differences(value, base)
            if nested:
                out[key] = nested
        elif value != base:
            out[key] = value
    return out


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
