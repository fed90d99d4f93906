"""``mirrorchaos power``: the campaign run against the correct broker and against every
planted bug, one seed at a time, into a detection matrix.

Every target runs the same scenarios with the same root seeds, so each bug meets the
very fault schedule the correct broker passed. A bug's runs on a seed stop at its first
catch unless ``full`` is asked for: the time to detection is the wall time of that
target's runs on the seed up to and including the catching one. With ``jobs`` above 1,
that many (target, seed) pairs run side by side, each in a process of its own: a run
drives its cluster from its process's main thread (signal handlers, its event loop).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.power.matrix import CORRECT, Cell, Matrix, kinds
from harness.run.config import RunOptions
from harness.run.orchestrate import run_scenario
from harness.run.outcome import RunOutcome
from harness.scenarios import Scenario

# The CI campaign: what `./dev -s chaos` runs on the correct broker and `./dev -s power`
# against every planted bug.
CI_SCENARIOS = ("gauntlet", "gauntlet-autoheal", "gauntlet-promote", "gauntlet-ops",
                "gauntlet-replicas", "gauntlet-content", "gauntlet-late-peer",
                "gauntlet-no-ack", "gauntlet-forget")
CI_SEEDS = (7, 11, 13)


@dataclass(frozen=True)
class PowerPlan:
    scenarios: Sequence[Scenario]
    seeds: Sequence[int]
    bugs: Mapping[str, tuple[str, ...]]  # bug -> the violation kinds that catch it
    store: Path
    runtime: str | None = None
    time_limit: float | None = None
    correct: bool = True  # run the correct broker too
    full: bool = False  # run every scenario even after a bug was caught


Runner = Callable[[Scenario, RunOptions], RunOutcome]
Progress = Callable[[Matrix, Cell], None]  # told of each run as it is added


def broken(scenario: Scenario, bug: str) -> Scenario:
    """The scenario on nodes started with ``--break bug``."""
    return dataclasses.replace(scenario, node_args=(*scenario.node_args, "--break", bug))


def run_power(plan: PowerPlan, on_cell: Progress = lambda _matrix, _cell: None,
              runner: Runner = run_scenario, jobs: int = 1) -> Matrix:
    matrix = Matrix(tuple(plan.seeds), tuple(s.name for s in plan.scenarios), dict(plan.bugs),
                    correct=plan.correct)
    pairs = [(target, seed) for seed in plan.seeds for target in matrix.targets]

    def add(cell: Cell) -> None:
        matrix.cells.append(cell)
        on_cell(matrix, cell)

    if jobs == 1:
        for target, seed in pairs:
            for cell in _target_runs(plan, target, seed, runner):
                add(cell)
        return matrix
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork")) as pool:
        running = [pool.submit(_pair_cells, plan, target, seed, runner)
                   for target, seed in pairs]
        try:
            for done in as_completed(running):
                cells, interrupted = done.result()
                for cell in cells:
                    add(cell)
                if interrupted:
                    raise KeyboardInterrupt
        except KeyboardInterrupt:
            # The campaign stops with the run: no pair starts, runs under way finish
            # (a Ctrl-C interrupts them too), and no worker outlives the campaign.
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return matrix


# In a worker process: one of its runs was interrupted, so the pairs handed to it
# already (the pool queues ahead) are not started.
_worker_interrupted = False


def _pair_cells(plan: PowerPlan, target: str, seed: int,
                runner: Runner) -> tuple[list[Cell], bool]:
    """One pair's runs in a worker process: its cells, and whether a run was
    interrupted (its cell is kept)."""
    global _worker_interrupted
    cells: list[Cell] = []
    if _worker_interrupted:
        return cells, True
    try:
        for cell in _target_runs(plan, target, seed, runner):
            cells.append(cell)
    except KeyboardInterrupt:
        _worker_interrupted = True
        return cells, True
    return cells, False


def _target_runs(plan: PowerPlan, target: str, seed: int, runner: Runner) -> Iterator[Cell]:
    """The target's runs on the seed, each as soon as it is checked."""
    expected = plan.bugs.get(target, ())
    options = RunOptions(runtime=plan.runtime, seed=seed, time_limit=plan.time_limit,
                         store=plan.store / "runs" / target)
    spent = 0.0
    for scenario in plan.scenarios:
        started = time.monotonic()
        outcome = runner(scenario if target == CORRECT else broken(scenario, target), options)
        seconds = round(time.monotonic() - started, 1)
        spent += seconds
        cell = _judged(Cell(target, seed, scenario.name, "unknown", outcome.exit_code, (), (),
                            expected, seconds, None, str(outcome.run_dir), outcome.error),
                       outcome.results or {}, spent)
        yield cell
        if outcome.interrupted:
            raise KeyboardInterrupt  # the campaign stops with the run (its cell is kept)
        if cell.caught and not plan.full:
            break


def _judged(cell: Cell, results: Mapping[str, Any], spent: float) -> Cell:
    """``cell`` with the verdict and kinds of ``results``; ``spent``: the wall time of the
    target's runs on the seed up to this one, its time to detection if it caught the bug."""
    valid = results.get("valid", "unknown")
    verdict = "valid" if valid is True else "invalid" if valid is False else "unknown"
    cell = dataclasses.replace(cell, verdict=verdict, detected_after=None,
                               violations=kinds(results.get("violations") or ()),
                               caveats=kinds(results.get("caveats") or ()))
    return dataclasses.replace(cell, detected_after=round(spent, 1)) if cell.caught else cell


def recheck(matrix: Matrix, judge: Callable[[Path], Mapping[str, Any]]) -> Matrix:
    """The campaign's stored runs judged again by ``judge`` (the results of one run
    directory), for a checker that has learnt more since they ran. Runs a campaign
    skipped after a catch stay unrun."""
    again = Matrix(matrix.seeds, matrix.scenarios, matrix.expected, correct=matrix.correct)
    spent: dict[tuple[str, int], float] = {}
    for cell in matrix.cells:
        key = (cell.target, cell.seed)
        spent[key] = spent.get(key, 0.0) + cell.seconds
        again.cells.append(_judged(cell, judge(Path(cell.run_dir)), spent[key]))
    return again
