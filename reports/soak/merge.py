"""The campaign merge, all in Spark DataFrames: every run's ``task.json``,
``results.json`` and ``history.jsonl`` is read by Spark from the campaign's store and
joined on the run's task directory.

* ``runs``: one row per run — scenario, seed, what the task saw (status, exit code,
  the worker and executor it ran on, how many times its job was run), the verdict from
  its results.json (``unknown`` when there is none: a run that timed out or crashed
  before its check, or was lost with its executor), counts, and the replay command. A
  run is *failing* unless it finished and its verdict is valid.
* ``anomalies``: messages per fault kind, anomaly kind and standing (violation or
  caveat), from the anomalies' own lists of the faults in force during each message's
  life; an anomaly with several faults in force counts under each kind, one with none
  under ``(none)``.
* ``faults``: faults injected per kind, and in how many runs.
* ``latency``: confirm latency per run, computed from the histories — for every
  confirmed publish, the first ``confirm ok`` time minus the first ``publish invoke``
  time of the same message id — and ``percentile_approx`` over all of them across the
  campaign and per scenario (not an average of the runs' own percentiles).

Written as Parquet (``runs``, ``anomalies``, ``faults``, ``latency``) and as
``report.json``; the aggregates are small and are what the HTML and terminal reports
show.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reports.soak.campaign import CAMPAIGN_FILE, RUNS_DIR
from reports.soak.task import TASK_FILE

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

REPORT_JSON = "report.json"
PERCENTILES = (0.5, 0.9, 0.99, 0.999)
PERCENTILE_ACCURACY = 10_000
LATENCY_SOURCE = ("histories: first confirm ok minus first publish invoke of each confirmed "
                  "message id, percentile_approx over every message of every run")
COUNT_COLUMNS = ("attempted", "confirmed", "delivered", "lost", "caveat_lost", "duplicated",
                 "duplicated_unflagged", "unexpected", "reordered", "recovered")


@dataclass
class CampaignReport:
    directory: Path
    plan: dict[str, Any] | None
    runs: list[dict[str, Any]]
    anomalies: list[dict[str, Any]]
    faults: list[dict[str, Any]]
    latency: dict[str, Any]  # overall, per scenario, histogram
    verdicts: dict[str, int] = field(default_factory=dict)

    @property
    def failing(self) -> list[dict[str, Any]]:
        return [r for r in self.runs if r["failing"]]

    @property
    def verdicts_per_scenario(self) -> dict[str, dict[str, int]]:
        """Runs per verdict of each scenario, in the campaign's order."""
        per: dict[str, dict[str, int]] = {}
        for r in self.runs:
            counts = per.setdefault(str(r["scenario"]), {})
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        return per

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["directory"] = str(self.directory)
        doc["verdicts_per_scenario"] = self.verdicts_per_scenario
        doc["failing"] = [{k: r[k] for k in ("task", "scenario", "seed", "status", "verdict",
                                            "error", "replay", "run_dir", "worker")}
                          for r in self.failing]
        return doc


# -- schemas: only what the merge reads, so runs of any shape line up ----------------


def _schemas() -> tuple[Any, Any, Any]:
    from pyspark.sql import types as T

    S, L, D = T.StringType(), T.LongType(), T.DoubleType()

    def struct(**fields: Any) -> T.StructType:
        return T.StructType([T.StructField(name, kind) for name, kind in fields.items()])

    task = struct(task=S, index=L, scenario=S, seed=L, runtime=S, duration=D, timeout=D,
                  status=S, exit_code=L, elapsed_s=D, run_dir=S, replay=S, error=S, host=S,
                  worker=S, executor=S, attempts=L, spark_attempt=L)
    fault = struct(id=S, kind=S, start=D, end=D)
    anomaly = struct(kind=S, caveat=S, queue=S, count=L, faults=T.ArrayType(fault))
    results = struct(
        run_id=S, scenario=S, seed=L, runtime=S,
        valid=S,  # true, false or "unknown": read as text
        error=S, harness_error=S, counts=T.MapType(S, L),
        violations=T.ArrayType(anomaly), caveats=T.ArrayType(anomaly),
        latency_ms=struct(confirm_p50=D, confirm_p90=D, confirm_p99=D, confirm_p999=D,
                          confirm_mean=D, confirm_max=D, confirms=L),
        throughput=struct(confirms_per_s=D, deliveries_per_s=D),
        availability=struct(fraction=D), faults=T.ArrayType(fault))
    history = struct(time=D, process=S, op=S, type=S, msg=S, queue=S, node=S)
    return task, results, history


# -- reading -----------------------------------------------------------------------


