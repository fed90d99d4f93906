"""A soak campaign: N runs of each of its scenarios, each a Spark task with a seed
derived from the campaign's root seed and a store directory of its own, then the merge.

Layout, under ``STORE/soak/<timestamp>/`` (``STORE/soak/latest`` points at the newest)::

    campaign.json                 the plan: options, root seed, each run's seed and command
    runs/<NNN>-seed<S>/task.json  what the task saw (status, exit code, time, replay command)
    runs/<NNN>-seed<S>/run.log    the run's output
    runs/<NNN>-seed<S>/<scenario>/<timestamp>-seed<S>/   the run, as `mirrorchaos run` stores it
    runs.parquet/ anomalies.parquet/ faults.parquet/ latency.parquet/   the merge (`merge.py`)
    report.json  report.html

Isolation: a run's nodes, toxiproxy and ports are its own (the process runtime takes
free ports per run; the Docker runtime a network per run id), its run id includes its
seed, and its store is its own directory. On a real Spark cluster STORE must be a path
every executor and the driver see (a shared file system).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from faults.toxiproxy.rng import derive, fresh_seed
from harness.run.store import new_campaign_dir
from reports.soak.task import RunTask, TaskRecord, run_task

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CAMPAIGN_FILE = "campaign.json"
RUNS_DIR = "runs"
# a run's start-up, drain (up to its drain timeout), check and report beyond its length
DEFAULT_TIMEOUT_MARGIN = 240.0


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
                                      options.kill_grace))
    (directory / CAMPAIGN_FILE).write_text(json.dumps(campaign.plan_doc(), indent=2) + "\n",
                                           encoding="utf-8")
    return campaign


def _portable(scenario: str) -> str:
    """A scenario file by its absolute path: executors start elsewhere."""
    if scenario.endswith(".toml") or Path(scenario).exists():
        return str(Path(scenario).resolve())
    return scenario


def run_campaign(campaign: Campaign, spark: SparkSession) -> list[TaskRecord]:
    """Every run as one Spark task (one partition each). The records are small and are
    gathered once, so no later Spark action can run a run again; results and histories
    are merged from the store by `merge_campaign`."""
    tasks = campaign.tasks
    rdd = spark.sparkContext.parallelize(tasks, len(tasks))
    rdd.setName(f"mirrorchaos soak {campaign.directory.name}")
    records: list[TaskRecord] = rdd.map(run_task).collect()
    return sorted(records, key=lambda r: int(r["index"]))

