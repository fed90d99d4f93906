"""Cluster runtimes: the same cluster as local processes or as Docker
containers, behind the `Runtime` / `Cluster` protocols of `harness.runtime.base`."""

from .base import Cluster, ClusterSpec, ClusterStartError, Runtime, new_run_id
from .docker import DockerCluster, DockerRuntime
from .process import ProcessCluster, ProcessRuntime

__all__ = [
    "Cluster",
    "ClusterSpec",
    "ClusterStartError",
    "DockerCluster",
    "DockerRuntime",
    "ProcessCluster",
    "ProcessRuntime",
    "Runtime",
    "new_run_id",
]
