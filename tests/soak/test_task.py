"""What a soak task leaves behind when its run is over: nothing of the run's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psutil

from reports.soak.task import _end_strays

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
        _end_strays(run_tmp)
        assert not psutil.pid_exists(stray.pid)  # killed and reaped
        assert bystander.poll() is None
    finally:
        stray.kill()
        bystander.kill()
        bystander.wait()
