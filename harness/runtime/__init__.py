"""Cluster runtimes (SPEC §4.1): the same cluster as local processes or as Docker
containers, behind the `Runtime` / `Cluster` protocols of `harness.runtime.base`."""

from .base import Cluster, ClusterSpec, ClusterStartError, Runtime, new_run_id

__all__ = ["Cluster", "ClusterSpec", "ClusterStartError", "Runtime", "new_run_id"]
