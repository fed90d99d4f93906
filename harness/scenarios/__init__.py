"""Scenarios: named built-ins and TOML files, and a scenario's nemesis
package planned as a schedule."""

from __future__ import annotations

from pathlib import Path

from harness.scenarios.builtins import SCENARIOS
from harness.scenarios.loader import ScenarioError, load_scenario, scenario_from_dict
from harness.scenarios.model import NemesisSpec, Phases, Scenario
from harness.scenarios.nemesis import (
    POLICY_NAME,
    PlanError,
    decoy_policies,
    plan_steps,
    queue_pattern,
)

__all__ = [
    "POLICY_NAME",
    "SCENARIOS",
    "NemesisSpec",
    "Phases",
    "PlanError",
    "Scenario",
    "ScenarioError",
    "decoy_policies",
    "find_scenario",
    "load_scenario",
    "plan_steps",
    "queue_pattern",
    "scenario_from_dict",
]


def find_scenario(name_or_path: str) -> Scenario:
    """A built-in by name, or a TOML file by path."""
    if name_or_path in SCENARIOS:
        return SCENARIOS[name_or_path]
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        return load_scenario(path, SCENARIOS)
    raise ScenarioError(name_or_path, None, "a built-in scenario name ("
                        + ", ".join(SCENARIOS) + ") or a TOML file")
