"""Cluster metadata replicated between nodes (see docs/cluster-design.md)."""
