"""How a run ends: its history checked into ``results.json`` and the outcome the command
returns; when the harness failed, the verdict is no better than unknown and the record
says why."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.checker import check_command
from harness.run.store import write_json
from harness.scenarios import Scenario

EXIT_HARNESS_FAILURE = 255


class HarnessError(RuntimeError):
    """The harness could not do its part (exit 255); the run's record says how far it got."""


@dataclass
class RunOutcome:
    run_dir: Path
    exit_code: int
    results: dict[str, Any] | None
    error: str | None = None
    interrupted: bool = False  # by SIGINT or SIGTERM: whoever runs more should stop


def check_run(run_dir: Path, scenario: Scenario, seed: int, error: str | None) -> RunOutcome:
    """Check the run's history; ``error``: why the harness failed, if it did."""
    code = check_command(run_dir, out=io.StringIO(), err=io.StringIO())
    results_path = run_dir / "results.json"
    results: dict[str, Any] | None = None
    if results_path.exists():
        results = json.loads(results_path.read_text(encoding="utf-8"))
    if error is None:
        return RunOutcome(run_dir, code, results)
    # The harness failed: the verdict can be no better than unknown.
    doc = results or {"scenario": scenario.name, "seed": seed,
                      "runtime": scenario.runtime, "target": scenario.target}
    if doc.get("valid") is True:
        doc["valid"] = "unknown"
    doc["harness_error"] = error
    write_json(results_path, doc)
    return RunOutcome(run_dir, EXIT_HARNESS_FAILURE, doc, error)
