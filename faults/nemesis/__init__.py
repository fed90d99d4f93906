"""Nemeses: faults a run injects and ends."""

from . import grudges
from .admin import PolicyNemesis, QueueAdminNemesis
from .combined import combined_nemesis
from .core import HEAL, Compose, InvalidOp, Nemesis, NoopNemesis, Op, UnsupportedOp
from .forget import ForgetNemesis
from .links import LinkNemesis
from .partition import PartitionNemesis
from .process import ProcessNemesis
from .runner import Record, UnhealedError, run_schedule
from .schedule import ScheduleConfig, Step, plan
from .view import ClusterView, ManagementView

__all__ = [
    "HEAL",
    "ClusterView",
    "Compose",
    "ForgetNemesis",
    "InvalidOp",
    "LinkNemesis",
    "ManagementView",
    "Nemesis",
    "NoopNemesis",
    "Op",
    "PartitionNemesis",
    "PolicyNemesis",
    "ProcessNemesis",
    "QueueAdminNemesis",
    "Record",
    "ScheduleConfig",
    "Step",
    "UnhealedError",
    "UnsupportedOp",
    "combined_nemesis",
    "grudges",
    "plan",
    "run_schedule",
]
