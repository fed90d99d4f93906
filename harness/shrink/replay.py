"""One candidate's replay: its scenario file, then ``mirrorchaos run`` on it with the
original seed, as a subprocess (the command line's own path), in a store of its own.

A candidate fails the same way when the run is invalid with a violation of the kind
being kept; an unknown verdict, a harness failure or a crash counts as not failing.
Several candidates replay side by side, each with its own cluster and ports.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from harness.run.orphan import interrupt_when_orphaned
from harness.scenarios import Scenario
from harness.shrink.schedule import Schedule, scenario_doc, scenario_of


@dataclass(frozen=True)
class Replay:
    number: int
    scenario_file: Path
    exit_code: int
    run_dir: Path | None
    valid: Any  # the run's verdict: True, False or "unknown" (None: no results)
    kinds: tuple[str, ...]
    seconds: float

    def fails_with(self, kind: str) -> bool:
        return self.valid is False and kind in self.kinds


def violation_kinds(results: dict[str, Any]) -> tuple[str, ...]:
    """The kinds of a run's violations, most messages first."""
    counts: dict[str, int] = {}
    for violation in results.get("violations", []):
        kind = str(violation.get("kind"))
        counts[kind] = counts.get(kind, 0) + int(violation.get("count", 1) or 1)
    return tuple(sorted(counts, key=lambda k: (-counts[k], k)))


def write_scenario(path: Path, scenario: Scenario, schedule: Schedule) -> Path:
    """The candidate as a scenario file, checked by the loader `run` uses."""
    doc = scenario_doc(scenario, schedule)
    scenario_of(doc, str(path))  # refused here rather than by every replay
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tomli_w.dumps(doc), encoding="utf-8")
    return path


def replay_command(scenario_file: Path, seed: int, runtime: str) -> str:
    return shlex.join(["mirrorchaos", "run", str(scenario_file), "--seed", str(seed),
                       "--runtime", runtime])


class Replayer:
    """Replays candidates of one scenario under ``directory`` (``NNN.toml`` and
    ``runs/NNN/``), numbering them in the order asked."""

    def __init__(self, scenario: Scenario, seed: int, runtime: str, directory: Path,
                 jobs: int = 1) -> None:
        self.scenario = scenario
        self.seed = seed
        self.runtime = runtime
        self.directory = directory
        self.jobs = jobs
        self.replays: list[Replay] = []

    def run(self, schedules: Sequence[Schedule]) -> list[Replay]:
        numbered = [(len(self.replays) + i + 1, s) for i, s in enumerate(schedules)]
        with ThreadPoolExecutor(max_workers=max(1, min(self.jobs, len(numbered)))) as pool:
            done = list(pool.map(lambda item: self._one(*item), numbered))
        self.replays.extend(done)
        return done

    def _one(self, number: int, schedule: Schedule) -> Replay:
        name = f"{number:03d}"
        scenario_file = write_scenario(self.directory / f"{name}.toml", self.scenario,
                                       schedule)
        store = self.directory / "runs" / name
        started = time.monotonic()
        with (self.directory / f"{name}.log").open("wb") as log:
            code = subprocess.call(
                [sys.executable, "-m", "harness.cli", "run", str(scenario_file), "--seed",
                 str(self.seed), "--runtime", self.runtime, "--store", str(store),
                 "--no-live"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=interrupt_when_orphaned)
        run_dir = next((p for p in sorted(store.glob("*/*-seed*")) if p.is_dir()
                        and not p.parent.is_symlink()), None)
        results = _results(run_dir)
        return Replay(number, scenario_file, code, run_dir,
                      None if results is None else results.get("valid"),
                      violation_kinds(results or {}), round(time.monotonic() - started, 1))


def _results(run_dir: Path | None) -> dict[str, Any] | None:
    if run_dir is None:
        return None
    try:
        loaded = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None
