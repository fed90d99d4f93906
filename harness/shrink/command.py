"""``mirrorchaos shrink DIR``: the smallest fault schedule that still fails a stored
run's way, as a scenario file and its replay command.

The run's scenario and seed come from its ``config.json``, the kind of failure to keep
from its ``results.json`` (its most numerous violation kind, or ``--kind``). The
recorded schedule is replayed first, as a ``sequence`` nemesis: when that does not fail
the same way there is nothing to shrink (exit 2). Everything goes under
``DIR/shrink/<timestamp>/``: each candidate's scenario file (``NNN.toml``), its run and
log (``runs/NNN/``), ``shrunk.toml``
(the smallest failing schedule) and ``shrink.json`` (every replay and its verdict).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from faults.seeds import derive
from harness.arguments import positive_int
from harness.checker import EXIT_BAD_INPUT
from harness.scenarios import Scenario, ScenarioError
from harness.shrink.replay import (
    ClosingExecute,
    Execute,
    OnSpark,
    Replayer,
    replay_command,
    run_locally,
    violation_kinds,
    write_scenario,
)
from harness.shrink.schedule import Schedule, planned, stored_scenario
from harness.shrink.search import shrink

EXIT_SHRUNK = 0
EXIT_NOT_REPRODUCED = 2
EXIT_HARNESS_FAILURE = 255
SHRUNK_FILE = "shrunk.toml"
RECORD_FILE = "shrink.json"


class BadRun(ValueError):
    """The directory is not a failing stored run (the user's input)."""


def add_shrink(sub: argparse._SubParsersAction[argparse.ArgumentParser],
               on_spark: OnSpark) -> None:
    p = sub.add_parser(
        "shrink", help="the smallest fault schedule that still fails a run's way",
        description="Replay a failing stored run with parts of its fault schedule "
        "(whole windows dropped, then single steps, then windows shortened and moved "
        "together) and keep the smallest schedule that still gives the same violation "
        "kind. Each candidate is a full seeded replay. Writes DIR/shrink/<timestamp>/"
        f"{SHRUNK_FILE} (a scenario `mirrorchaos run` takes) and {RECORD_FILE}. Exit 0 "
        "shrunk (or already minimal), 2 when the recorded schedule does not fail again, "
        "254 bad input.")
    p.add_argument("run_dir", type=Path, metavar="DIR", help="a stored run that failed")
    p.add_argument("--kind", default=None, metavar="KIND",
                   help="the violation kind to keep (default: the run's most numerous)")
    p.add_argument("--max-replays", type=positive_int, default=30, metavar="N",
                   help="replays in all, the first one included (default %(default)s)")
    p.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                   help="candidates replayed side by side (default %(default)s)")
    p.add_argument("--spark-master", default=None, metavar="URL",
                   help="replay the candidates as Spark tasks on this master (local[N] or "
                   "a cluster's URL; needs the soak extra), --jobs at a time")
    p.add_argument("--runtime", choices=("process", "docker"), default=None,
                   help="where replays run (default: the run's)")
    p.set_defaults(handler=shrink_command, on_spark=on_spark)


