"""``cluster-state`` lines (docs/history-format.md): what each running node's management
API reports of every queue, for the checker's cross-node agreement checks.

The run records them at quiet moments (``quiet``, ``before-drain``, ``end``); a scenario
can also ask for one mid-run with the sequence step ``cluster-state`` (`SettledState`),
which first waits, within a bound, for the cluster to settle after a heal."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from faults.management import Management, ManagementError
from faults.nemesis import HEAL, Op
from harness.checker.agreement import behind_master, misplaced
from harness.scenarios.nemesis import SETTLED_STATE
from harness.workload import Recorder

PROCESS = "harness"
SETTLED_PHASE = "settled"  # its phases are settled-1, settled-2, ...
# How long a settled snapshot waits for the nodes to agree: well past an autoheal
# restart or a paused minority's resume, short enough not to swallow the next step.
SETTLE_SECONDS = 8.0
# How long a quiet moment's snapshot waits for the replicas' counts to agree.
QUIET_SETTLE_SECONDS = 3.0

Reports = dict[str, dict[str, dict[str, Any]] | str]  # node -> queues, or why not asked


def queue_states(listing: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``GET /api/queues/%2F`` as the history's ``queues``: each queue's master,
    mirrors, synchronised mirrors and message count, whether it is exclusive, and the
    node's own replica (``local``) when the node reports one."""
    states: dict[str, dict[str, Any]] = {}
    for queue in listing:
        state = {"master": queue.get("node"), "mirrors": list(queue.get("slave_nodes") or []),
                 "synchronised": list(queue.get("synchronised_slave_nodes") or []),
                 "messages": queue.get("messages"),
                 "policy": dict(queue.get("effective_policy_definition") or {})}
        if queue.get("exclusive"):
            state["exclusive"] = True  # on its connection's node alone, never mirrored
        local = queue.get("local")
        if isinstance(local, Mapping):
            state["local"] = {"role": local.get("role"), "messages": local.get("messages")}
        states[str(queue.get("name"))] = state
    return states


def ask_cluster_state(endpoints: Mapping[str, Management]) -> Reports:
    """Each node's queues, or the reason it could not be asked."""
    reports: Reports = {}
    for node, management in endpoints.items():
        try:
            listing = management.call("GET", "/api/queues/%2F")
        except ManagementError as exc:
            reports[node] = str(exc)
            continue
        if not isinstance(listing, list):
            reports[node] = f"GET /api/queues/%2F answered {listing!r}, not a list"
            continue
        reports[node] = queue_states(q for q in listing if isinstance(q, Mapping))
    return reports


def write_cluster_state(recorder: Recorder, phase: str, reports: Reports) -> None:
    """One ``cluster-state`` line per node: ``ok`` with its queues, or ``fail`` with
    why it could not be asked."""
    for node, report in reports.items():
        if isinstance(report, str):
            recorder.record(PROCESS, "cluster-state", "fail", node=node, phase=phase,
                            error=report)
        else:
            recorder.record(PROCESS, "cluster-state", "ok", node=node, phase=phase,
                            queues=report)


def record_cluster_state(recorder: Recorder, phase: str, endpoints: Mapping[str, Management],
                         *, settle_s: float = QUIET_SETTLE_SECONDS, poll: float = 0.1) -> None:
    """A quiet moment's snapshot, once every synchronised mirror holds what its master
    holds (`replicas_agree`) or ``settle_s`` has passed: the last acks of a drain reach
    the mirrors a moment after the master, and a snapshot taken in between would show a
    difference no broker bug made. A mirror that really diverged still differs then."""
    deadline = time.monotonic() + settle_s
    reports = ask_cluster_state(endpoints)
    while not replicas_agree(reports) and time.monotonic() < deadline:
        time.sleep(poll)
        reports = ask_cluster_state(endpoints)
    write_cluster_state(recorder, phase, reports)


def replicas_agree(reports: Reports) -> bool:
    """Every mirror a queue's master lists as synchronised reports as many messages in
    its own copy as the master's copy holds."""
    views = {n: v for n, v in reports.items() if not isinstance(v, str)}
    return not any(behind_master(name, state, views)
                   for node, queues in views.items() for name, state in queues.items()
                   if state.get("master") == node)


def settled(reports: Reports, queues: Collection[str] = (), *,
            answering: bool = False) -> bool:
    """Every node answered (or, with ``answering``, those that did: a paused minority
    does not), all name the same queues with the same master and mirrors (message
    counts may differ while clients work), and each of ``queues`` has a replica on every
    node its policy, as its master reports it, covers, and none the policy does not
    allow."""
    views = {n: v for n, v in reports.items() if not isinstance(v, str)}
    if not views or (len(views) < len(reports) and not answering):
        return False
    shapes = {tuple(sorted((name, q.get("master"), tuple(sorted(q.get("mirrors") or ())))
                           for name, q in view.items()))
              for view in views.values()}
    if len(shapes) != 1:
        return False
    shape = next(iter(views.values()))
    policies = {q: shape[q].get("policy") or {} for q in queues if q in shape}
    return not misplaced(SETTLED_PHASE, views, policies)


class SettledState:
    """The ``cluster-state`` step: asks every running node until they have settled
    (`settled`: agreed, and ``queues`` placed as their policy says; with the step's
    ``answering``, those that answer: mid-partition, a paused minority does not) or
    ``settle_s`` has passed, then records what each reported as phase
    ``settled-N``. A broker that never converges after a heal (two masters for good,
    a node that lost a queue) is recorded as it stands when the wait runs out, and the
    agreement checker judges it. It is an observation, not a fault: the run writes no
    fault lines for it."""

    fs = frozenset({SETTLED_STATE, HEAL})

    def __init__(self, recorder: Recorder, endpoints: Mapping[str, Management],
                 running: Callable[[], list[str]], *, queues: Collection[str] = (),
                 settle_s: float = SETTLE_SECONDS, poll: float = 0.25) -> None:
        self.recorder = recorder
        self.queues = tuple(queues)  # whose placement by their policy is waited for
        self.endpoints = dict(endpoints)
        self.running = running
        self.settle_s = settle_s
        self.poll = poll
        self._phases = itertools.count(1)

    def setup(self) -> None:
        return None

    def teardown(self) -> None:
        return None

    def invoke(self, op: Op) -> Op:
        if op.f == HEAL:
            return op.ok({})
        answering = bool((op.value or {}).get("answering"))
        deadline = time.monotonic() + self.settle_s
        while True:
            reports = ask_cluster_state({n: self.endpoints[n] for n in self.running()})
            agreed = settled(reports, self.queues, answering=answering)
            if agreed or time.monotonic() >= deadline:
                break
            time.sleep(self.poll)
        phase = f"{SETTLED_PHASE}-{next(self._phases)}"
        write_cluster_state(self.recorder, phase, reports)
        return op.ok({"phase": phase, "settled": agreed})
