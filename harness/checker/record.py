"""Which nodes and links a fault of the harness's record touched.

Shared by the checkers that ask whether a node or its links were disturbed at some
moment: a fault without targets (nor ``grudge``) is taken to touch every node.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.checker.membership import paused_minority
from harness.checker.result import Fault
from harness.history.model import CRASH_FAULTS, PARTITION_FAULT, SHUTDOWN_FAULTS

# faults that take a node (or, for a partition, its peers) away
FAILURE_FAULTS = CRASH_FAULTS | SHUTDOWN_FAULTS | {PARTITION_FAULT}
# how long a partition must last for the nodes to see it: 4 missed heartbeats of the
# default 0.5 s tick
DETECTED_S = 2.0
# admin faults that touch neither nodes nor links
_ADMIN_FAULTS = frozenset({"policy", "sync"})


def touches(fault: Fault, node: str | None) -> bool:
    """Whether ``fault`` acted on ``node`` (an unknown node counts as touched)."""
    if node is None:
        return True
    grudge = fault.detail.get("grudge") or {}
    if not fault.targets and not grudge:
        return True
    return node in fault.targets or node in grudge or any(
        node in cut for cut in grudge.values())


def takes_away(fault: Fault, node: str | None, nodes: tuple[str, ...],
               partition_handling: str) -> bool:
    """Whether ``fault`` took ``node`` out of the cluster: under ``pause_minority`` a
    partition takes away only the nodes it pauses (the side that keeps a majority runs
    on); otherwise as `touches`."""
    if (fault.kind == PARTITION_FAULT and node is not None
            and partition_handling == "pause_minority"):
        return node in paused_minority(fault, nodes)
    return touches(fault, node)


def may_take_away(fault: Fault, node: str | None, nodes: tuple[str, ...],
                  partition_handling: str, faults: Sequence[Fault]) -> bool:
    """`takes_away`, and under ``pause_minority`` any node a partition touches once it
    lasts long enough to be detected: the nodes' detections race, and a node that loses
    a peer another still hears for a moment pauses as for a partial partition."""
    if takes_away(fault, node, nodes, partition_handling):
        return True
    return (fault.kind == PARTITION_FAULT and partition_handling == "pause_minority"
            and touches(fault, node) and detected(fault, faults))


def detected(partition: Fault, faults: Sequence[Fault]) -> bool:
    """Whether the nodes could see ``partition`` as one: it lasted the detection time
    before it ended or a crash or stop took every node it cut off (a dead node's links
    close at once: no race)."""
    end = partition.end if partition.end is not None else float("inf")
    cut_off = set(partition.targets)
    for f in faults:
        if (f.applied and f.kind in CRASH_FAULTS | SHUTDOWN_FAULTS and cut_off
                and cut_off <= set(f.targets) and partition.start <= f.start < end):
            end = f.start
    return end - partition.start >= DETECTED_S


def link_ends(fault: Fault) -> frozenset[str]:
    """The nodes at either end of the node-to-node links (``link:a->b``) ``fault`` stood
    on; client links (``client:c1->n1``) do not count."""
    ends: set[str] = set()
    for name in fault.detail.get("links") or ():
        kind, _, pair = str(name).partition(":")
        source, arrow, target = pair.partition("->")
        if kind == "link" and arrow:
            ends.update((source, target))
    return frozenset(ends)


def may_cut_apart(fault: Fault, faults: Sequence[Fault]) -> bool:
    """Whether ``fault`` may have made live nodes lose each other for the detection
    time, so that they met again as after a partition: a partition the nodes could
    detect, a pause that long, or a degradation of node links that stalls or closes
    them (any toxic but a latency, with its jitter, below the detection time). Crashes,
    stops and restarts do not: a dead node comes back as a new incarnation."""
    if not fault.applied:
        return False
    if fault.kind == PARTITION_FAULT:
        return detected(fault, faults)
    if fault.kind == "pause":
        return (math.inf if fault.end is None else fault.end) - fault.start >= DETECTED_S
    if fault.kind in FAILURE_FAULTS or fault.kind in _ADMIN_FAULTS:
        return False
    if fault.detail.get("links") and not link_ends(fault):
        return False  # client links only
    if fault.kind == "latency":
        attributes = fault.detail.get("attributes") or {}
        delay_ms = float(attributes.get("latency", 0)) + float(attributes.get("jitter", 0))
        return delay_ms / 1000 >= DETECTED_S
    return True


def is_link_fault(fault: Fault) -> bool:
    """A partition or a degradation of links (latency, bandwidth, resets, ...)."""
    return fault.applied and fault.kind not in _ADMIN_FAULTS and (
        fault.kind == PARTITION_FAULT or fault.kind not in FAILURE_FAULTS)


def is_failure(fault: Fault) -> bool:
    return fault.applied and fault.kind in FAILURE_FAULTS
