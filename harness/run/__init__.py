"""``mirrorchaos run``: one scenario against a cluster, stored and checked."""

from harness.run.command import add_run, add_scenarios
from harness.run.config import RunOptions, effective_scenario, queue_members
from harness.run.orchestrate import ScenarioRun, run_scenario
from harness.run.outcome import HarnessError, RunOutcome
from harness.run.status import RunStatus

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
