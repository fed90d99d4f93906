"""A Spark standalone cluster on this machine, from the installed PySpark: a master and
N workers, each worker with directories of its own (work, local, logs, TMPDIR) under one
root. It is how `./dev -s soak-cluster` and the cluster tests try soaks on a real
cluster (separate executor JVMs that share nothing with the driver but the network)
without a Spark installation.

Every JVM starts in a session of its own, so stopping one ends its process group (a
worker and the executors it launched). What the runs on a worker started lives on in
sessions of its own; it is found by its TMPDIR, under the root, and ended too: `stop`
leaves nothing running, which `leftovers` checks.

    python -m reports.soak.standalone --root DIR -- mirrorchaos soak --spark-master {master} ...

starts a cluster, runs the command with ``{master}`` replaced by its URL, stops the
cluster whatever happens, and fails when anything of it is left running.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from faults.ports import free_port
from reports.soak.task import end_strays

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
# a JVM's start on a busy two-core machine takes seconds; registration a few more
START_TIMEOUT = 180.0
# a run interrupted by its worker's death winds its cluster down and stores its history
WIND_DOWN = 45.0


def spark_home() -> Path:
    """The PySpark package directory: it carries ``bin/spark-class`` and the jars."""
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Worker:
    directory: Path
    process: subprocess.Popen[bytes]
    web_port: int

    @property
    def tmp(self) -> Path:
        """Its executors' (and so its runs') TMPDIR."""
        return self.directory / "tmp"


@dataclass
class Standalone:
    root: Path
    master_url: str
    web_url: str
    master: subprocess.Popen[bytes]
    workers: list[Worker] = field(default_factory=list)

    def alive_workers(self) -> list[dict[str, object]]:
        """The workers the master lists as alive (its web UI's JSON)."""
        try:
            with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as answer:
                doc = json.load(answer)
        except (OSError, ValueError):
            return []
        return [w for w in doc.get("workers", []) if w.get("state") == "ALIVE"]

    def kill_worker(self, index: int) -> None:
        """SIGKILL a worker with its executors (its process group), as a lost machine.
        The executors' Python daemon has a group of its own and ends its workers when
        its executor's pipe closes; their runs then hear of it (task.py)."""
        _kill_group(self.workers[index].process, signal.SIGKILL)

    def kill_executor(self, index: int) -> None:
        """SIGKILL a worker's executor JVMs only, as a crashed executor: the worker
        lives on and launches the application another."""
        for child in psutil.Process(self.workers[index].process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if EXECUTOR_CLASS in " ".join(child.cmdline()):
                    child.kill()

    def stop(self) -> list[str]:
        """Stop every JVM, let the runs they leave wind down, end what is still
        running under the root; returns what is left (nothing, unless a process
        escaped)."""
        for process in [w.process for w in self.workers] + [self.master]:
            _kill_group(process, signal.SIGTERM)
        for process in [w.process for w in self.workers] + [self.master]:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                _kill_group(process, signal.SIGKILL)
                process.wait()
        deadline = time.monotonic() + WIND_DOWN
        while self.leftovers() and time.monotonic() < deadline:
            time.sleep(0.5)
        end_strays(self.root)
        return self.leftovers()

    def leftovers(self) -> list[str]:
        """Live processes of this cluster: a JVM or Python process whose command line
        names the root, or one whose TMPDIR lies under it (runs and their nodes)."""
        found = []
        ours = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
        for proc in psutil.process_iter(["pid", "cmdline"]):
            if proc.info["pid"] in ours:  # the command that started the cluster
                continue
            with contextlib.suppress(psutil.Error):
                line = " ".join(proc.info["cmdline"] or ())
                tmpdir = proc.environ().get("TMPDIR", "/")
                if proc.status() != psutil.STATUS_ZOMBIE and (
                        str(self.root) in line or Path(tmpdir).is_relative_to(self.root)):
                    found.append(f"{proc.info['pid']} {line}")
        return found


def _kill_group(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def _start(root: Path, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / f"{name}.log").open("wb") as log:
        return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)


def start_standalone(root: Path, workers: int = 2, cores: int = 1,
                     memory: str = "1g") -> Standalone:
    """A master and ``workers`` workers of ``cores`` cores each, registered with it;
    stopped again if they do not all register in time."""
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    home = spark_home()
    base = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": HOST,
            "SPARK_LOG_DIR": str(root / "logs"), "SPARK_PID_DIR": str(root / "pids"),
            "SPARK_DAEMON_MEMORY": "512m", "TMPDIR": str(root / "tmp")}
    (root / "tmp").mkdir(exist_ok=True)
    port, web_port = free_port(HOST), free_port(HOST)
    master = _start(root, "master", [MASTER_CLASS, "--host", HOST, "--port", str(port),
                                     "--webui-port", str(web_port)], base)
    cluster = Standalone(root, f"spark://{HOST}:{port}", f"http://{HOST}:{web_port}", master)
    try:
        for index in range(workers):
            directory = root / f"worker-{index}"
            for sub in ("work", "local", "tmp"):
                (directory / sub).mkdir(parents=True, exist_ok=True)
            env = {**base, "SPARK_WORKER_DIR": str(directory / "work"),
                   "SPARK_LOCAL_DIRS": str(directory / "local"),
                   "TMPDIR": str(directory / "tmp")}
            worker_web = free_port(HOST)
            process = _start(root, f"worker-{index}", [
                WORKER_CLASS, cluster.master_url, "--host", HOST, "--cores", str(cores),
                "--memory", memory, "--work-dir", str(directory / "work"),
                "--webui-port", str(worker_web)], env)
            cluster.workers.append(Worker(directory, process, worker_web))
        deadline = time.monotonic() + START_TIMEOUT
        while len(cluster.alive_workers()) < workers:
            ended = [p for p in [master] + [w.process for w in cluster.workers]
                     if p.poll() is not None]
            if ended or time.monotonic() > deadline:
                raise RuntimeError(f"the standalone cluster did not come up (logs in "
                                   f"{root / 'logs'}): {len(cluster.alive_workers())} of "
                                   f"{workers} workers registered")
            time.sleep(0.5)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextlib.contextmanager
def standalone_cluster(root: Path, workers: int = 2, cores: int = 1) -> Iterator[Standalone]:
    """A running cluster; stopped on the way out, and an error if anything is left."""
    cluster = start_standalone(root, workers, cores)
    try:
        yield cluster
    finally:
        left = cluster.stop()
        if left:
            raise RuntimeError("left running after the cluster's stop: " + "; ".join(left))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.soak.standalone",
                                     description="Run a command against a Spark standalone "
                                     "cluster started for it, then stop the cluster.")
    parser.add_argument("--root", type=Path, required=True,
                        help="the cluster's directories (workers, logs, TMPDIRs)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="per worker")
    parser.add_argument("command", nargs="+", help="{master} is replaced by the master URL")
    args = parser.parse_args(argv)
    with standalone_cluster(args.root, args.workers, args.cores) as cluster:
        print(f"standalone cluster {cluster.master_url}: {len(cluster.workers)} workers "
              f"registered (web UI {cluster.web_url}, logs in {args.root / 'logs'})",
              file=sys.stderr, flush=True)
        command = [part.replace("{master}", cluster.master_url) for part in args.command]
        # the driver's temporary files lie under the root too, so the stop's check
        # covers whatever the command left
        driver_tmp = args.root.resolve() / "driver-tmp"
        driver_tmp.mkdir(exist_ok=True)
        done = subprocess.run(command, env={**os.environ, "TMPDIR": str(driver_tmp)},
                              check=False)
    print("standalone cluster stopped, nothing left running", file=sys.stderr, flush=True)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