def _read(spark: SparkSession, directory: Path, pattern: str, schema: Any,
          multiline: bool) -> DataFrame:
    """Every file matching ``runs/<pattern>``, with the run's task directory as
    ``task``; empty (with the schema) when none exists yet."""
    from pyspark.sql import functions as F

    runs = directory / RUNS_DIR
    if not any(runs.glob(pattern)):
        frame = spark.createDataFrame([], schema)
    else:
        frame = (spark.read.schema(schema).option("multiLine", multiline)
                 .json(str(runs / pattern)))
    task = F.regexp_extract(F.input_file_name(), rf"/{RUNS_DIR}/([^/]+)/", 1)
    return frame.withColumn("_task", task)


def read_tasks(spark: SparkSession, directory: Path) -> DataFrame:
    task, _, _ = _schemas()
    return _read(spark, directory, f"*/{TASK_FILE}", task, True).drop("_task")


def read_results(spark: SparkSession, directory: Path) -> DataFrame:
    _, results, _ = _schemas()
    return _read(spark, directory, "*/*/*-seed*/results.json", results, True)


def read_histories(spark: SparkSession, directory: Path) -> DataFrame:
    _, _, history = _schemas()
    return _read(spark, directory, "*/*/*-seed*/history.jsonl", history, False)


# -- the merge ---------------------------------------------------------------------


def merge_frames(spark: SparkSession, directory: Path) -> dict[str, DataFrame]:
    """The merged tables; ``_results`` and ``_latency`` are cached inputs the caller
    unpersists when done."""
    from pyspark.sql import functions as F

    tasks = read_tasks(spark, directory)
    results = read_results(spark, directory).cache()
    histories = read_histories(spark, directory)

    latency_per_message = _message_latency(histories).cache()
    per_run_latency = latency_per_message.groupBy("_task").agg(
        F.count("*").alias("confirms"),
        _percentiles("latency_ms").alias("p"),
        F.max("latency_ms").alias("max_ms"))
    per_run_latency = per_run_latency.select(
        "_task", "confirms", *[F.col("p")[i].alias(_pname(q)) for i, q in enumerate(PERCENTILES)],
        "max_ms")

    r = results.alias("r")
    verdict = (F.when(F.col("r.valid") == "true", "valid")
               .when(F.col("r.valid") == "false", "invalid").otherwise("unknown"))
    counts = [F.coalesce(F.col("r.counts")[name], F.lit(0)).alias(name)
              for name in COUNT_COLUMNS]
    runs = (tasks.alias("t")
            .join(r, F.col("t.task") == F.col("r._task"), "left")
            .join(per_run_latency.alias("l"), F.col("t.task") == F.col("l._task"), "left")
            .select(
                F.col("t.task"), F.col("t.index"),
                F.coalesce(F.col("r.scenario"), F.col("t.scenario")).alias("scenario"),
                F.col("t.seed"), F.col("t.runtime"), F.col("t.duration"),
                F.col("t.status"), F.col("t.exit_code"), verdict.alias("verdict"),
                *counts,
                _anomaly_total("r.violations").alias("violations"),
                _anomaly_total("r.caveats").alias("caveats"),
                F.coalesce(F.size(F.col("r.faults")), F.lit(0)).alias("faults"),
                F.col("r.latency_ms.confirm_p50").alias("results_p50_ms"),
                F.col("r.latency_ms.confirm_p99").alias("results_p99_ms"),
                F.col("l.p50_ms").alias("history_p50_ms"),
                F.col("l.p99_ms").alias("history_p99_ms"),
                F.col("r.throughput.confirms_per_s").alias("confirms_per_s"),
                F.col("r.availability.fraction").alias("availability"),
                F.col("t.elapsed_s"),
                F.coalesce(F.col("t.error"), F.col("r.harness_error"),
                           F.col("r.error")).alias("error"),
                F.col("t.replay"), F.col("t.run_dir"), F.col("t.host"), F.col("t.worker"),
                F.col("t.executor"), F.col("t.attempts"), F.col("t.spark_attempt"))
            .withColumn("failing", (F.col("status") != "done")
                        | (F.col("verdict") != "valid")))

    anomalies = _anomalies(results)
    faults = (results.select("_task", F.explode("faults").alias("f"))
              .groupBy(F.col("f.kind").alias("fault_kind"))
              .agg(F.count("*").alias("injected"), F.countDistinct("_task").alias("runs")))

    scenario_of = runs.select(F.col("task").alias("_task"), "scenario")
    with_scenario = latency_per_message.join(scenario_of, "_task", "left")
    overall = with_scenario.agg(*_latency_aggregates()).withColumn("scenario", F.lit(None))
    by_scenario = with_scenario.groupBy("scenario").agg(*_latency_aggregates())
    latency = overall.unionByName(by_scenario)
    return {"runs": runs, "anomalies": anomalies, "faults": faults, "latency": latency,
            "histogram": _histogram(latency_per_message), "_results": results,
            "_latency": latency_per_message}


