"""Nemeses: faults a run injects and ends (SPEC §3.2)."""

from . import grudges
from .core import HEAL, Compose, InvalidOp, Nemesis, NoopNemesis, Op, UnsupportedOp
from .partition import PartitionNemesis
from .process import ProcessNemesis
from .view import ClusterView, ManagementView

__all__ = [
    "HEAL",
    "ClusterView",
    "Compose",
    "InvalidOp",
    "ManagementView",
    "Nemesis",
    "NoopNemesis",
    "Op",
    "PartitionNemesis",
    "ProcessNemesis",
    "UnsupportedOp",
    "grudges",
]
