"""Real campaigns on Spark local mode: `mirrorchaos run` subprocesses on local node
processes, one Spark task each, sent back to the driver, stored and merged."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil
import pytest

from reports.soak.campaign import CampaignOptions, plan_campaign, run_campaign, run_seed
from reports.soak.merge import merge_campaign
from reports.soak.task import RunTask, run_task, store_run
from tests.ha_cases import wait_for

ROOT = Path(__file__).resolve().parents[2]
BROKEN = ROOT / "examples" / "broken-redelivery.toml"


# Spark on a shared two-core machine can take minutes; this only guards against a hang
# One test worker runs Spark (a JVM using both cores) at a time.
pytestmark = [pytest.mark.timeout(600)]

def _run_processes(marker: str | Path) -> list[str]:
    """Live processes of runs whose command line or TMPDIR holds ``marker``: a run's
    harness (its --store) and what it started (the task gives each run a TMPDIR in its
    own temporary directory, named after the run)."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            line = " ".join(proc.info["cmdline"] or ())
            tmpdir = proc.environ().get("TMPDIR", "")
        except psutil.Error:
            continue
        if str(marker) in line or str(marker) in tmpdir:
            found.append(line)
    return found


def _temporary(task: RunTask) -> str:
    """What a run's temporary directory is named after (task.py)."""
    return f"mirrorchaos-{task.name}-"


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
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    task = RunTask(0, "smoke", 4242, "process", 30.0, str(tmp_path / "store" / "000-seed4242"),
                   timeout=2.0, kill_grace=20.0)
    scratch = tmp_path / "executor"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # the executor's TMPDIR
    row = run_task(task)
    assert (row["status"], row["seed"]) == ("timeout", 4242)
    assert row["replay"] == "mirrorchaos run smoke --seed 4242 --runtime process --time-limit 30"
    assert (row["executor"], row["spark_attempt"]) == ("driver", None)  # not in Spark
    # the run comes back in the row and its directory is gone
    assert "run.log" in row["files"] and list(scratch.iterdir()) == []
    record = store_run(row)
    assert json.loads((tmp_path / "store" / "000-seed4242" / "task.json").read_text()) == record
    assert "files" not in record
    assert (tmp_path / "store" / "000-seed4242" / "run.log").stat().st_size > 0
    # nothing of the run (harness, nodes, toxiproxy) is left behind
    assert _run_processes(scratch) == []


def test_a_run_whose_worker_dies_winds_its_cluster_down_and_stores_its_history(
    tmp_path: Path,
) -> None:
    """A stopped campaign takes its Spark workers down without a word: the run they
    started is interrupted rather than left going on alone. The worker ignores SIGINT,
    as one of a campaign started in the background (`nohup ... &`) does."""
    task = RunTask(0, "smoke", 4343, "process", 600.0, str(tmp_path / "000-seed4343"),
                   timeout=900.0, kill_grace=20.0)
    worker = subprocess.Popen([sys.executable, "-c", (
        "import signal; from reports.soak.task import RunTask, run_task, store_run; "
        "signal.signal(signal.SIGINT, signal.SIG_IGN); "
        f"run_task(RunTask(*{dataclasses.astuple(task)!r}))")], cwd=ROOT,
        env={**os.environ, "TMPDIR": str(tmp_path)})  # where its run's directory goes
    try:
        wait_for(lambda: any("cluster.node" in p for p in _run_processes(tmp_path)),
                 "the run's nodes", timeout=120.0)
    finally:
        worker.kill()
        worker.wait()
    # a hang guard, not a speed bound: left going on, the run would last its 600 s
    wait_for(lambda: _run_processes(tmp_path) == [], "the run to wind down", timeout=300.0)
    # in the run's own temporary directory, which its dead task can no longer send
    (history,) = tmp_path.glob("mirrorchaos-000-seed4343-*/smoke/*-seed4343/history.jsonl")
    assert history.stat().st_size > 0


