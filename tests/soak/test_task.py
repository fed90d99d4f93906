"""What a soak task leaves behind when its run is over (nothing of the run's), and
what it sends the driver (the run's files, which the driver stores as they were)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil

from reports.soak.task import OPTIONAL_LIMIT, TASK_FILE, carry, end_strays, store_run

# A process that runs until a signal ends it, as a node does.
UNTIL_KILLED = [sys.executable, "-c", "import signal; signal.pause()"]


def test_a_process_the_run_left_in_a_session_of_its_own_is_killed_and_no_other(
        tmp_path: Path) -> None:
    run_tmp, other_tmp = tmp_path / "run" / "tmp", tmp_path / "other"
    run_tmp.mkdir(parents=True)
    other_tmp.mkdir()
    # a node the run started: its TMPDIR lies under the run's, as a cluster's does
    stray = subprocess.Popen(UNTIL_KILLED, start_new_session=True,
                             env={**os.environ, "TMPDIR": str(run_tmp / "cluster")})
    bystander = subprocess.Popen(UNTIL_KILLED, start_new_session=True,
                                 env={**os.environ, "TMPDIR": str(other_tmp)})
    try:
        end_strays(run_tmp)
        assert not psutil.pid_exists(stray.pid)  # killed and reaped
        assert bystander.poll() is None
    finally:
        stray.kill()
        bystander.kill()
        bystander.wait()


def test_a_run_travels_gzipped_to_the_driver_which_stores_it_in_the_same_layout(
        tmp_path: Path) -> None:
    """What the merge reads always comes back; a large optional file stays behind and
    is named; the run's TMPDIR and the store's `latest` link are not sent."""
    work = tmp_path / "executor"
    run = work / "smoke" / "20260101T000000-seed7"
    (run / "nodes").mkdir(parents=True)
    (work / "tmp" / "cluster").mkdir(parents=True)
    (work / "latest").symlink_to(run)
    history = b"".join(b'{"time": %d, "op": "publish"}\n' % i for i in range(50_000))
    noise = os.urandom(OPTIONAL_LIMIT + 1)  # does not compress
    files = {"run.log": b"verdict: valid\n", "smoke/20260101T000000-seed7/history.jsonl": history,
             "smoke/20260101T000000-seed7/results.json": b'{"valid": true}',
             "smoke/20260101T000000-seed7/config.json": b"{}",
             "smoke/20260101T000000-seed7/nodes/n1.log": b"started\n",
             "smoke/20260101T000000-seed7/report.html": noise,
             "tmp/cluster/n1.data": b"node data"}
    for name, data in files.items():
        (work / name).write_bytes(data)
    carried, left_out = carry(work)
    assert set(carried) == {n for n in files
                            if not n.startswith("tmp/") and not n.endswith("report.html")}
    assert len(carried["smoke/20260101T000000-seed7/history.jsonl"]) < len(history) / 10
    assert left_out == [f"smoke/20260101T000000-seed7/report.html: "
                        f"{len(gzip.compress(noise, 6))} bytes gzipped"]

    task_dir = tmp_path / "store" / "soak" / "c" / "runs" / "000-seed7"
    row = {"task": task_dir.name, "task_dir": str(task_dir), "status": "done",
           "run_dir": "smoke/20260101T000000-seed7", "files": carried, "left_out": left_out}
    record = store_run(row)
    assert record["run_dir"] == str(task_dir / "smoke" / "20260101T000000-seed7")
    for name, data in files.items():
        if name in carried:
            assert (task_dir / name).read_bytes() == data
    assert json.loads((task_dir / TASK_FILE).read_text()) == record
    assert "files" not in record and not (task_dir / "tmp").exists()


def test_a_scenario_file_travels_with_its_task_and_runs_from_the_executors_copy(
        tmp_path: Path) -> None:
    from reports.soak.task import RunTask

    text = 'base = "smoke"\nnode_args = ["--break", "unflagged-redelivery"]\n'
    task = RunTask(0, "/driver/only/broken.toml", 5, "process", 10.0,
                   str(tmp_path / "runs" / "000-seed5"), 60.0, scenario_text=text)
    work = tmp_path / "executor"
    command = task.command(work)
    scenario = Path(command[command.index("run") + 1])
    assert scenario.is_relative_to(work) and scenario.read_text() == text
    assert "/driver/only/broken.toml" in task.replay  # what the user replays is theirs
    builtin = RunTask(1, "smoke", 6, "process", 10.0, str(tmp_path / "r1"), 60.0)
    assert builtin.command(work)[builtin.command(work).index("run") + 1] == "smoke"
