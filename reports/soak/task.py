"""One run of a soak campaign, as a Spark task runs it: ``mirrorchaos run`` as a
subprocess (the same code path as the command line) with the run's own seed, under a
time limit, in a temporary directory of the executor's own.

The executor shares no file system with the driver (a real cluster has none to share),
so the task returns the run whole, as its result row: the record of what it saw, and
the run's files, gzipped (`carried`). The driver writes them into the campaign's store
(`store_run`) in the layout `mirrorchaos run --store` gives, which the merge reads.

A run that hangs past its limit is interrupted (SIGINT to its process group, so the
harness removes its cluster and stores what it has), then killed with everything it
started; a run that crashes or cannot start is recorded too. A run whose task is
interrupted, or whose worker dies (the campaign was stopped, the machine was lost), is
interrupted as well. Either way a record comes back, or the driver makes one
(`lost_record`): no run is dropped, and no run can hold the campaign up.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from harness.run.orphan import interrupt_when_orphaned
from harness.run.store import find_run_dir

TASK_FILE = "task.json"
TMP_DIR = "tmp"  # the run's TMPDIR, in its working directory
LOG_FILE = "run.log"
SCENARIO_COPY = "scenario"  # where a run's scenario file is written, in its directory
# A run's files that always come back: what the merge reads, the run's configuration
# and the task's log of it.
CARRIED = frozenset({"results.json", "history.jsonl", "config.json", LOG_FILE})
# Any other file (node logs and events, junit.xml, report.html) comes back when it
# gzips to this or less. A run's report.html inlines plotly (about 1.4 MB gzipped): too
# much to send for every run of a long campaign, and its replay command makes it again.
OPTIONAL_LIMIT = 256 * 1024
# what the task saw; the verdict itself is the run's results.json. `lost`: the driver
# never got the task's result (its executor died, on every attempt).
STATUSES = ("done", "timeout", "harness-failure", "bad-input", "crashed", "error", "lost")
_EXIT_STATUS = {0: "done", 1: "done", 2: "done", 254: "bad-input", 255: "harness-failure"}

TaskRecord = dict[str, Any]


@dataclass(frozen=True)
class RunTask:
    """What one Spark task runs. ``task_dir`` is where the driver stores the run."""

    index: int
    scenario: str  # a built-in name or a TOML file, as `mirrorchaos run` takes it
    seed: int
    runtime: str
    duration: float | None  # --time-limit (None: the scenario's own phases)
    task_dir: str
    timeout: float  # seconds before the run is interrupted
    kill_grace: float = 30.0  # seconds between the interrupt and SIGKILL
    # A scenario file's contents, sent with the task: the executor's machine need not
    # have the file (it runs its own copy; the replay names the driver's path).
    scenario_text: str | None = None

    @property
    def name(self) -> str:
        return Path(self.task_dir).name

    def run_args(self, store: str | None = None, scenario: str | None = None) -> list[str]:
        args = ["run", scenario or self.scenario, "--seed", str(self.seed), "--runtime",
                self.runtime]
        if self.duration is not None:
            args += ["--time-limit", f"{self.duration:g}"]
        return args + (["--store", store, "--no-live"] if store is not None else [])

    @property
    def replay(self) -> str:
        """The command that replays this run (same scenario, seed, runtime, length)."""
        return shlex.join(["mirrorchaos", *self.run_args()])

    def command(self, store: Path) -> list[str]:
        """The run, storing under ``store``; a scenario file is run from the copy sent
        with the task, written there first."""
        scenario = None
        if self.scenario_text is not None:
            copy = store / SCENARIO_COPY / Path(self.scenario).name
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.write_text(self.scenario_text, encoding="utf-8")
            scenario = str(copy)
        return [sys.executable, "-m", "reports.cli", *self.run_args(str(store), scenario)]


def run_task(task: RunTask) -> TaskRecord:
    """Run it in a temporary directory of its own, wait at most ``task.timeout``, and
    return its record with its files (``files``: path in the task directory to gzipped
    bytes, ``left_out``: those too large to send); never raises. The directory is gone
    when it returns."""
    work = Path(tempfile.mkdtemp(prefix=f"mirrorchaos-{task.name}-"))
    try:
        record = _run(task, work)
        record["files"], record["left_out"] = carry(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return record


def _run(task: RunTask, work: Path) -> TaskRecord:
    started, wall = time.monotonic(), time.time()
    status, code, error = "error", None, None
    try:
        with (work / LOG_FILE).open("wb") as log:
            # the run's temporary files (its nodes' data directories) stay in its
            # directory, and every process it starts can be told apart by its TMPDIR
            tmp = work / TMP_DIR
            tmp.mkdir(exist_ok=True)
            process = subprocess.Popen(task.command(work), stdin=subprocess.DEVNULL,
                                       stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True,
                                       env={**os.environ, "TMPDIR": str(tmp)},
                                       preexec_fn=interrupt_when_orphaned)
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
                end_strays(tmp)
    except Exception as exc:  # the record must still be made
        error = f"{type(exc).__name__}: {exc}"
    run_dir = find_run_dir(work, task.seed)
    if status == "done" and (run_dir is None or not (run_dir / "results.json").exists()):
        status, error = "crashed", f"exit {code} without a results.json"
    if status == "crashed" and error is None:
        error = f"exit {code}: " + _log_tail(work / LOG_FILE)
    return _record(task, status=status, exit_code=code,
                   elapsed_s=round(time.monotonic() - started, 3), started=wall,
                   run_dir=None if run_dir is None else str(run_dir.relative_to(work)),
                   error=error, **worker_identity())


def lost_record(task: RunTask, reasons: list[str]) -> TaskRecord:
    """The record of a run whose result never reached the driver: `lost`, with the
    reasons Spark gave; with no results.json its verdict is unknown."""
    return _record(task, status="lost", error="; ".join(reasons))


def _record(task: RunTask, **fields: Any) -> TaskRecord:
    unknown = dict.fromkeys(("exit_code", "elapsed_s", "started", "run_dir", "error", "host",
                             "worker", "executor", "spark_attempt"))
    return {"task": task.name, **asdict(task), **unknown, "replay": task.replay, **fields}


def worker_identity() -> dict[str, Any]:
    """Where the task runs: the host; the Spark worker, as its web UI's address (what
    the master's UI lists; unique even for several workers on one host); the
    executor's id; and Spark's attempt number of the task. A standalone worker gives its
    executors log URLs on its UI that name both worker and executor
    (``SPARK_LOG_URL_STDERR``); PySpark's task context has no executor id. Without that
    URL (local mode, other cluster managers) the worker is the host, and in local mode
    the executor is the driver."""
    url = urllib.parse.urlsplit(os.environ.get("SPARK_LOG_URL_STDERR", ""))
    host = socket.gethostname()
    attempt = None
    with contextlib.suppress(ImportError):
        from pyspark import TaskContext

        context = TaskContext.get()
        attempt = None if context is None else context.attemptNumber()
    return {"host": host, "worker": url.netloc or host,
            "executor": urllib.parse.parse_qs(url.query).get("executorId", ["driver"])[0],
            "spark_attempt": attempt}


def carry(work: Path) -> tuple[dict[str, bytes], list[str]]:
    """The run's files under ``work``, gzipped, by their path there; and the ones left
    out (too large, or unreadable), each with why. Its TMPDIR (the nodes' data) and the
    store's ``latest`` link stay behind."""
    files: dict[str, bytes] = {}
    left_out = []
    for path in sorted(work.rglob("*")):
        relative = path.relative_to(work)
        if relative.parts[0] == TMP_DIR or path.is_symlink() or not path.is_file():
            continue
        try:
            data = gzip.compress(path.read_bytes(), compresslevel=6)
        except OSError as exc:
            left_out.append(f"{relative}: {exc}")
            continue
        if path.name in CARRIED or len(data) <= OPTIONAL_LIMIT:
            files[str(relative)] = data
        else:
            left_out.append(f"{relative}: {len(data)} bytes gzipped")
    return files, left_out


def store_run(row: TaskRecord) -> TaskRecord:
    """On the driver: write a run a task returned into its task directory, its files
    where the run had them and its record as ``task.json`` (``run_dir`` made a path in
    the store). Returns the record, without the files."""
    record = {k: v for k, v in row.items() if k != "files"}
    task_dir = Path(record["task_dir"])
    task_dir.mkdir(parents=True, exist_ok=True)
    for name, data in (row.get("files") or {}).items():
        path = task_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.decompress(data))
    if record["run_dir"] is not None:
        record["run_dir"] = str(task_dir / record["run_dir"])
    (task_dir / TASK_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return record


def _stop(process: subprocess.Popen[bytes], grace: float) -> int | None:
    """SIGINT to the run's process group (the harness winds its cluster down and stores
    the run); after ``grace``, SIGKILL to it. What it started and left running (nodes
    run in sessions of their own) is `end_strays`'s. Returns the exit code if the run
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


def end_strays(tmp: Path) -> None:
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


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "no log"
    return " | ".join(text.strip().splitlines()[-lines:]) or "empty log"
