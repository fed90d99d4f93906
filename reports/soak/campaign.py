"""A soak campaign: N runs of each of its scenarios, each a Spark job of one task with a
seed derived from the campaign's root seed, then the merge.

Layout, under ``STORE/soak/<timestamp>/`` (``STORE/soak/latest`` points at the newest)::

    campaign.json                 the plan: options, root seed, each run's seed and command
    runs/<NNN>-seed<S>/task.json  what the task saw (status, exit code, time, replay command)
    runs/<NNN>-seed<S>/run.log    the run's output
    runs/<NNN>-seed<S>/<scenario>/<timestamp>-seed<S>/   the run, as `mirrorchaos run` stores it
    runs.parquet/ anomalies.parquet/ faults.parquet/ latency.parquet/   the merge (`merge.py`)
    report.json  report.html

Isolation: a run's nodes, toxiproxy and ports are its own (the process runtime takes
free ports per run; the Docker runtime a network per run id), its run id includes its
seed, and it runs in a temporary directory of its executor's. The executor returns the
run as its task's result and only the driver writes the store (task.py): executors
need no file system shared with it, on any master.

Each run is a job of its own, submitted from a driver thread, so one run's failed job
(its executor lost) fails only that run: it is run again with the same
seed (a replay, on whichever executor is free) up to `ATTEMPTS` times in all, then
recorded as `lost` with Spark's reasons. Every planned run ends up in the store.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from faults.seeds import derive, fresh_seed
from harness.run.store import new_campaign_dir
from reports.soak.progress import Progress
from reports.soak.task import RunTask, TaskRecord, lost_record, run_task, store_run

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

CAMPAIGN_FILE = "campaign.json"
RUNS_DIR = "runs"
# a run's start-up, drain (up to its drain timeout), check and report beyond its length
DEFAULT_TIMEOUT_MARGIN = 240.0
# a run's job, in all: the first and two more when Spark fails it (an executor lost)
ATTEMPTS = 3
# jobs in flight at once, each waiting in a driver thread; Spark's scheduler hands them
# executors as they free up
MAX_JOBS = 64


@dataclass(frozen=True)
class CampaignOptions:
    scenarios: tuple[tuple[str, int], ...]  # each scenario and how many runs of it
    duration: float
    master: str = "local[*]"
    runtime: str = "process"
    store: Path = Path("store")
    root_seed: int | None = None
    task_timeout: float | None = None  # default: duration + DEFAULT_TIMEOUT_MARGIN
    kill_grace: float = 30.0


@dataclass
class Campaign:
    options: CampaignOptions
    root_seed: int
    directory: Path
    tasks: list[RunTask] = field(default_factory=list)

    def plan_doc(self) -> dict[str, Any]:
        options = {k: str(v) if isinstance(v, Path) else v
                   for k, v in asdict(self.options).items()}
        return {"scenarios": [{"scenario": name, "runs": runs}
                              for name, runs in self.options.scenarios],
                "root_seed": self.root_seed,
                "options": options, "created": time.time(),
                "runs": [{"task": t.name, "index": t.index, "seed": t.seed,
                          "replay": t.replay} for t in self.tasks]}


def run_seed(root: int, index: int) -> int:
    """Run ``index``'s seed: its own stream under the root seed, 63 bits (a Spark long)."""
    return derive(root, "soak", index) >> 1


