"""Cross-node agreement at the moments the harness recorded (``cluster-state``).

Per phase, every node that answered must report the same queues, and for each queue the
same master and the same mirrors (as sets): else ``disagreement``. Two masters for one
queue are ``split-brain``: a caveat under ``ignore`` partition handling, where the
design stays split until a side restarts, once the harness's record has a fault that
may have cut live nodes apart (`record.may_cut_apart`: a detected partition, a long
pause, stalled or closed node links) before the moment it was seen; a violation
otherwise — a kill, a stop or a slow link alone must not split a cluster. Besides the quiet
moments, a scenario's ``cluster-state`` step records a ``settled-N`` phase mid-run, once
the nodes agreed again after a heal or a bound ran out: a side that never rejoins (an
autoheal loser that does not restart) is still split there, however the later faults
end. At every quiet moment (nothing publishes or consumes; not at ``settled-N``), a
mirror the master lists as synchronised must hold as many messages as the master: a
broker that calls a mirror synchronised too early is caught at the ``quiet`` snapshot,
one whose sync copies too little at ``before-drain``. At ``before-drain`` the harness
has just synchronised every queue and waited for it, on a quiet cluster: a mirror still
not synchronised there is ``sync-incomplete`` (a sync that never finishes, or a mirror
that no longer receives what its master broadcasts). An exclusive queue (declared so by
a churner, or listed so) lives on its connection's node alone: it is not compared, and
any mirror of it is ``over-replicated``. Queues the workload's churners declare and
delete are compared by name, master and mirrors only, and not at a phase that a declare
or delete of theirs was in flight or within CHURN_GRACE_S of: nodes learn of such a
change a moment apart (whether a delete sticks is `undeleted`'s concern). At ``quiet``,
``before-drain`` and every ``settled-N``, every workload queue must have a replica on
each answering node that its policy then covers (by the harness's record: the header's
policy as the run's policy changes left it): else ``under-replicated`` (a node that came
back and was never made a mirror again, a dead mirror not replaced on a spare node, a
policy the master does not apply); the ``cluster-state`` step waits for that within its
bound. A node that could not be asked (``cluster-state fail``) is listed in the result's
data, and at ``quiet`` and ``before-drain`` it is ``node-unavailable``: the harness has
it running and every fault healed a while before, so it should serve (a minority that
never resumed). At every phase, no node may list a node the harness forgot
(``forget_cluster_node``: a ``forget`` fault that says who forgot it) and has not started
again as a master or mirror of a workload queue: it left every queue, and one it
mastered promoted a mirror whatever its policy (only a queue the record's replay leaves
without any mirror stays on it): else ``disagreement``. Each kind is its own checker
(one JUnit case each); their anomalies name the nodes involved where others name messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.checker.compose import Streaming
from harness.checker.membership import POLICY, Change, beyond, changes_from, covers, replayed
from harness.checker.protocol import Handler, Observer
from harness.checker.record import may_cut_apart
from harness.checker.result import Anomaly, Fault, Result
from harness.checker.run import Run
from harness.history.model import FORGET_FAULT, Event

_SPLIT_BRAIN_CAVEAT = {"ignore": "partition-split-brain"}

Report = Mapping[str, Any]  # one queue as one node reports it
CHURN_GRACE_S = 1.0  # a declare or delete reaches every running node well within this
SYNCED_PHASE = "before-drain"  # recorded right after the harness synchronised every queue
QUIET_PHASES = frozenset({"quiet", SYNCED_PHASE, "end"})  # no client at work: counts compare
# every fault healed and every node back a while: replicas are where the policy says
# (not at ``end``: the drain by promotion has just restarted a node); and mid-run, once
# the nodes settled (``cluster-state`` waits for that), on the nodes that answered
PLACED_PHASES = frozenset({"quiet", SYNCED_PHASE})
SETTLED_PREFIX = "settled-"


# The kinds the agreement pass reports, each its own checker (one JUnit case each).
KINDS = ("disagreement", "split-brain", "sync-incomplete", "under-replicated",
         "over-replicated", "node-unavailable")
SPLIT_BRAIN, NODE_UNAVAILABLE = "split-brain", "node-unavailable"


class Agreement(Streaming):
    """The agreement checks' anomalies of one kind (of `KINDS`)."""

    def __init__(self, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"agreement kind must be one of {', '.join(KINDS)}, got {kind!r}")
        self.name = kind

    def start(self, run: Run) -> Observer:
        return _Agreement(run, self.name)


