"""One candidate's replay: its scenario file, then ``mirrorchaos run`` on it with the
original seed (the command line's own path), in a store of its own: as subprocesses
here (`run_locally`), or however an `Execute` runs them (as Spark tasks:
`reports.soak.replays`).

A candidate fails the same way when the run is invalid with a violation of the kind
being kept; an unknown verdict, a harness failure or a crash counts as not failing.
Several candidates replay side by side, each with its own cluster and ports.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import tomli_w

from harness.run.orphan import interrupt_when_orphaned
from harness.run.store import find_run_dir
from harness.scenarios import Scenario
from harness.shrink.schedule import Schedule, scenario_doc, scenario_of


@dataclass(frozen=True)
class Replay:
    number: int
    scenario_file: Path
    log: Path
    exit_code: int | None
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


@dataclass(frozen=True)
class Candidate:
    """One replay to run: ``mirrorchaos run SCENARIO_FILE --seed S --store STORE``,
    its output in ``STORE/run.log``."""

    number: int
    scenario_file: Path
    store: Path
    timeout: float  # seconds a replay may take, drain and check included

    @property
    def log(self) -> Path:
        return self.store / LOG_FILE


@dataclass(frozen=True)
class Executed:
    exit_code: int | None  # None: it never finished
    run_dir: Path | None  # None: it stored no run
    seconds: float


# Runs candidates (side by side where it can), each stored under its ``store``.
Execute = Callable[[Sequence[Candidate]], list[Executed]]


class ClosingExecute(Protocol):
    """An `Execute` that holds something to let go of at the end (a Spark session)."""

    def __call__(self, candidates: Sequence[Candidate]) -> list[Executed]: ...

    def close(self) -> None: ...


# (Spark master, seed, runtime) -> an Execute on that master; the command line's own
# wiring gives it, so that this package needs no Spark.
OnSpark = Callable[[str, int, str], ClosingExecute]
LOG_FILE = "run.log"
# a replay's start-up, drain (up to its drain timeout) and check beyond its phases
_TIMEOUT_MARGIN = 240.0
_INTERRUPT_GRACE = 30.0  # seconds an interrupted replay gets to wind down


def run_locally(seed: int, runtime: str, jobs: int) -> Execute:
    """Candidates as subprocesses of this machine, ``jobs`` at a time."""

    def one(candidate: Candidate) -> Executed:
        started = time.monotonic()
        candidate.store.mkdir(parents=True, exist_ok=True)
        with candidate.log.open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "reports.cli", "run", str(candidate.scenario_file),
                 "--seed", str(seed), "--runtime", runtime, "--store", str(candidate.store),
                 "--no-live"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                preexec_fn=interrupt_when_orphaned)
            try:
                code: int | None = process.wait(timeout=candidate.timeout)
            except subprocess.TimeoutExpired:  # interrupted: it stores what it has
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=_INTERRUPT_GRACE)
                except subprocess.TimeoutExpired:  # what it left, the next run reaps
                    process.kill()
                    process.wait()
                code = None
        return Executed(code, find_run_dir(candidate.store, seed),
                        round(time.monotonic() - started, 1))

    def execute(candidates: Sequence[Candidate]) -> list[Executed]:
        with ThreadPoolExecutor(max_workers=max(1, min(jobs, len(candidates)))) as pool:
            return list(pool.map(one, candidates))

    return execute


class Replayer:
    """Replays candidates of one scenario under ``directory`` (``NNN.toml`` and
    ``runs/NNN/``), numbering them in the order asked; ``execute`` runs them."""

    def __init__(self, scenario: Scenario, seed: int, runtime: str, directory: Path,
                 execute: Execute) -> None:
        self.scenario = scenario
        self.seed = seed
        self.runtime = runtime
        self.directory = directory
        self.execute = execute
        self.replays: list[Replay] = []

    def run(self, schedules: Sequence[Schedule]) -> list[Replay]:
        candidates = []
        for i, schedule in enumerate(schedules):
            number = len(self.replays) + i + 1
            name = f"{number:03d}"
            phases = self.scenario.phases
            candidates.append(Candidate(
                number, write_scenario(self.directory / f"{name}.toml", self.scenario,
                                       schedule),
                self.directory / "runs" / name,
                phases.warmup + schedule.faults + phases.recovery + phases.drain_timeout
                + _TIMEOUT_MARGIN))
        done = []
        for candidate, run in zip(candidates, self.execute(candidates), strict=True):
            results = _results(run.run_dir)
            done.append(Replay(candidate.number, candidate.scenario_file, candidate.log,
                               run.exit_code, run.run_dir,
                               None if results is None else results.get("valid"),
                               violation_kinds(results or {}), run.seconds))
        self.replays.extend(done)
        return done


def _results(run_dir: Path | None) -> dict[str, Any] | None:
    if run_dir is None:
        return None
    try:
        loaded = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, dict) else None