def _message_latency(histories: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    published = (histories.where((F.col("op") == "publish") & (F.col("type") == "invoke")
                                 & F.col("msg").isNotNull())
                 .groupBy("_task", "msg").agg(F.min("time").alias("t0")))
    confirmed = (histories.where((F.col("op") == "confirm") & (F.col("type") == "ok")
                                 & F.col("msg").isNotNull())
                 .groupBy("_task", "msg").agg(F.min("time").alias("t1")))
    return (published.join(confirmed, ["_task", "msg"])
            .select("_task", ((F.col("t1") - F.col("t0")) * 1000.0).alias("latency_ms")))


def _percentiles(column: str) -> Column:
    from pyspark.sql import functions as F

    return F.percentile_approx(column, list(PERCENTILES), PERCENTILE_ACCURACY)


def _pname(q: float) -> str:
    return "p" + f"{q * 100:g}".replace(".", "") + "_ms"


def _latency_aggregates() -> list[Column]:
    from pyspark.sql import functions as F

    p = _percentiles("latency_ms")
    return [F.count("latency_ms").alias("confirms"),
            F.countDistinct("_task").alias("runs"),
            *[p[i].alias(_pname(q)) for i, q in enumerate(PERCENTILES)],
            F.mean("latency_ms").alias("mean_ms"), F.max("latency_ms").alias("max_ms")]


def _histogram(latency: DataFrame) -> DataFrame:
    """Confirms per latency bucket, ten buckets per decade of milliseconds."""
    from pyspark.sql import functions as F

    bucket = F.floor(F.log10(F.greatest(F.col("latency_ms"), F.lit(0.01))) * 10)
    return (latency.groupBy(bucket.alias("bucket")).agg(F.count("*").alias("confirms"))
            .select((F.pow(F.lit(10.0), F.col("bucket") / 10)).alias("from_ms"),
                    (F.pow(F.lit(10.0), (F.col("bucket") + 1) / 10)).alias("to_ms"),
                    "confirms")
            .orderBy("from_ms"))


def _anomaly_total(column: str) -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(F.aggregate(F.col(column), F.lit(0).cast("long"),
                                  lambda acc, a: acc + F.coalesce(a["count"], F.lit(0))),
                      F.lit(0))


def _anomalies(results: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    def one(column: str, standing: str) -> DataFrame:
        return (results.select("_task", "scenario", F.explode(column).alias("a"))
                .select("_task", "scenario", F.lit(standing).alias("standing"),
                        F.col("a.kind").alias("anomaly"), F.col("a.count").alias("messages"),
                        F.explode_outer("a.faults").alias("f"))
                .select("_task", "scenario", "standing", "anomaly", "messages",
                        F.coalesce(F.col("f.kind"), F.lit("(none)")).alias("fault_kind")))

    both = one("violations", "violation").unionByName(one("caveats", "caveat"))
    return (both.groupBy("fault_kind", "anomaly", "standing")
            .agg(F.sum("messages").alias("messages"), F.countDistinct("_task").alias("runs"),
                 F.sort_array(F.collect_set("scenario")).alias("scenarios"))
            .orderBy("standing", "fault_kind", "anomaly"))


# -- the campaign report -------------------------------------------------------------


def merge_campaign(spark: SparkSession, directory: str | Path, *,
                   write: bool = True) -> CampaignReport:
    """Merge the campaign in ``directory``; with ``write``, the Parquet tables and
    ``report.json`` go beside it."""
    directory = Path(directory).resolve()
    frames = merge_frames(spark, directory)
    runs = frames["runs"].orderBy("index", "task").cache()
    if write:
        for name in ("runs", "anomalies", "faults", "latency"):
            frame = runs if name == "runs" else frames[name]
            frame.coalesce(1).write.mode("overwrite").parquet(str(directory / f"{name}.parquet"))
    rows = [row.asDict(recursive=True) for row in runs.collect()]
    verdicts: dict[str, int] = {}
    for row in rows:
        verdicts[row["verdict"]] = verdicts.get(row["verdict"], 0) + 1
    latency_rows = [row.asDict() for row in frames["latency"].collect()]
    overall = next((r for r in latency_rows if r["scenario"] is None), {})
    report = CampaignReport(
        directory=directory, plan=_plan(directory), runs=rows,
        anomalies=[row.asDict(recursive=True) for row in frames["anomalies"].collect()],
        faults=[row.asDict() for row in frames["faults"].orderBy("fault_kind").collect()],
        latency={"source": LATENCY_SOURCE, "overall": overall,
                 "per_scenario": sorted((r for r in latency_rows if r["scenario"] is not None),
                                        key=lambda r: str(r["scenario"])),
                 "histogram": [row.asDict() for row in frames["histogram"].collect()]},
        verdicts=verdicts)
    if write:
        (directory / REPORT_JSON).write_text(
            json.dumps(report.to_json(), indent=2, default=str) + "\n", encoding="utf-8")
    for frame in (runs, frames["_results"], frames["_latency"]):
        frame.unpersist()
    return report


def _plan(directory: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((directory / CAMPAIGN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
