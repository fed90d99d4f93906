"""``mirrorchaos compare``: run scenarios once per target (broker) with the same seed, or
read such runs back from the store, and show them side by side; compare.json and
compare.md go to ``STORE/compare/<timestamp>/`` (``STORE/compare/latest`` is the newest).
Exit 0 when every run has a verdict, 2 when one has none, 254 bad input, 255 when the
harness failed in a run."""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.arguments import integer, positive_float
from harness.checker import EXIT_BAD_INPUT
from harness.run.config import RunOptions
from harness.run.orchestrate import run_scenario
from harness.run.outcome import HarnessError
from harness.run.runtimes import TARGET_RUNTIMES
from harness.run.store import new_campaign_dir, write_json
from harness.scenarios import Scenario, ScenarioError, find_scenario
from reports.compare.comparison import (
    DEFAULT_TARGET,
    TARGETS,
    Comparison,
    DuplicateRun,
    RunRecord,
    compare,
)
from reports.compare.render import markdown, render_comparison
from reports.describe import verdict_word
from reports.load import RESULTS_FILE

COMPARE_FILE = "compare.json"
MARKDOWN_FILE = "compare.md"
# what a run with no verdict of its own says when it left no results.json
_NO_RESULTS = f"the run left no {RESULTS_FILE}"


class BadInput(ValueError):
    """A command line that cannot be carried out (exit 254); the message says why."""


class BadRunDir(BadInput):
    """A --from directory that is not a checked run; the message names it and says why."""


def add_compare(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare", help="run scenarios on each target with the same seed and compare them",
        description="Run each SCENARIO once per target (broker) with the same seed, one "
        "run after another, or with --from read runs back from their directories (runs of "
        "the same scenario and seed are paired), and print verdicts, violation kinds, "
        "confirm latency and throughput side by side with what differs. Writes "
        f"{COMPARE_FILE} and {MARKDOWN_FILE} to STORE/compare/<timestamp>/. Exit 0 when "
        "every run has a verdict, 2 when one has none, 254 bad input, 255 harness failure.")
    p.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                   help="a built-in name (see `mirrorchaos scenarios`) or a TOML file")
    p.add_argument("--seed", type=integer, default=None, metavar="N",
                   help="root seed of every run (required with SCENARIO)")
    p.add_argument("--targets", type=_targets, default=TARGETS, metavar="T,T",
                   help=f"brokers to run on, in column order (default {','.join(TARGETS)})")
    p.add_argument("--runtime", choices=("process", "docker"), default=None,
                   help="where the nodes run, the same for every target (default: the "
                   "scenario's; the rabbitmq target runs in docker only)")
    p.add_argument("--time-limit", type=positive_float, default=None, metavar="S",
                   help="each run's seconds of workload (default: the scenario's)")
    p.add_argument("--store", type=Path, default=Path("store"), metavar="DIR",
                   help="where runs and comparisons are kept (default %(default)s)")
    p.add_argument("--from", dest="run_dirs", nargs="+", type=Path, default=None,
                   metavar="DIR", help="run nothing: compare these stored run directories")
    p.set_defaults(handler=compare_command)


def _targets(text: str) -> tuple[str, ...]:
    targets = tuple(t.strip() for t in text.split(","))
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown target {unknown[0]!r}: choose from "
                                         f"{', '.join(TARGETS)}")
    if len(set(targets)) != len(targets):
        raise argparse.ArgumentTypeError(f"a target named twice: {text!r}")
    return targets


def compare_command(args: argparse.Namespace) -> int:
    # Lines unwrapped: they hold paths to copy, and a CI log has no width.
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        _check_usage(args)
        if args.run_dirs is not None:
            comparison = _stored(args.run_dirs)
        else:
            scenarios = [find_scenario(name) for name in args.scenarios]
            _check_runtimes(scenarios, args)
            comparison = _run(scenarios, args, err)
    except (BadInput, ScenarioError, DuplicateRun) as exc:
        err.print(f"mirrorchaos compare: bad input: {exc}", markup=False)
        return EXIT_BAD_INPUT
    directory = new_campaign_dir(args.store.resolve() / "compare")
    write_json(directory / COMPARE_FILE, comparison.to_json())
    (directory / MARKDOWN_FILE).write_text(markdown(comparison), encoding="utf-8")
    render_comparison(comparison, Console())
    err.print(f"stored in {directory} ({COMPARE_FILE}, {MARKDOWN_FILE})", markup=False)
    return comparison.exit_code


