"""``mirrorchaos soak``: plan the campaign, fan its runs out on Spark, merge, report."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.arguments import integer, positive_float, positive_int
from reports.soak.campaign import CampaignOptions, plan_campaign, run_campaign
from reports.soak.merge import CampaignReport, merge_campaign
from reports.soak.page import write_campaign_html
from reports.soak.spark import DEFAULT_MASTER, SparkUnavailable, spark_session
from reports.soak.terminal import render_campaign

EXIT_BAD_INPUT = 254
EXIT_HARNESS_FAILURE = 255


def add_soak(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "soak", help="a campaign of runs fanned out on Spark, merged into one report",
        description="Run each scenario --runs times as Spark tasks, each `mirrorchaos run` "
        "with its own seed (derived from --seed) in a temporary directory of its "
        "executor's; the executors send each run back to the driver, which stores it "
        "and merges every run's results and history with Spark into "
        "STORE/soak/<timestamp>/ (Parquet, "
        "report.json, report.html; STORE/soak/latest is the newest). Exit 0 when every "
        "run is valid, 1 when one is invalid, else 2 when one is unknown, timed out or "
        "crashed.")
    p.add_argument("--scenario", action="append", dest="scenarios", metavar="SCENARIO[:N]",
                   help="built-in name or TOML file, with N runs of it (default --runs); "
                   "repeat for several in one campaign (default mixed)")
    p.add_argument("--runs", type=positive_int, default=8, metavar="N",
                   help="runs of a scenario given without :N (default %(default)s)")
    p.add_argument("--duration", type=positive_float, default=60.0, metavar="S",
                   help="each run's --time-limit (default %(default)s)")
    p.add_argument("--spark-master", default=DEFAULT_MASTER, metavar="URL",
                   help="Spark master of the runs, local[N] or a cluster's URL; off a "
                   "local master the merge runs on the driver's local[*] (default "
                   "%(default)s)")
    p.add_argument("--runtime", choices=("process", "docker"), default="process",
                   help="where each run's nodes live (default %(default)s)")
    p.add_argument("--store", type=Path, default=Path("store"), metavar="DIR",
                   help="store root, on the driver (default %(default)s)")
    p.add_argument("--seed", type=integer, default=None, metavar="ROOT",
                   help="root seed; each run's seed is derived from it (default: drawn)")
    p.add_argument("--task-timeout", type=positive_float, default=None, metavar="S",
                   help="a run still going after this is interrupted and recorded as a "
                   "timeout (default: duration + 240)")
    p.add_argument("--merge", type=Path, default=None, metavar="CAMPAIGN_DIR",
                   help="run nothing: merge and report an existing campaign again")
    p.set_defaults(handler=soak_command)


def soak_command(args: argparse.Namespace) -> int:
    console, err = Console(), Console(stderr=True, highlight=False)
    scenarios = tuple(_scenario_runs(text, args.runs) for text in args.scenarios or ["mixed"])
    if args.merge is None:
        from harness.scenarios import ScenarioError, find_scenario
        for scenario, runs in scenarios:
            if runs < 1:
                err.print(f"mirrorchaos soak: --scenario {scenario}:{runs}: a scenario in a "
                          "campaign needs at least one run", markup=False)
                return EXIT_BAD_INPUT
        try:
            for scenario, _ in scenarios:
                find_scenario(scenario)
        except ScenarioError as exc:
            err.print(f"mirrorchaos soak: bad scenario: {exc}", markup=False)
            return EXIT_BAD_INPUT
    elif not args.merge.is_dir():
        err.print(f"mirrorchaos soak: no campaign directory {args.merge}", markup=False)
        return EXIT_BAD_INPUT
    # The merge reads and writes the store, which only the driver has (no executor shares
    # its file system): off a local master, it runs on a local Spark of the driver's.
    merge_master = args.spark_master if args.spark_master.startswith("local") else DEFAULT_MASTER
    try:
        spark = spark_session(args.spark_master if args.merge is None else merge_master)
    except SparkUnavailable as exc:
        err.print(f"mirrorchaos soak: {exc}", markup=False)
        return EXIT_HARNESS_FAILURE
    try:
        directory = args.merge
        if directory is None:
            options = CampaignOptions(scenarios, args.duration,
                                      args.spark_master, args.runtime, args.store, args.seed,
                                      args.task_timeout)
            campaign = plan_campaign(options)
            directory = campaign.directory
            planned = ", ".join(f"{runs} run{'s' if runs > 1 else ''} of {scenario}"
                                for scenario, runs in scenarios)
            # soft wrap: seeds, paths and commands stay whole, to copy
            err.print(f"mirrorchaos soak: {planned} on "
                      f"{args.spark_master}, root seed {campaign.root_seed}, campaign "
                      f"{directory}", markup=False, soft_wrap=True)
            for task in campaign.tasks:
                err.print(f"  {task.name}: {task.scenario} seed {task.seed}", markup=False,
                          soft_wrap=True)
            run_campaign(campaign, spark, err)
            if merge_master != args.spark_master:
                spark.stop()
                spark = spark_session(merge_master)
        report = merge_campaign(spark, directory)
        write_campaign_html(report)
    finally:
        spark.stop()
    render_campaign(report, console)
    return campaign_exit_code(report)


def _scenario_runs(text: str, default_runs: int) -> tuple[str, int]:
    """``NAME`` or ``NAME:N`` (N runs of it)."""
    name, colon, count = text.rpartition(":")
    if colon and count.isdigit():
        return name, int(count)
    return text, default_runs


def campaign_exit_code(report: CampaignReport) -> int:
    if any(r["verdict"] == "invalid" for r in report.runs):
        return 1
    return 2 if report.failing or not report.runs else 0
