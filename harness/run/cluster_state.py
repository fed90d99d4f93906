"""``cluster-state`` lines (docs/history-format.md): what each running node's management
API reports of every queue at a quiet moment, for the checker's cross-node agreement
checks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from faults.management import Management, ManagementError
from harness.workload import Recorder

PROCESS = "harness"


def queue_states(listing: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``GET /api/queues/%2F`` as the history's ``queues``: each queue's master,
    mirrors, synchronised mirrors and message count, and the node's own replica
    (``local``) when the node reports one."""
    states: dict[str, dict[str, Any]] = {}
    for queue in listing:
        state = {"master": queue.get("node"), "mirrors": list(queue.get("slave_nodes") or []),
                 "synchronised": list(queue.get("synchronised_slave_nodes") or []),
                 "messages": queue.get("messages")}
        local = queue.get("local")
        if isinstance(local, Mapping):
            state["local"] = {"role": local.get("role"), "messages": local.get("messages")}
        states[str(queue.get("name"))] = state
    return states


def record_cluster_state(recorder: Recorder, phase: str,
                         endpoints: Mapping[str, Management]) -> None:
    """One ``cluster-state`` line per node: ``ok`` with its queues, or ``fail`` with
    why it could not be asked."""
    for node, management in endpoints.items():
        try:
            listing = management.call("GET", "/api/queues/%2F")
        except ManagementError as exc:
            recorder.record(PROCESS, "cluster-state", "fail", node=node, phase=phase,
                            error=str(exc))
            continue
        if not isinstance(listing, list):
            recorder.record(PROCESS, "cluster-state", "fail", node=node, phase=phase,
                            error=f"GET /api/queues/%2F answered {listing!r}, not a list")
            continue
        recorder.record(PROCESS, "cluster-state", "ok", node=node, phase=phase,
                        queues=queue_states(q for q in listing if isinstance(q, Mapping)))