def _check_usage(args: argparse.Namespace) -> None:
    if args.run_dirs is not None and args.scenarios:
        raise BadInput("give SCENARIO to run, or --from DIR to read runs back, not both")
    if args.run_dirs is None and not args.scenarios:
        raise BadInput("give SCENARIO to run, or --from DIR to read runs back")
    if args.scenarios and args.seed is None:
        raise BadInput("--seed N is needed: every target runs the same seed")


def _check_runtimes(scenarios: Sequence[Scenario], args: argparse.Namespace) -> None:
    """Before anything runs: every target can run where each scenario's nodes run."""
    for scenario in scenarios:
        runtime = args.runtime or scenario.runtime
        for target in args.targets:
            if runtime not in TARGET_RUNTIMES[target]:
                raise BadInput(f"{scenario.name}: the {target} target runs in "
                               f"{' or '.join(TARGET_RUNTIMES[target])}, not {runtime} "
                               f"(--runtime)")


def _run(scenarios: Sequence[Scenario], args: argparse.Namespace, err: Console) -> Comparison:
    """Each scenario on each target in turn, a line as each run starts and ends."""
    for name in ("aiormq", "aio_pika"):  # the history records every dropped connection
        logging.getLogger(name).setLevel(logging.CRITICAL)
    records = []
    for scenario in scenarios:
        for target in args.targets:
            label = f"{scenario.name} on {target}"
            err.print(f"{label}: seed {args.seed}, starting", markup=False)
            options = RunOptions(target=target, seed=args.seed, runtime=args.runtime,
                                 time_limit=args.time_limit, store=args.store)
            started = time.monotonic()
            try:
                outcome = run_scenario(scenario, options)
                results, run_dir = outcome.results, outcome.run_dir
                interrupted = outcome.interrupted
            except HarnessError as exc:  # e.g. no such runtime here: no run directory
                results, run_dir, interrupted = {"harness_error": str(exc)}, None, False
            record = RunRecord(scenario.name, args.seed, target,
                               results or {"error": _NO_RESULTS}, run_dir,
                               round(time.monotonic() - started, 1))
            records.append(record)
            err.print(f"{label}: {verdict_word(record.results.get('valid'))} in "
                      f"{record.seconds:g}s, {run_dir or 'no run directory'}", markup=False)
            if interrupted:
                raise KeyboardInterrupt  # the comparison stops with the run
    return compare(records, args.targets)


def _stored(run_dirs: Sequence[Path]) -> Comparison:
    return compare(read_run_dir(run_dir) for run_dir in run_dirs)


def read_run_dir(run_dir: Path) -> RunRecord:
    """A stored run as its results.json has it (not checked again: the comparison is of
    what the runs found); a directory that is not a checked run raises BadRunDir."""
    path = run_dir / RESULTS_FILE
    if not run_dir.is_dir():
        raise BadRunDir(f"{run_dir}: not a directory")
    if not path.is_file():
        raise BadRunDir(f"{run_dir}: no {RESULTS_FILE}, so not a checked run directory "
                        f"(`mirrorchaos check {run_dir}` checks a run that has a history)")
    try:
        results: Any = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadRunDir(f"{path}: not readable as JSON: {exc}") from None
    if not isinstance(results, dict):
        raise BadRunDir(f"{path}: not a results document")
    scenario, seed = results.get("scenario"), results.get("seed")
    if not isinstance(scenario, str) or not isinstance(seed, int):
        raise BadRunDir(f"{path}: names no scenario and seed to pair the run by")
    return RunRecord(scenario, seed, str(results.get("target", DEFAULT_TARGET)), results,
                     run_dir)
