"""Real campaigns on Spark local mode: `mirrorchaos run` subprocesses on local node
processes, one Spark task each, merged from the store."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from reports.soak.campaign import CampaignOptions, plan_campaign, run_campaign, run_seed
from reports.soak.merge import merge_campaign
from reports.soak.task import RunTask, run_task

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "examples" / "broken-redelivery.toml"


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
    campaign = plan_campaign(CampaignOptions((("smoke", 3),), 5.0, store=tmp_path, root_seed=9))
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
    campaign = plan_campaign(CampaignOptions((("smoke", 2),), 4.0, master="local[2]",
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


def test_a_campaign_of_several_scenarios_gives_each_run_its_own_seed(tmp_path: Path) -> None:
    relative = str(BROKEN.relative_to(ROOT))
    campaign = plan_campaign(CampaignOptions((("smoke", 2), (relative, 1)), 5.0,
                                             store=tmp_path, root_seed=3))
    assert [t.scenario for t in campaign.tasks] == ["smoke", "smoke", str(BROKEN)]
    assert [t.seed for t in campaign.tasks] == [run_seed(3, i) for i in range(3)]
    plan = json.loads((campaign.directory / "campaign.json").read_text())
    assert plan["scenarios"] == [{"scenario": "smoke", "runs": 2},
                                 {"scenario": relative, "runs": 1}]
    assert plan["runs"][2]["replay"].startswith(f"mirrorchaos run {BROKEN} --seed ")


@pytest.mark.slow
def test_a_broken_run_is_listed_failing_and_its_replay_gives_the_same_verdict(
        spark: Any, tmp_path: Path) -> None:
    campaign = plan_campaign(CampaignOptions((("smoke", 1), (str(BROKEN), 1)), 12.0,
                                             master="local[2]", store=tmp_path / "store",
                                             root_seed=7))
    run_campaign(campaign, spark)
    report = merge_campaign(spark, campaign.directory)
    smoke, broken = campaign.tasks
    assert [(r["seed"], r["verdict"]) for r in report.runs] == [
        (smoke.seed, "valid"), (broken.seed, "invalid")]
    assert {a["anomaly"] for a in report.anomalies if a["standing"] == "violation"} == {
        "duplicate"}
    assert [r["replay"] for r in report.failing] == [broken.replay]
    replay = broken.replay.split()
    assert replay[:2] == ["mirrorchaos", "run"]
    store = tmp_path / "replay"
    done = subprocess.run([sys.executable, "-m", "harness.cli", *replay[1:], "--store",
                           str(store), "--no-live"], capture_output=True, text=True,
                          timeout=200, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    results = json.loads(((store / "latest").resolve() / "results.json").read_text())
    assert results["seed"] == broken.seed
    assert {v["kind"] for v in results["violations"]} == {"duplicate"}
