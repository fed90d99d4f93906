"""Real campaigns on Spark local mode: `mirrorchaos run` subprocesses on local node
processes, one Spark task each, merged from the store."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from reports.soak.campaign import CampaignOptions, plan_campaign, run_campaign, run_seed
from reports.soak.merge import merge_campaign
from reports.soak.task import RunTask, run_task


def _run_processes(under: Path) -> list[str]:
    """Live processes of runs stored under ``under``: the harness (its --store), and
    what it started (the task gives each run a TMPDIR in its own directory)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            line = " ".join(proc.info["cmdline"] or ())
            tmpdir = proc.environ().get("TMPDIR", "")
        except psutil.Error:
            continue
        if str(under) in line or tmpdir.startswith(str(under)):
            found.append(line)
    return found


def test_seeds_come_from_the_root_seed_and_each_run_has_its_own_store(tmp_path: Path) -> None:
    campaign = plan_campaign(CampaignOptions("smoke", 3, 5.0, store=tmp_path, root_seed=9))
    assert [t.seed for t in campaign.tasks] == [run_seed(9, i) for i in range(3)]
    assert len({t.seed for t in campaign.tasks}) == 3
    assert len({t.task_dir for t in campaign.tasks}) == 3
    plan = json.loads((campaign.directory / "campaign.json").read_text())
    assert plan["root_seed"] == 9
    assert plan["runs"][1]["replay"] == (f"mirrorchaos run smoke --seed {run_seed(9, 1)} "
                                         "--runtime process --time-limit 5")


def test_a_run_past_its_time_limit_is_recorded_as_a_timeout_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    task = RunTask(0, "smoke", 4242, "process", 30.0, str(tmp_path / "000-seed4242"),
                   timeout=2.0, kill_grace=20.0)
    started = time.monotonic()
    record = run_task(task)
    assert time.monotonic() - started < 40
    assert (record["status"], record["seed"]) == ("timeout", 4242)
    assert record["replay"] == "mirrorchaos run smoke --seed 4242 --runtime process --time-limit 30"
    assert json.loads((tmp_path / "000-seed4242" / "task.json").read_text()) == record
    # nothing of the run (harness, nodes, toxiproxy) is left behind
    assert _run_processes(tmp_path) == []


def test_a_campaign_on_spark_merges_a_valid_run_and_a_hung_one(spark: Any,
                                                               tmp_path: Path) -> None:
    campaign = plan_campaign(CampaignOptions("smoke", 2, 4.0, master="local[2]",
                                             store=tmp_path, root_seed=5))
    hung = dataclasses.replace(campaign.tasks[1], timeout=3.0, kill_grace=20.0)
    campaign.tasks[1] = hung
    records = run_campaign(campaign, spark)
    assert [(r["seed"], r["status"]) for r in records] == [
        (campaign.tasks[0].seed, "done"), (hung.seed, "timeout")]
    report = merge_campaign(spark, campaign.directory)
    assert [(r["seed"], r["status"], r["verdict"]) for r in report.runs] == [
        (campaign.tasks[0].seed, "done", "valid"), (hung.seed, "timeout", "unknown")]
    assert [r["replay"] for r in report.failing] == [hung.replay]
    valid = report.runs[0]
    assert valid["confirmed"] > 0 and valid["history_p99_ms"] is not None
    assert report.latency["overall"]["confirms"] >= valid["confirmed"]
    assert _run_processes(tmp_path) == []


@pytest.mark.slow
def test_a_broken_node_makes_its_run_fail_the_campaign(spark: Any, tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text('base = "consume-survives-kill"\n'
                      'node_args = ["--break", "unflagged-redelivery"]\n')
    campaign = plan_campaign(CampaignOptions(str(broken), 2, 12.0, master="local[2]",
                                             store=tmp_path / "store", root_seed=7))
    run_campaign(campaign, spark)
    report = merge_campaign(spark, campaign.directory)
    assert {r["verdict"] for r in report.runs} == {"invalid"}
    assert {a["anomaly"] for a in report.anomalies if a["standing"] == "violation"} == {
        "duplicate"}
    assert {r["seed"] for r in report.failing} == {t.seed for t in campaign.tasks}
