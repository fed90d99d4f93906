"""``mirrorchaos run SCENARIO`` and ``mirrorchaos scenarios``: argument parsing and what
the user sees; the run itself is `harness.run.orchestrate`. The full report after a run
is the `Report` that the command line (`reports.cli`) passes to `add_run`."""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.arguments import integer, positive_float, positive_int
from harness.checker import EXIT_BAD_INPUT
from harness.run.config import RunOptions, effective_scenario
from harness.run.orchestrate import run_scenario
from harness.run.outcome import RunOutcome
from harness.run.runtimes import TARGET_RUNTIMES
from harness.run.status import RunStatus
from harness.scenarios import SCENARIOS, ScenarioError, find_scenario

SubParsers = argparse._SubParsersAction
Report = Callable[[Path, Console], None]
"""Reports a checked run from its directory: on the console, and as files written into
the directory (report.html, junit.xml)."""


def add_run(sub: SubParsers, report: Report) -> None:
    p = sub.add_parser(
        "run", help="run a scenario: cluster, workload, faults, drain, check",
        description="Start the scenario's cluster, run its workload and nemesis, heal, "
        "drain every queue, check the history and store the run under "
        "STORE/<scenario>/<timestamp>-seed<N>/. Exit 0 valid, 1 invalid, 2 unknown, "
        "254 bad scenario, 255 harness failure.")
    p.add_argument("scenario", metavar="SCENARIO",
                   help="a built-in name (see `mirrorchaos scenarios`) or a TOML file")
    p.add_argument("--runtime", choices=("process", "docker"), default=None,
                   help="where the nodes run (default: the scenario's)")
    p.add_argument("--target", choices=("mirrorchaos", "rabbitmq"), default=None,
                   help="the broker: our own nodes, or real RabbitMQ 3.10 (docker runtime "
                        "only; default: the scenario's)")
    p.add_argument("--seed", type=integer, default=None, help="root seed (default: drawn)")
    p.add_argument("--time-limit", type=positive_float, default=None, metavar="S",
                   help="seconds of workload before the drain (warm-up, faults, recovery)")
    p.add_argument("--nodes", type=positive_int, default=None, metavar="N",
                   help="cluster size (default: the scenario's)")
    p.add_argument("--store", type=Path, default=Path("store"), metavar="DIR",
                   help="where runs are kept (default %(default)s)")
    p.add_argument("--no-live", action="store_true",
                   help="no live display (it is off anyway when stdout is not a terminal)")
    p.set_defaults(handler=run_command, report=report)


def add_scenarios(sub: SubParsers) -> None:
    p = sub.add_parser("scenarios", help="list the built-in scenarios",
                       description="Each built-in scenario's name and what it does.")
    p.set_defaults(handler=lambda _args: list_scenarios())


def list_scenarios() -> int:
    width = max(len(name) for name in SCENARIOS)
    for name, scenario in SCENARIOS.items():
        print(f"{name:<{width}}  {scenario.description}")
    return 0


def run_command(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False)
    try:
        scenario = find_scenario(args.scenario)
        options = RunOptions(runtime=args.runtime, target=args.target, seed=args.seed,
                             time_limit=args.time_limit,
                             nodes=args.nodes, store=args.store)
        if options.nodes is not None:
            _check_nodes(scenario.nemesis.package, options.nodes)
        chosen = effective_scenario(scenario, options)
        if chosen.runtime not in TARGET_RUNTIMES[chosen.target]:
            raise ScenarioError(f"--target {chosen.target}", None, "--runtime " + " or ".join(
                TARGET_RUNTIMES[chosen.target]), chosen.runtime)
    except ScenarioError as exc:
        err.print(f"mirrorchaos run: bad scenario: {exc}", markup=False)
        return EXIT_BAD_INPUT
    # The client library logs each dropped connection with a traceback; the history
    # records them, so only its errors beyond that are worth a line.
    for name in ("aiormq", "aio_pika"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    console = Console()
    live = None
    if console.is_terminal and not args.no_live:
        from harness.run.live import LiveDisplay
        live = LiveDisplay(console)

    def started(status: RunStatus) -> None:
        err.print(f"mirrorchaos run {status.scenario}: seed {status.seed}, "
                  f"run directory {status.run_dir}", markup=False)
        if live is not None:
            live.attach(status)
        else:
            status.on_enter = lambda phase, seconds: err.print(
                f"  phase {phase}" + (f" ({seconds:g}s)" if seconds else ""), markup=False)
            status.on_step = lambda step: err.print(
                f"    {time.monotonic() - status.phase_started:6.1f}s  {step}", markup=False,
                soft_wrap=True)

    try:
        outcome = run_scenario(scenario, options, started)
    finally:
        if live is not None:
            live.close()
    summary(console, outcome, args.report)
    return outcome.exit_code


def _check_nodes(package: str, nodes: int) -> None:
    if package in ("partition", "combined") and nodes < 2:
        raise ScenarioError("--nodes", "nodes", f"at least 2 nodes for a {package} nemesis",
                            nodes)


def summary(console: Console, outcome: RunOutcome, report: Report) -> None:
    """The full report of a checked run (``report``: terminal, plus report.html and
    junit.xml in the run directory), then the verdict and where the run is stored."""
    results: dict[str, Any] = outcome.results or {}
    if outcome.results is not None and (outcome.run_dir / "history.jsonl").exists():
        report(outcome.run_dir, console)
    valid = results.get("valid", "unknown")
    style = {True: "green", False: "red"}.get(valid, "yellow")
    console.print(f"verdict: [{style}]{_verdict(valid)}[/{style}]  (exit {outcome.exit_code})")
    if outcome.error:
        console.print(f"[red]harness failure[/red]: {outcome.error}", highlight=False)
    stored = outcome.run_dir.resolve()
    console.print(f"stored in {stored}", markup=False, soft_wrap=True)
    for name in ("report.html", "junit.xml"):
        if (stored / name).exists():  # whole paths, one a line, for a click or a copy
            console.print(f"  {stored / name}", markup=False, soft_wrap=True)


def _verdict(valid: object) -> str:
    return "valid" if valid is True else "INVALID" if valid is False else "unknown"
