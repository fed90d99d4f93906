"""The Spark session of a soak: PySpark imported only here, on first use."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


class SparkUnavailable(RuntimeError):
    """PySpark (the ``soak`` extra) is not installed, or no JVM answers."""


def spark_session(master: str = DEFAULT_MASTER, app: str = "mirrorchaos-soak") -> SparkSession:
    """A session on ``master`` (``local[N]`` or a cluster URL). Tasks run each run as
    a subprocess and never raise, so a failed task is Spark's (its executor lost):
    it fails its run's job at once, and the campaign runs the job again and counts it
    (campaign.py). Spark itself still runs a task again when its worker is reported
    lost (that does not count as a task failure); the record says so
    (``spark_attempt``)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkUnavailable("PySpark is not installed: pip install 'mirrorchaos[soak]'"
                               ) from None
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.task.maxFailures", "1")
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.sql.session.timeZone", "UTC"))
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # no java, a bad master URL
        raise SparkUnavailable(f"cannot start Spark on {master}: {exc}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    return spark
