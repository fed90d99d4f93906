"""Scenario files (TOML) and their precise errors: the file, the key, what was expected.

A file names its fields as the dataclasses do; ``base = "<built-in>"`` starts from a
built-in scenario and changes only what the file says::

    name = "kill-often"
    base = "confirms-survive-kill"
    nodes = 3
    [workload]
    rate = 200
    [nemesis]
    hold = 2.0
    [phases]
    faults = 30
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from cluster.core.policy import PolicyError, validate_definition
from harness.scenarios.model import PACKAGES, NemesisSpec, Scenario
from harness.scenarios.nemesis import PlanError, check_plan

_MISSING = object()
# Numbers that must be above zero; every other number must not be negative.
_POSITIVE = {"nodes", "tick", "workload.rate", "workload.window", "workload.prefetch",
             "workload.get_rate", "workload.tx_batch", "workload.confirm_timeout",
             "workload.heartbeat", "workload.purge_interval", "workload.rule_interval",
             "phases.drain_timeout", "nemesis.hold"}
_OPTIONS = {"none": (), "kill": (), "stop": (), "pause": (), "power-loss": (), "restart": (),
            "rolling-restart": (), "partition": ("kind", "mode", "from", "to"),
            "degrade": ("toxic", "links", "stream", "attributes", "toxicity"),
            "policy": ("definition", "pattern"), "sequence": ("steps",),
            "combined": ("faults", "fault_seconds", "quiet_seconds", "partition_modes")}
_NEMESIS_FIELDS = ("package", "targets", "hold", "quiet")


class ScenarioError(ValueError):
    """A scenario the user wrote wrong (exit 254): which file, which key, what was
    expected instead."""

    def __init__(self, source: str, key: str | None, expected: str,
                 got: object = _MISSING) -> None:
        where = f"{source}: key '{key}'" if key else source
        text = f"{where}: expected {expected}"
        if got is not _MISSING:
            text += f"; got {got!r}"
        super().__init__(text)
        self.source = source
        self.key = key
        self.expected = expected


def load_scenario(path: str | Path, builtins: Mapping[str, Scenario]) -> Scenario:
    source = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(source, None, "a readable TOML file", str(exc)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(source, None, "valid TOML", str(exc)) from None
    except UnicodeDecodeError:
        raise ScenarioError(source, None, "UTF-8 text") from None
    return scenario_from_dict(data, source, builtins, default_name=Path(path).stem)


def scenario_from_dict(data: Mapping[str, Any], source: str,
                       builtins: Mapping[str, Scenario], default_name: str) -> Scenario:
    data = dict(data)
    base_name = data.pop("base", _MISSING)
    if base_name is _MISSING:
        base = Scenario(name=default_name, description=f"scenario file {source}")
    elif isinstance(base_name, str) and base_name in builtins:
        base = dataclasses.replace(builtins[base_name], name=default_name,
                                   description=f"{base_name}, as changed by {source}")
    else:
        raise ScenarioError(source, "base", "the name of a built-in scenario ("
                            + ", ".join(sorted(builtins)) + ")", base_name)
    nested = {"workload": base.workload, "phases": base.phases}
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if key in nested:
            changes[key] = _update(nested[key], _table(value, key, source), key, source)
        elif key == "nemesis":
            changes[key] = _nemesis(base.nemesis, _table(value, key, source), source)
        elif key == "policy":
            changes[key] = _policy(value, source)
        else:
            changes.update(_fields(Scenario, {key: value}, "", source, skip=("workload",
                                   "phases", "nemesis", "policy")))
    scenario = dataclasses.replace(base, **changes)
    _check_whole(scenario, source)
    return scenario


def _table(value: Any, key: str, source: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(source, key, "a table", value)
    return value


def _update(current: Any, table: Mapping[str, Any], prefix: str, source: str) -> Any:
    return dataclasses.replace(current, **_fields(type(current), table, prefix + ".", source))


def _fields(cls: type, table: Mapping[str, Any], prefix: str, source: str,
            skip: tuple[str, ...] = ()) -> dict[str, Any]:
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.name not in skip]
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in names:
            raise ScenarioError(source, prefix + key, "one of " + ", ".join(names)
                                + " (an unknown key)")
        out[key] = _convert(value, hints[key], prefix + key, source)
    return out


def _convert(value: Any, tp: Any, key: str, source: str) -> Any:
    origin = get_origin(tp)
    if origin in (types.UnionType, Union):
        for option in get_args(tp):
            try:
                return _convert(value, option, key, source)
            except ScenarioError:
                continue
        raise ScenarioError(source, key, " or ".join(_describe(o) for o in get_args(tp)), value)
    if tp is type(None):
        raise ScenarioError(source, key, "nothing (leave the key out)", value)
    if origin is Literal:
        if value not in get_args(tp):
            raise ScenarioError(source, key, _describe(tp), value)
        return value
    if tp is bool or tp is str:
        if not isinstance(value, tp):
            raise ScenarioError(source, key, _describe(tp), value)
        return value
    if tp in (int, float):
        if isinstance(value, bool) or not isinstance(value, (int, float) if tp is float else int):
            raise ScenarioError(source, key, _describe(tp), value)
        positive = key in _POSITIVE
        if value < 0 or (positive and value == 0):
            raise ScenarioError(source, key, "a number above zero" if positive
                                else "a number not below zero", value)
        return tp(value)
    if origin is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ScenarioError(source, key, _describe(tp), value)
        return tuple(value)
    raise AssertionError(f"no conversion for {tp!r}")  # a field type this loader lacks


def _describe(tp: Any) -> str:
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(tp))
    names = {bool: "true or false", str: "a string", int: "a whole number",
             float: "a number", type(None): "nothing"}
    if get_origin(tp) is tuple:
        return "a list of strings"
    return names.get(tp, str(tp))


def _policy(value: Any, source: str) -> dict[str, Any]:
    table = _table(value, "policy", source)
    if not table:
        return {}
    try:
        return validate_definition(table)
    except PolicyError as exc:
        raise ScenarioError(source, "policy", f"a policy definition the broker takes ({exc})",
                            table) from None


def _nemesis(current: NemesisSpec, table: Mapping[str, Any], source: str) -> NemesisSpec:
    package = table.get("package", current.package)
    if package not in PACKAGES:
        raise ScenarioError(source, "nemesis.package", "one of " + ", ".join(PACKAGES), package)
    fields = {k: v for k, v in table.items() if k in _NEMESIS_FIELDS}
    options = dict(current.options) if package == current.package else {}
    for key, value in table.items():
        if key in _NEMESIS_FIELDS:
            continue
        if key == "options":
            options.update(_table(value, "nemesis.options", source))
            continue
        raise ScenarioError(source, f"nemesis.{key}", "one of " + ", ".join(_NEMESIS_FIELDS)
                            + ", options")
    for key in options:
        if key not in _OPTIONS[package]:
            allowed = ", ".join(_OPTIONS[package]) or "none"
            raise ScenarioError(source, f"nemesis.options.{key}",
                                f"an option of package {package!r} ({allowed})")
    spec = _update(current, fields, "nemesis", source)
    return dataclasses.replace(spec, options=options)


def _check_whole(scenario: Scenario, source: str) -> None:
    """What no single key shows: the parts fit together, and the nemesis can be planned."""
    w = scenario.workload
    if not w.queues:
        raise ScenarioError(source, "workload.queues", "at least one queue name", [])
    if w.publishers + w.tx_publishers + w.fanout_publishers == 0:
        raise ScenarioError(source, "workload.publishers",
                            "at least one publisher, tx_publisher or fanout_publisher", 0)
    strangers = [q for q in w.backlog_queues if q not in w.queues]
    if strangers:
        raise ScenarioError(source, "workload.backlog_queues",
                            f"queues listed in workload.queues {list(w.queues)}", strangers)
    if w.purgers and not w.backlog_queues:
        raise ScenarioError(source, "workload.backlog_queues", "at least one queue for "
                            "the purgers (a queue they purge has no consumers)", [])
    try:
        w.client_queues()
    except ValueError:
        raise ScenarioError(source, "workload.backlog_queues", "at least one queue of "
                            "workload.queues left for consumers, requeuers and getters",
                            list(w.backlog_queues)) from None
    if w.cancel_on_failover and w.cancel_consumers:
        raise ScenarioError(source, "workload.cancel_on_failover", "false when "
                            "cancel_consumers asks for x-cancel-on-ha-failover on its own "
                            "consumers (the plain ones then never do)", True)
    try:
        check_plan(scenario)
    except PlanError as exc:
        raise ScenarioError(source, "nemesis", str(exc)) from None

