"""`mirrorchaos shrink --spark-master URL`: a shrink's candidate replays fanned out as
Spark tasks, each run as a soak run is (`reports.soak.task`: the candidate's scenario
file travels with its task, the run comes back as its row, a lost executor's run is run
again) and stored under the candidate's own store on the driver."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from harness.shrink.replay import Candidate, Executed
from reports.soak.campaign import run_tasks
from reports.soak.spark import spark_session
from reports.soak.task import RunTask


class SparkReplays:
    """An `Execute` on a Spark session of its own; `close` stops it."""

    def __init__(self, master: str, seed: int, runtime: str) -> None:
        self.spark = spark_session(master, app="mirrorchaos-shrink")
        self.seed = seed
        self.runtime = runtime
        self.console = Console(stderr=True, highlight=False)

    def __call__(self, candidates: Sequence[Candidate]) -> list[Executed]:
        tasks = [RunTask(c.number, str(c.scenario_file), self.seed, self.runtime, None,
                         str(c.store), c.timeout,
                         scenario_text=c.scenario_file.read_text(encoding="utf-8"))
                 for c in candidates]
        records = run_tasks(self.spark, tasks, self.console)
        return [Executed(r["exit_code"], None if r["run_dir"] is None else Path(r["run_dir"]),
                         r["elapsed_s"] or 0.0) for r in records]

    def close(self) -> None:
        self.spark.stop()