class _Agreement:
    """Compares the nodes' reports; keeps the anomalies of one kind."""

    def __init__(self, run: Run, kind: str) -> None:
        self.run = run
        self.kind = kind
        self.phases: dict[str, dict[str, Mapping[str, Report]]] = {}  # phase -> node -> queues
        self.unasked: list[dict[str, Any]] = []
        self.churned: dict[str, float] = {}  # churned queue -> its latest declare or delete
        self.in_flight: set[str] = set()  # churned queues with a declare or delete unanswered
        self.changing: dict[str, set[str]] = {}  # phase -> churned queues not compared
        self.exclusive: set[str] = set()  # churned queues declared exclusive
        self.times: dict[str, float] = {}  # phase -> when it was recorded

    def handlers(self) -> Mapping[str, Handler]:
        return {"cluster-state": self.state, "declare": self.churn, "delete": self.churn}

    def churn(self, ev: Event) -> None:
        assert ev.queue is not None
        self.churned[ev.queue] = ev.time
        if ev.get("exclusive"):
            self.exclusive.add(ev.queue)
        if ev.type == "invoke":
            self.in_flight.add(ev.queue)
        else:
            self.in_flight.discard(ev.queue)

    def state(self, ev: Event) -> None:
        node, phase = ev.node or ev.process, str(ev.get("phase"))
        self.changing.setdefault(phase, set()).update(
            q for q, t in self.churned.items()
            if q in self.in_flight or ev.time - t < CHURN_GRACE_S)
        self.times.setdefault(phase, ev.time)
        if ev.type == "ok":
            self.phases.setdefault(phase, {})[node] = ev.get("queues")
        elif ev.type == "fail":
            self.unasked.append({"node": node, "phase": phase, "error": ev.get("error")})

    def finish(self) -> Result:
        run = self.run
        faults = run.timeline.faults()
        changes = changes_from(faults, (), run.header.nodes, run.header.partition_handling)
        policy_changes = [c for c in changes if c.kind == POLICY]
        caveat = _SPLIT_BRAIN_CAVEAT.get(run.header.partition_handling)
        cuts = sorted(f.start for f in faults if may_cut_apart(f, faults))
        violations: list[Anomaly] = []
        caveats: list[Anomaly] = []
        for phase in self.times:
            nodes = self.phases.get(phase, {})
            changing = self.changing.get(phase, set())
            exclusive = self.exclusive | {q for queues in nodes.values()
                                          for q, r in queues.items() if r.get("exclusive")}
            steady = {node: {q: r for q, r in queues.items()
                             if q not in changing and q not in exclusive}
                      for node, queues in nodes.items()}
            found = _compare(phase, steady, set(self.churned))
            found += _mirrored(phase, nodes, exclusive)
            if phase in PLACED_PHASES or phase.startswith(SETTLED_PREFIX):
                split = {a.queue for a in found if a.kind == SPLIT_BRAIN}  # said already
                policies = self._policies(policy_changes, self.times[phase])
                found += misplaced(phase, steady, {q: policy for q, policy in
                                                      policies.items() if q not in split})
            found += self._unavailable(phase)
            found += self._forgotten(phase, steady, faults, changes)
            for anomaly in found:
                if anomaly.kind != self.kind:
                    continue
                if (anomaly.kind == SPLIT_BRAIN and caveat is not None and cuts
                        and cuts[0] < self.times[phase]):
                    anomaly.caveat = caveat
                    caveats.append(anomaly)
                else:
                    violations.append(anomaly)
        counts = {self.kind.replace("-", "_"): len(violations) + len(caveats)}
        data: dict[str, Any] = {"cluster_state_phases": sorted(self.phases)}
        if self.unasked:
            data["cluster_state_unasked"] = self.unasked
        return Result(self.kind, not violations, counts, violations, caveats, data)


    def _unavailable(self, phase: str) -> list[Anomaly]:
        """At ``quiet`` and ``before-drain`` every fault has healed a while ago: a node
        the harness has running must serve (a paused minority resumed, an autoheal
        loser back)."""
        if phase not in PLACED_PHASES:
            return []
        return [Anomaly(NODE_UNAVAILABLE, [u["node"]],
                        f"at {phase}, after every fault healed, running node {u['node']} "
                        f"did not answer: {u['error']}")
                for u in self.unasked if u["phase"] == phase]

    def _forgotten(self, phase: str, nodes: Mapping[str, Mapping[str, Report]],
                   faults: list[Fault], changes: list[Change]) -> list[Anomaly]:
        """Workload queues that an answering node lists with a member the harness forgot
        and has not started again: as a mirror, or as the master of a queue that the
        record's replay has promoted past it."""
        time, header = self.times[phase], self.run.header
        gone = {f.targets[0]: f for f in faults if f.kind == FORGET_FAULT and f.applied
                and f.detail.get("forgotten_by") and f.start < time
                and (f.end is None or f.end > time)}
        if not gone:
            return []
        before = [c for c in changes if c.time <= time]
        found = []
        for queue in header.queues:
            listing = {n: qs[queue] for n, qs in nodes.items() if queue in qs}
            stays = replayed(header, before, queue).down_master
            stale = sorted({m for report in listing.values()
                            for m in [report.get("master"), *(report.get("mirrors") or ())]
                            if m in gone and m != stays})
            if stale:
                ids = ", ".join(gone[m].id for m in stale)
                found.append(Anomaly(
                    "disagreement", stale,
                    f"at {phase}, {', '.join(sorted(listing))} list {', '.join(stale)}, "
                    f"forgotten in {ids} and not started again, as a member of {queue}: "
                    + _listing({n: [r.get("master"), *(r.get("mirrors") or ())]
                                for n, r in listing.items()}),
                    tuple(gone[m] for m in stale), queue=queue))
        return found

    def _policies(self, changes: list[Change], time: float) -> dict[str, Mapping[str, Any]]:
        """Each workload queue's policy at ``time``, by the harness's record: the
        header's, as the run's policy changes (and their heals) left it."""
        header = self.run.header
        before = [c for c in changes if c.time <= time]
        return {queue: replayed(header, before, queue).policy for queue in header.queues}


