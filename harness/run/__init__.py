"""``mirrorchaos run``: one scenario against a cluster, stored and checked."""

from harness.run.command import add_run, add_scenarios
from harness.run.orchestrate import (
    HarnessError,
    RunOptions,
    RunOutcome,
    RunStatus,
    ScenarioRun,
    effective_scenario,
    queue_members,
    run_scenario,
)

__all__ = [
    "HarnessError",
    "RunOptions",
    "RunOutcome",
    "RunStatus",
    "ScenarioRun",
    "add_run",
    "add_scenarios",
    "effective_scenario",
    "queue_members",
    "run_scenario",
]