def plan_campaign(options: CampaignOptions) -> Campaign:
    """Seeds, directories and commands of every run; writes ``campaign.json``."""
    root = options.root_seed if options.root_seed is not None else fresh_seed()
    directory = new_campaign_dir(options.store.resolve() / "soak")
    timeout = options.task_timeout or options.duration + DEFAULT_TIMEOUT_MARGIN
    runs = [_portable(scenario) for scenario, count in options.scenarios
            for _ in range(count)]
    campaign = Campaign(options, root, directory)
    width = max(3, len(str(len(runs) - 1)))
    for index, scenario in enumerate(runs):
        seed = run_seed(root, index)
        task_dir = directory / RUNS_DIR / f"{index:0{width}d}-seed{seed}"
        campaign.tasks.append(RunTask(index, scenario, seed, options.runtime,
                                      options.duration, str(task_dir), timeout,
                                      options.kill_grace, _scenario_text(scenario)))
    (directory / CAMPAIGN_FILE).write_text(json.dumps(campaign.plan_doc(), indent=2) + "\n",
                                           encoding="utf-8")
    return campaign


def _portable(scenario: str) -> str:
    """A scenario file by its absolute path, for the replay command."""
    if scenario.endswith(".toml") or Path(scenario).exists():
        return str(Path(scenario).resolve())
    return scenario


def _scenario_text(scenario: str) -> str | None:
    """A scenario file's contents, to send with its runs (None for a built-in)."""
    path = Path(scenario)
    return path.read_text(encoding="utf-8") if path.is_absolute() else None


def run_campaign(campaign: Campaign, spark: SparkSession,
                 console: Console | None = None) -> list[TaskRecord]:
    """Every run of the campaign: `run_tasks`."""
    return run_tasks(spark, campaign.tasks, console)


def run_tasks(spark: SparkSession, tasks: list[RunTask],
              console: Console | None = None) -> list[TaskRecord]:
    """Every run as a Spark job of its own; each run is written into the store as its
    row comes back, its progress shown on ``console``. Returns the records in the
    tasks' order. Interrupted, it cancels the jobs still going (their runs are
    interrupted in turn) and raises."""
    context = spark.sparkContext
    stopping = threading.Event()
    records = []
    pool = ThreadPoolExecutor(min(len(tasks), MAX_JOBS),
                              thread_name_prefix="mirrorchaos-soak")
    progress = Progress(console or Console(stderr=True, quiet=True), len(tasks),
                        lambda: running_tasks(context))
    try:
        with progress:
            futures = [pool.submit(_run_job, context, task, stopping, progress)
                       for task in tasks]
            for future in as_completed(futures):
                record = store_run(future.result())
                records.append(record)
                progress.finished(record)
    except BaseException:
        stopping.set()
        context.cancelAllJobs()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return sorted(records, key=lambda r: int(r["index"]))


def _run_job(context: SparkContext, task: RunTask, stopping: threading.Event,
             progress: Progress) -> TaskRecord:
    """One run's job, again with the same seed while Spark fails it, then `lost`. The
    task never raises, so a failed job is Spark's: an executor lost, or its result."""
    reasons: list[str] = []
    for attempt in range(1, ATTEMPTS + 1):
        try:
            rows = (context.parallelize([task], 1).setName(f"mirrorchaos soak {task.name}")
                    .map(run_task).collect())
        except Exception as exc:
            if stopping.is_set():
                raise
            reasons.append(f"attempt {attempt}: {spark_error(exc)}")
            if attempt < ATTEMPTS:
                progress.retrying(task, attempt, ATTEMPTS, reasons[-1])
            continue
        return {**rows[0], "attempts": attempt, "retries": reasons}
    return {**lost_record(task, reasons), "attempts": ATTEMPTS, "retries": reasons}


def spark_error(exc: Exception) -> str:
    """The first line of why Spark failed a job (a Java exception's message), without
    the stack trace behind it."""
    java = getattr(exc, "java_exception", None)
    try:
        text = str(java.getMessage()) if java is not None else str(exc)
    except Exception:  # the JVM is gone: what Python was told
        text = str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0][:500]


def running_tasks(context: SparkContext) -> int:
    """Tasks running now, by Spark's status tracker."""
    tracker = context.statusTracker()
    stages = (tracker.getStageInfo(stage) for stage in tracker.getActiveStageIds())
    return sum(stage.numActiveTasks for stage in stages if stage is not None)