def _compare(phase: str, nodes: Mapping[str, Mapping[str, Report]],
             churned: set[str]) -> list[Anomaly]:
    """``churned`` queues hold nothing the harness synchronises or drains: their message
    counts and sync state are not judged."""
    found: list[Anomaly] = []
    names = {node: set(queues) for node, queues in nodes.items()}
    everywhere = set.union(*names.values()) if names else set()
    lacking = sorted(n for n, qs in names.items() if qs != everywhere)
    if lacking:
        found.append(Anomaly("disagreement", lacking, f"at {phase}, " + "; ".join(
            f"{n} does not report {', '.join(sorted(everywhere - names[n]))}"
            for n in lacking)))
    for queue in sorted(everywhere):
        views = {n: qs[queue] for n, qs in nodes.items() if queue in qs}
        masters = {n: v.get("master") for n, v in views.items()}
        if len(set(masters.values())) > 1:
            found.append(Anomaly(SPLIT_BRAIN, sorted(views), f"at {phase}, nodes name "
                                 "different masters: " + _listing(masters), queue=queue))
            continue
        mirrors = {n: sorted(v.get("mirrors") or ()) for n, v in views.items()}
        if len({tuple(m) for m in mirrors.values()}) > 1:
            found.append(Anomaly("disagreement", sorted(views), f"at {phase}, nodes list "
                                 "different mirrors: " + _listing(mirrors), queue=queue))
        if queue in churned:
            continue
        if phase in QUIET_PHASES:
            found.extend(_counts(phase, queue, views, nodes))
        if phase == SYNCED_PHASE:
            found.extend(_unsynchronised(phase, queue, views))
    return found


