"""One run of a soak campaign, as a Spark task runs it: ``mirrorchaos run`` as a
subprocess (the same code path as the command line) with the run's own seed and store
directory, under a time limit.

A run that hangs past its limit is interrupted (SIGINT to its process group, so the
harness removes its cluster and stores what it has), then killed with everything it
started; a run that crashes or cannot start is recorded too. A run whose task is
interrupted, or whose worker dies (the campaign was stopped), is interrupted as well.
Either way the task returns a record and writes it as ``task.json`` in its directory:
no run is dropped, and no run can hold the campaign up.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
_SIG_DFL = 0  # signal(2): the default disposition
TASK_FILE = "task.json"
TMP_DIR = "tmp"  # the run's TMPDIR, in its task directory
LOG_FILE = "run.log"
# what the task saw; the verdict itself is the run's results.json
STATUSES = ("done", "timeout", "harness-failure", "bad-input", "crashed", "error")
_EXIT_STATUS = {0: "done", 1: "done", 2: "done", 254: "bad-input", 255: "harness-failure"}

TaskRecord = dict[str, Any]


@dataclass(frozen=True)
class RunTask:
    """What one Spark task runs. ``task_dir`` is the run's own store (``--store``)."""

    index: int
    scenario: str  # a built-in name or a TOML file, as `mirrorchaos run` takes it
    seed: int
    runtime: str
    duration: float  # --time-limit
    task_dir: str
    timeout: float  # seconds before the run is interrupted
    kill_grace: float = 30.0  # seconds between the interrupt and SIGKILL

    @property
    def name(self) -> str:
        return Path(self.task_dir).name

    def run_args(self, store: str | None = None) -> list[str]:
        args = ["run", self.scenario, "--seed", str(self.seed), "--runtime", self.runtime,
                "--time-limit", f"{self.duration:g}"]
        return args + (["--store", store, "--no-live"] if store is not None else [])

    @property
    def replay(self) -> str:
        """The command that replays this run (same scenario, seed, runtime, length)."""
        return shlex.join(["mirrorchaos", *self.run_args()])

    def command(self) -> list[str]:
        return [sys.executable, "-m", "harness.cli", *self.run_args(self.task_dir)]


def run_task(task: RunTask) -> TaskRecord:
    """Run it, wait at most ``task.timeout``, record what happened; never raises."""
    task_dir = Path(task.task_dir)
    started, wall = time.monotonic(), time.time()
    status, code, error = "error", None, None
    try:
        task_dir.mkdir(parents=True, exist_ok=True)
        with (task_dir / LOG_FILE).open("wb") as log:
            # the run's temporary files (its nodes' data directories) stay in its
            # directory, and every process it starts can be told apart by its TMPDIR
            tmp = task_dir / TMP_DIR
            tmp.mkdir(exist_ok=True)
            process = subprocess.Popen(task.command(), stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       env={**os.environ, "TMPDIR": str(tmp)},
                                       preexec_fn=_interrupt_when_orphaned)
            try:
                code = process.wait(timeout=task.timeout)
                status = _EXIT_STATUS.get(code, "crashed")
            except subprocess.TimeoutExpired:
                status = "timeout"
                error = f"still running after {task.timeout:g} s: interrupted"
                code = _stop(process, task.kill_grace)
                if code is None:
                    error += f", killed after {task.kill_grace:g} s more"
            except BaseException:  # the campaign is interrupted: so is its run
                _stop(process, task.kill_grace)
                raise
            finally:
                _end_strays(tmp)
    except Exception as exc:  # the record must still be made
        error = f"{type(exc).__name__}: {exc}"
    run_dir = _run_dir(task_dir, task.seed)
    if status == "done" and (run_dir is None or not (run_dir / "results.json").exists()):
        status, error = "crashed", f"exit {code} without a results.json"
    if status == "crashed" and error is None:
        error = f"exit {code}: " + _log_tail(task_dir / LOG_FILE)
    record: TaskRecord = {
        "task": task.name, **asdict(task), "status": status, "exit_code": code,
        "elapsed_s": round(time.monotonic() - started, 3), "started": wall,
        "run_dir": None if run_dir is None else str(run_dir), "replay": task.replay,
        "error": error, "host": socket.gethostname(),
    }
    with contextlib.suppress(OSError):
        (task_dir / TASK_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def _interrupt_when_orphaned() -> None:
    """In the run's process, before it starts: SIGINT when the task's worker dies (a
    campaign stopped by its driver takes its workers down without a word), so that the
    run winds its cluster down and stores its history rather than going on alone.
    SIGINT goes back to its default first: a campaign started in the background
    (`nohup ... &`, a shell without job control) has it ignored, and the run would
    inherit that and never hear of the worker's death."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal(signal.SIGINT, _SIG_DFL)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT)


def _stop(process: subprocess.Popen[bytes], grace: float) -> int | None:
    """SIGINT to the run's process group (the harness winds its cluster down and stores
    the run); after ``grace``, SIGKILL to it. What it started and left running (nodes
    run in sessions of their own) is `_end_strays`'s. Returns the exit code if the run
    ended on the interrupt."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGINT)
    try:
        return process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return None


def _end_strays(tmp: Path) -> None:
    """Kill what the run started and left running, however it ended (a node in a
    session of its own, one whose start raced the run's own stop, what a SIGKILLed run
    left): every process whose TMPDIR is the run's."""
    strays = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if Path(proc.environ().get("TMPDIR", "/")).is_relative_to(tmp):
                proc.kill()
                strays.append(proc)
    psutil.wait_procs(strays, timeout=5)


def _run_dir(task_dir: Path, seed: int) -> Path | None:
    """The run's directory, ``<task_dir>/<scenario>/<timestamp>-seed<N>``."""
    found = sorted(p for p in task_dir.glob(f"*/*-seed{seed}*")
                   if p.is_dir() and not p.parent.is_symlink() and p.parent.name != TMP_DIR)
    return found[-1] if found else None


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "no log"
    return " | ".join(text.strip().splitlines()[-lines:]) or "empty log"
