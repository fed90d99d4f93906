"""Soak campaigns on Spark: `mirrorchaos soak` fans runs of a scenario out as
Spark tasks, each a `mirrorchaos run` subprocess with its own seed in a temporary
directory of its executor's, sent back whole to the driver, which stores it; then it
merges the stored results and histories with Spark DataFrames into one campaign report
(Parquet, JSON, HTML, terminal). `standalone` starts a local Spark standalone cluster
to try it on.

PySpark is the ``soak`` extra (``pip install 'mirrorchaos[soak]'``); nothing here imports
it until a Spark session is needed.
"""

from reports.soak.campaign import Campaign, CampaignOptions, plan_campaign, run_campaign
from reports.soak.merge import CampaignReport, merge_campaign
from reports.soak.task import RunTask, TaskRecord, run_task

__all__ = [
    "Campaign",
    "CampaignOptions",
    "CampaignReport",
    "RunTask",
    "TaskRecord",
    "merge_campaign",
    "plan_campaign",
    "run_campaign",
    "run_task",
]