@pytest.mark.spark
def test_a_campaign_on_spark_merges_a_valid_run_and_a_hung_one(spark: Any,
                                                               tmp_path: Path) -> None:
    campaign = plan_campaign(CampaignOptions((("smoke", 2),), 4.0, master="local[2]",
                                             store=tmp_path, root_seed=5))
    hung = dataclasses.replace(campaign.tasks[1], timeout=3.0, kill_grace=20.0)
    campaign.tasks[1] = hung
    records = run_campaign(campaign, spark)
    assert [(r["seed"], r["status"]) for r in records] == [
        (campaign.tasks[0].seed, "done"), (hung.seed, "timeout")]
    # local mode: the driver's executor on this host, each run's job run once
    assert {(r["worker"], r["executor"], r["attempts"], r["spark_attempt"]) for r in records} \
        == {(socket.gethostname(), "driver", 1, 0)}
    # the executor sent the run back; the driver stored it where the merge reads it
    stored = Path(records[0]["run_dir"])
    assert stored.parent.parent == Path(campaign.tasks[0].task_dir)
    for name in ("results.json", "history.jsonl", "config.json", "nodes/n1.log"):
        assert (stored / name).stat().st_size > 0, name
    assert not (stored / "report.html").exists()  # plotly inline: too large to send
    assert any(left.startswith(f"{stored.relative_to(campaign.tasks[0].task_dir)}/report.html")
               for left in records[0]["left_out"])
    # and the executors' temporary directories are gone
    for task in campaign.tasks:
        assert not list(Path(tempfile.gettempdir()).glob(f"{_temporary(task)}*"))
    report = merge_campaign(spark, campaign.directory)
    assert [(r["seed"], r["status"], r["verdict"]) for r in report.runs] == [
        (campaign.tasks[0].seed, "done", "valid"), (hung.seed, "timeout", "unknown")]
    assert [r["replay"] for r in report.failing] == [hung.replay]
    # its own run directory, not what its cluster left in its TMPDIR
    assert Path(report.failing[0]["run_dir"]).parent.name == "smoke"
    valid = report.runs[0]
    assert valid["confirmed"] > 0 and valid["history_p99_ms"] is not None
    assert report.latency["overall"]["confirms"] >= valid["confirmed"]
    assert valid["worker"] == socket.gethostname()
    for task in campaign.tasks:
        assert _run_processes(_temporary(task)) == []


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
    assert (tmp_path / "soak" / "latest").resolve() == campaign.directory


def _mirrorchaos(*args: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """The installed ``mirrorchaos`` command, as an engineer runs it, from ``cwd``; what
    it starts keeps its temporary files there (so `_run_processes` finds it)."""
    script = Path(sys.executable).with_name("mirrorchaos")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "reports.cli"]
    (cwd / "tmp").mkdir(exist_ok=True)
    return subprocess.run([*command, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(cwd / "tmp")}, timeout=timeout,
                          check=False)


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_a_broken_run_is_listed_failing_and_its_replay_gives_the_same_verdict(
        spark: Any, tmp_path: Path) -> None:
    """`mirrorchaos soak` with two scenarios, a correct one and one on nodes that drop
    the redelivered flag: the campaign is invalid, its report lists the broken run's
    seed with a replay command, and that command, run as it is, gives the same verdict
    with the same violations."""
    done = _mirrorchaos("soak", "--scenario", "smoke:1", "--scenario", f"{BROKEN}:1",
                        "--duration", "12", "--spark-master", "local[2]", "--seed", "7",
                        "--store", str(tmp_path / "store"), cwd=tmp_path, timeout=900)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    directory = (tmp_path / "store" / "soak" / "latest").resolve()
    report = json.loads((directory / "report.json").read_text())
    smoke_seed, broken_seed = run_seed(7, 0), run_seed(7, 1)
    assert [(r["scenario"], r["seed"], r["status"], r["verdict"]) for r in report["runs"]] == [
        ("smoke", smoke_seed, "done", "valid"),
        ("broken-redelivery", broken_seed, "done", "invalid")]
    assert report["verdicts_per_scenario"] == {"smoke": {"valid": 1},
                                               "broken-redelivery": {"invalid": 1}}
    assert {a["anomaly"] for a in report["anomalies"] if a["standing"] == "violation"} == {
        "duplicate"}
    [failing] = report["failing"]
    replay = (f"mirrorchaos run {BROKEN} --seed {broken_seed} --runtime process "
              "--time-limit 12")
    assert (failing["seed"], failing["replay"]) == (broken_seed, replay)
    # the terminal summary and the page list it too, and the Parquet has every run
    assert f"seed {broken_seed} (broken-redelivery: done, invalid)" in done.stdout
    assert replay in done.stdout
    page = (directory / "report.html").read_text()
    assert str(broken_seed) in page and str(BROKEN) in page
    runs = spark.read.parquet(str(directory / "runs.parquet"))
    assert sorted((r.seed, r.failing) for r in runs.select("seed", "failing").collect()) == \
        sorted([(smoke_seed, False), (broken_seed, True)])

    # the replay command as printed, from a directory of its own (its default store)
    replay_dir = tmp_path / "replay"
    replay_dir.mkdir()
    program, *args = shlex.split(failing["replay"])
    assert program == "mirrorchaos"
    again = _mirrorchaos(*args, cwd=replay_dir, timeout=300)
    assert again.returncode == 1, again.stdout + again.stderr
    replayed = json.loads((replay_dir / "store" / "latest" / "results.json").read_text())
    original = json.loads((Path(failing["run_dir"]) / "results.json").read_text())
    assert (replayed["seed"], replayed["valid"]) == (broken_seed, False)
    assert {v["kind"] for v in replayed["violations"]} == {
        v["kind"] for v in original["violations"]} == {"duplicate"}
    assert _run_processes(tmp_path) == []