def load_run(run_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """A stored run's config.json and results.json."""
    docs = []
    for name in ("config.json", "results.json"):
        try:
            doc = json.loads((run_dir / name).read_text(encoding="utf-8"))
        except OSError as exc:
            raise BadRun(f"{run_dir}: no readable {name} ({exc.strerror})") from None
        except ValueError as exc:
            raise BadRun(f"{run_dir / name}: not JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise BadRun(f"{run_dir / name}: expected a JSON object")
        docs.append(doc)
    return docs[0], docs[1]


@dataclass(frozen=True)
class FailingRun:
    """What a shrink starts from: the stored run's scenario, seed and recorded
    schedule, and the violation kind to keep."""

    directory: Path
    scenario: Scenario
    seed: int
    runtime: str
    kind: str
    kinds: tuple[str, ...]  # every kind the run had
    start: Schedule


def failing_run(run_dir: Path, kind: str | None, runtime: str | None) -> FailingRun:
    config, results = load_run(run_dir)
    kinds = violation_kinds(results)
    if results.get("valid") is not False or not kinds:
        raise BadRun(f"{run_dir}: the run did not fail (verdict "
                     f"{results.get('valid')!r}): nothing to shrink")
    kind = kind or kinds[0]
    if kind not in kinds:
        raise BadRun(f"--kind {kind}: the run has no such violation (it has "
                     f"{', '.join(kinds)})")
    seed = int(config["seed"])
    source = str(run_dir / "config.json")
    if not isinstance(config.get("scenario"), dict):
        raise BadRun(f"{source}: no scenario object")
    scenario = stored_scenario(config["scenario"], source)
    return FailingRun(run_dir, scenario, seed,
                      runtime or str(config.get("runtime", scenario.runtime)), kind, kinds,
                      planned(scenario, derive(seed, "nemesis")))


def shrink_command(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False)
    try:
        run = failing_run(args.run_dir, args.kind, args.runtime)
    except (BadRun, ScenarioError, KeyError, TypeError, ValueError) as exc:
        err.print(f"mirrorchaos shrink: {exc}", markup=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    spark: ClosingExecute | None = None
    if args.spark_master is not None:
        try:
            spark = args.on_spark(args.spark_master, run.seed, run.runtime)
        except RuntimeError as exc:  # no PySpark, no JVM, a bad master URL
            err.print(f"mirrorchaos shrink: {exc}", markup=False, soft_wrap=True)
            return EXIT_HARNESS_FAILURE
    try:
        return _shrink(run, spark or run_locally(run.seed, run.runtime, args.jobs),
                       args.max_replays, args.jobs)
    finally:
        if spark is not None:
            spark.close()


def _shrink(run: FailingRun, execute: Execute, budget: int, batch: int) -> int:
    console, err = Console(), Console(stderr=True, highlight=False)
    kind, start, seed = run.kind, run.start, run.seed
    directory = run.directory / "shrink" / time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    replayer = Replayer(run.scenario, seed, run.runtime, directory, execute)
    err.print(f"mirrorchaos shrink: {run.scenario.name} seed {seed}, keeping {kind} "
              f"(the run had {', '.join(run.kinds)}); {_size(start)}; work in {directory}",
              markup=False, soft_wrap=True)

    def judge(schedules: Sequence[Schedule]) -> list[bool]:
        replays = replayer.run(schedules)
        for schedule, replay in zip(schedules, replays, strict=True):
            verdict = {True: "valid", False: "INVALID"}.get(replay.valid, "unknown")
            err.print(f"  replay {replay.number:3d}: {_count(schedule.fault_count, 'fault')}, "
                      f"{schedule.faults:g} s: {verdict} {','.join(replay.kinds)} "
                      f"({replay.seconds:.0f} s)"
                      + ("  still fails" if replay.fails_with(kind) else ""), markup=False,
                      soft_wrap=True)
        return [replay.fails_with(kind) for replay in replays]

    if not judge([start])[0]:
        _record(directory, kind, start, None, replayer)
        err.print(f"mirrorchaos shrink: the recorded schedule replayed did not fail with "
                  f"{kind}; see {replayer.replays[0].log}",
                  markup=False, soft_wrap=True)
        return EXIT_NOT_REPRODUCED
    outcome = shrink(start, judge, budget - 1, batch=batch)
    best = outcome.best
    shrunk = _record(directory, kind, start, best, replayer, exhausted=outcome.exhausted)
    console.print(f"[bold]shrunk[/bold]: {_size(start)} -> {_size(best)}, still {kind}; "
                  f"{len(replayer.replays)} replays"
                  + (" (budget spent: it may shrink further)" if outcome.exhausted else ""))
    for line in best.describe():
        console.print(f"  {line}", markup=False, soft_wrap=True)
    console.print(f"scenario: {shrunk}", markup=False, soft_wrap=True)
    console.print(f"replay:   {replay_command(shrunk, seed, run.runtime)}", markup=False,
                  soft_wrap=True)
    return EXIT_SHRUNK


def _size(schedule: Schedule) -> str:
    return (f"{_count(schedule.fault_count, 'fault')} in {_count(len(schedule.steps), 'step')}"
            f" over {schedule.faults:g} s")


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _record(directory: Path, kind: str, start: Schedule, best: Schedule | None,
            replayer: Replayer, exhausted: bool = False) -> Path:
    """``shrink.json`` (and ``shrunk.toml`` when a schedule failed); the scenario file."""
    shrunk = directory / SHRUNK_FILE
    if best is not None:
        write_scenario(shrunk, replayer.scenario, best)

    def summary(schedule: Schedule) -> dict[str, Any]:
        return {"faults": schedule.fault_count, "steps": schedule.describe(),
                "fault_phase_s": schedule.faults}

    doc = {"kind": kind, "seed": replayer.seed, "runtime": replayer.runtime,
           "original": summary(start), "shrunk": None if best is None else summary(best),
           "scenario_file": None if best is None else str(shrunk),
           "replay": None if best is None else replay_command(shrunk, replayer.seed,
                                                              replayer.runtime),
           "budget_spent": exhausted,
           "replays": [{"number": r.number, "scenario_file": str(r.scenario_file),
                        "exit_code": r.exit_code, "valid": r.valid, "kinds": list(r.kinds),
                        "still_fails": r.fails_with(kind), "seconds": r.seconds,
                        "run_dir": None if r.run_dir is None else str(r.run_dir),
                        "log": str(r.log)}
                       for r in replayer.replays]}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / RECORD_FILE).write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return shrunk