def _mirrored(phase: str, nodes: Mapping[str, Mapping[str, Report]],
              exclusive: set[str]) -> list[Anomaly]:
    """Exclusive queues that some node lists with mirrors: the design never mirrors
    them."""
    found = []
    for queue in sorted(exclusive):
        views = {n: qs[queue] for n, qs in nodes.items() if qs.get(queue, {}).get("mirrors")}
        if views:
            master = next(iter(views.values())).get("master")
            mirrors = sorted({m for v in views.values() for m in v["mirrors"]})
            found.append(Anomaly("over-replicated", [str(master), *mirrors],
                                 f"at {phase}, exclusive queue {queue} (master {master}) has "
                                 f"mirrors on {', '.join(mirrors)}", queue=queue))
    return found


def _unsynchronised(phase: str, queue: str, views: Mapping[str, Report]) -> list[Anomaly]:
    """Mirrors the master still calls unsynchronised after the harness's sync."""
    master = next(iter(views.values())).get("master")
    own = views.get(master) if isinstance(master, str) else None
    if own is None:
        return []
    behind = sorted(set(own.get("mirrors") or ()) - set(own.get("synchronised") or ())
                    - {master})
    if not behind:
        return []
    return [Anomaly("sync-incomplete", [str(master), *behind],
                    f"at {phase}, after the harness synchronised {queue} on a quiet cluster, "
                    f"its master {master} still lists {', '.join(behind)} unsynchronised",
                    queue=queue)]


def _counts(phase: str, queue: str, views: Mapping[str, Report],
            nodes: Mapping[str, Mapping[str, Report]]) -> list[Anomaly]:
    """A synchronised mirror whose own copy differs in size from the master's."""
    master = next(iter(views.values())).get("master")
    own = views.get(master) if isinstance(master, str) else None
    if own is None or not isinstance(master, str):
        return []  # the master did not answer: nothing to compare with
    expected = (own.get("local") or {}).get("messages")
    differing = behind_master(queue, own, nodes)
    if not differing:
        return []
    return [Anomaly("disagreement", [master, *sorted(differing)],
                    f"at {phase}, master {master} holds {expected} messages but its "
                    f"synchronised mirrors hold " + _listing(differing), queue=queue)]


def behind_master(queue: str, own: Report,
                  nodes: Mapping[str, Mapping[str, Report]]) -> dict[str, Any]:
    """The mirrors that the master's report ``own`` lists as synchronised whose own copy
    of ``queue`` holds another count than the master's (mirror -> its count); a mirror
    that did not answer or gave no count is not among them."""
    expected = (own.get("local") or {}).get("messages")
    differing = {}
    for mirror in own.get("synchronised") or ():
        local = (nodes.get(mirror, {}).get(queue) or {}).get("local") or {}
        if "messages" in local and local["messages"] != expected:
            differing[mirror] = local["messages"]
    return differing


def misplaced(phase: str, nodes: Mapping[str, Mapping[str, Report]],
              policies: Mapping[str, Mapping[str, Any]]) -> list[Anomaly]:
    """Queues (of ``policies``: queue -> the policy in force) whose master lists no
    replica on an answering node that the policy covers (``under-replicated``), or
    mirrors the policy does not allow (``over-replicated``)."""
    found = []
    for queue, policy in policies.items():
        own = next((qs[queue] for n, qs in nodes.items()
                    if queue in qs and qs[queue].get("master") == n), None)
        if own is None:
            continue  # its master did not answer: nothing to compare with
        members = [str(own.get("master")), *(own.get("mirrors") or ())]
        missing = [n for n in sorted(nodes) if n not in members
                   and covers(policy, n, members)]
        if missing:
            found.append(Anomaly("under-replicated", [members[0], *missing],
                                 f"at {phase}, {queue} under {dict(policy)} has "
                                 f"replicas on {', '.join(members)} only, not on the running "
                                 f"{', '.join(missing)}", queue=queue))
        extra = beyond(policy, members)
        if extra:
            found.append(Anomaly("over-replicated", [members[0], *extra],
                                 f"at {phase}, {queue} under {dict(policy)} has "
                                 f"replicas on {', '.join(members)}: the policy does not "
                                 f"allow the mirrors on {', '.join(extra)}", queue=queue))
    return found


def _listing(by_node: Mapping[str, object]) -> str:
    return ", ".join(f"{node}: {value}" for node, value in sorted(by_node.items()))
