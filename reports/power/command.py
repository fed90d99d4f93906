"""``mirrorchaos power``: arguments, the campaign's progress lines, and its outputs under
``STORE/power/<timestamp>/`` (``power.json``, ``report.html``; ``STORE/power/latest`` is the
newest). Exit 0 when every bug is caught on every seed and the correct broker is valid in
every run, else 1; 254 for a bad scenario or bug name."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path
from typing import Any

from rich.console import Console

from cluster.breakages import CATALOGUE
from harness.arguments import integer, positive_float, positive_int
from harness.checker import EXIT_BAD_INPUT
from harness.checker.command import check_path
from harness.history.errors import BadHistory
from harness.power.campaign import CI_SCENARIOS, CI_SEEDS, PowerPlan, recheck, run_power
from harness.power.matrix import Cell, Matrix, matrix_from_json
from harness.run.store import new_campaign_dir
from harness.scenarios import ScenarioError, find_scenario
from reports.power.render import render_power, write_power_html

POWER_FILE = "power.json"


def add_power(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "power", help="run the campaign against the correct broker and every planted bug",
        description="Run each scenario with each seed on the correct broker and on nodes "
        "started with each --break switch (docs/planted-bugs.md), and print the detection "
        "matrix: bug x seed -> the scenario that caught it, the violation kinds and the time "
        "to detection. A bug is caught when a run is invalid with a violation kind its "
        "catalogue line names. Exit 0 when every bug is caught on every seed and the correct "
        "broker is valid in every run, else 1.")
    p.add_argument("--scenario", action="append", dest="scenarios", metavar="SCENARIO",
                   help="built-in name or TOML file, in the order to try (default: "
                   + ", ".join(CI_SCENARIOS) + ")")
    p.add_argument("--seed", action="append", dest="seeds", type=integer, metavar="N",
                   help="root seed, repeatable (default: " + ", ".join(map(str, CI_SEEDS)) + ")")
    p.add_argument("--bug", action="append", dest="bugs", metavar="NAME",
                   choices=sorted(CATALOGUE),
                   help="planted bug, repeatable (default: every one in docs/planted-bugs.md)")
    p.add_argument("--no-bugs", action="store_true",
                   help="the correct broker only (the CI campaign's own check)")
    p.add_argument("--no-correct", action="store_true", help="skip the correct broker")
    p.add_argument("--full", action="store_true",
                   help="run every scenario even after a bug was caught on that seed")
    p.add_argument("--jobs", type=positive_int, default=1, metavar="N",
                   help="(target, seed) pairs run side by side, each target's runs on a "
                   "seed still in order (default %(default)s); every run starts a cluster, "
                   "so more jobs than cores make faults land late and may hide a bug")
    p.add_argument("--runtime", choices=("process", "docker"), default="process",
                   help="where the nodes run (default %(default)s)")
    p.add_argument("--time-limit", type=positive_float, default=None, metavar="S",
                   help="each run's seconds of workload (default: the scenario's)")
    p.add_argument("--store", type=Path, default=Path("store"), metavar="DIR",
                   help="store root (default %(default)s)")
    p.add_argument("--recheck", type=Path, default=None, metavar="CAMPAIGN_DIR",
                   help="run nothing: check a stored campaign's runs again with this "
                   "checker and rewrite its matrix")
    p.set_defaults(handler=power_command)


def power_command(args: argparse.Namespace) -> int:
    err = Console(stderr=True, highlight=False)
    if args.recheck is not None:
        return _recheck(args.recheck, err)
    try:
        scenarios = [find_scenario(name) for name in args.scenarios or CI_SCENARIOS]
    except ScenarioError as exc:
        err.print(f"mirrorchaos power: bad scenario: {exc}", markup=False)
        return EXIT_BAD_INPUT
    if args.no_bugs and args.no_correct:
        err.print("mirrorchaos power: --no-bugs and --no-correct leave nothing to run")
        return EXIT_BAD_INPUT
    names = [] if args.no_bugs else (args.bugs or list(CATALOGUE))
    bugs = {name: CATALOGUE[name].violations for name in names}
    for name in ("aiormq", "aio_pika"):  # the history records every dropped connection
        logging.getLogger(name).setLevel(logging.CRITICAL)
    directory = new_campaign_dir(args.store.resolve() / "power")
    plan = PowerPlan(scenarios, tuple(args.seeds or CI_SEEDS), bugs, directory,
                     runtime=args.runtime, time_limit=args.time_limit,
                     correct=not args.no_correct, full=args.full)
    runs = len(plan.seeds) * (len(bugs) + plan.correct)
    err.print(f"mirrorchaos power: {len(bugs)} planted bugs and "
              f"{'the correct broker' if plan.correct else 'no correct broker'} x seeds "
              f"{', '.join(map(str, plan.seeds))} x up to {len(scenarios)} scenarios "
              f"({runs} campaigns, {args.jobs} at a time) on {args.runtime}; stored in "
              f"{directory}", markup=False)

    def progress(matrix: Matrix, cell: Cell) -> None:
        mark = "caught" if cell.caught else cell.verdict
        err.print(f"  {cell.target} seed {cell.seed} {cell.scenario}: {mark} "
                  f"[{', '.join(cell.violations)}] {cell.seconds:g}s", markup=False)
        _write(matrix, directory)  # a campaign cut short keeps what it found

    matrix = run_power(plan, progress, jobs=args.jobs)
    page = _write(matrix, directory)
    render_power(matrix, Console())
    err.print(f"stored in {directory} ({POWER_FILE}, {page.name})", markup=False)
    return 1 if matrix.missed() else 0


def _write(matrix: Matrix, directory: Path) -> Path:
    """power.json and report.html as the matrix stands; the page's path."""
    (directory / POWER_FILE).write_text(json.dumps(matrix.to_json(), indent=1) + "\n",
                                        encoding="utf-8")
    return write_power_html(matrix, directory)


def _recheck(directory: Path, err: Console) -> int:
    try:
        matrix = matrix_from_json(json.loads((directory / POWER_FILE).read_text("utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        err.print(f"mirrorchaos power: no campaign to recheck in {directory}: {exc}",
                  markup=False)
        return EXIT_BAD_INPUT
    matrix = recheck(matrix, _check_again)
    page = _write(matrix, directory)
    render_power(matrix, Console())
    err.print(f"rechecked {len(matrix.cells)} runs; stored in {directory} ({POWER_FILE}, "
              f"{page.name})", markup=False)
    return 1 if matrix.missed() else 0


def _check_again(run_dir: Path) -> dict[str, Any]:
    """The run checked again and its results.json rewritten; a harness failure the run
    recorded still keeps its verdict from being valid. A history the checker refuses is
    unknown, with the reason."""
    path = run_dir / "results.json"
    before = json.loads(path.read_text("utf-8")) if path.exists() else {}
    try:
        results = check_path(run_dir)
    except BadHistory as exc:
        return {"valid": "unknown", "error": f"bad input: {exc}"}
    if before.get("harness_error"):
        results["harness_error"] = before["harness_error"]
        if results.get("valid") is True:
            results["valid"] = "unknown"
    (run_dir / "results.json").write_text(json.dumps(results, indent=2) + "\n",
                                          encoding="utf-8")
    return results
