"""Soaks on a real Spark standalone cluster (a master and two single-core workers, JVMs
of their own from the installed PySpark): a worker SIGKILLed mid-campaign, executor and
all, loses no run, nor does an executor SIGKILLed alone. Selected by
`./dev -s soak-cluster` (marker ``soak_cluster``).

The two take different paths: a lost worker's task Spark runs again by itself (a
worker's loss is no task failure), a killed executor's task fails its run's job and the
campaign runs the job again. Either way the run's record says so."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from reports.soak.campaign import run_seed
from reports.soak.standalone import HOST, Worker, standalone_cluster
from tests.ha_cases import wait_for

pytestmark = [pytest.mark.soak_cluster, pytest.mark.timeout(1200)]

RUNS = 4
ROOT_SEED = 11


def _run_on(worker: Worker) -> int | None:
    """The seed of a run going on ``worker``: a `mirrorchaos run` whose TMPDIR lies
    under the worker's (its executors hand theirs down)."""
    for proc in psutil.process_iter(["cmdline"]):
        try:
            line = " ".join(proc.info["cmdline"] or ())
            tmpdir = Path(proc.environ().get("TMPDIR", "/"))
        except psutil.Error:
            continue
        seed = re.search(r"harness\.cli run .* --seed (\d+)", line)
        if seed and tmpdir.is_relative_to(worker.tmp):
            return int(seed.group(1))
    return None


@pytest.mark.parametrize("kill", ["worker", "executor"])
def test_a_worker_or_executor_killed_mid_campaign_loses_no_run(kill: str,
                                                               tmp_path: Path) -> None:
    store, log = tmp_path / "store", tmp_path / "soak.log"
    with standalone_cluster(tmp_path / "cluster") as cluster:
        doomed = cluster.workers[0]
        with log.open("wb") as out:
            soak = subprocess.Popen(
                [sys.executable, "-m", "reports.cli", "soak", "--spark-master",
                 cluster.master_url, "--scenario", f"smoke:{RUNS}", "--duration", "10",
                 "--seed", str(ROOT_SEED), "--store", str(store)],
                stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "TMPDIR": str(cluster.root / "tmp")})
        try:
            wait_for(lambda: _run_on(doomed) is not None, "a run on the first worker",
                     timeout=300.0)
            killed = _run_on(doomed)
            time.sleep(3.0)  # into the run: its nodes up, its workload going
            if kill == "worker":
                cluster.kill_worker(0)
            else:
                cluster.kill_executor(0)
            code = soak.wait(timeout=900)
        finally:
            if soak.poll() is None:
                soak.kill()
                soak.wait()
    output = log.read_text(errors="replace")
    report = json.loads((store / "soak" / "latest" / "report.json").read_text())
    runs = {r["seed"]: r for r in report["runs"]}
    # every planned run is in the report: none missing, none twice
    assert sorted(runs) == sorted(run_seed(ROOT_SEED, i) for i in range(RUNS)), output
    for run in runs.values():
        if run["status"] == "lost":  # reported with why, to replay
            assert (run["verdict"], run["attempts"]) == ("unknown", 3), run
            assert run["error"] and f"--seed {run['seed']} " in run["replay"], run
        else:
            assert (run["status"], run["verdict"]) == ("done", "valid"), (run, output)
    # the killed run was run again, with the same seed, or is lost with Spark's reason
    again = runs[killed]
    workers = {f"{HOST}:{w.web_port}" for w in cluster.workers}
    assert {r["worker"] for r in runs.values() if r["status"] != "lost"} <= workers
    if kill == "worker":  # by Spark, on the other worker
        assert again["attempts"] > 1 or again["spark_attempt"] > 0, (again, output)
        if again["status"] != "lost":
            assert again["worker"] == f"{HOST}:{cluster.workers[1].web_port}", again
    else:  # by the campaign, which recorded why
        assert again["attempts"] >= 2, (again, output)
        [task] = (store / "soak" / "latest" / "runs").glob(f"*-seed{killed}/task.json")
        reason = json.loads(task.read_text())["retries"][0]
        assert reason.startswith("attempt 1: ") and "executor" in reason.lower(), reason
        assert f"{again['task']}: its Spark job failed" in output
    failing = [r for r in runs.values() if r["status"] == "lost"]
    assert code == (2 if failing else 0), output
    assert [f["seed"] for f in report["failing"]] == [r["seed"] for r in failing]
