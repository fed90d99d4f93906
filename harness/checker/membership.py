"""Which nodes hold a queue's copy of a message, replayed from the harness's record.

An I/O-free model of the mirrored queue's documented behaviour (docs/cluster-design.md),
fed only with what the harness did (crashes, stops, restarts, partitions under
``pause_minority``, policy changes, syncs, forgotten nodes) and with node-reported
completed syncs (also a mirror's synchronisation by draining), which can only make the
model stricter: a mirror called synchronised must hold whatever its master holds. The broker's own
claims about promotions or mirrors are never used: a broker that lies about them must
not be able to excuse a loss.

For one message the replay starts at its publish: every member then holds it. A mirror
that joins later starts empty and holds it only after a sync completes while the master
holds it. When the master fails the eldest surviving mirror is promoted (unless the
policy says ``when-synced`` and it is not synchronised); if the master held the message
and the promoted mirror does not, the message is gone by design. A ``forget`` stops its
node and removes it from the cluster at once: it leaves every queue, and one it mastered
promotes its eldest surviving mirror whatever the policy says; started again, it is a new
node, its mirrors empty.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from harness.checker.result import Fault
from harness.history.model import (
    CRASH_FAULTS,
    FORGET_FAULT,
    PARTITION_FAULT,
    POLICY_FAULT,
    SHUTDOWN_FAULTS,
    Header,
    QueueConfig,
)

FAIL, JOIN, FORGET, SYNC, POLICY = "fail", "join", "forget", "sync", "policy"


@dataclass(frozen=True)
class Change:
    """One membership-relevant moment of the record."""

    time: float
    kind: str
    nodes: tuple[str, ...] = ()
    shutdown: bool = False  # a graceful stop: ha-promote-on-shutdown applies
    queue: str | None = None  # sync/policy: only this queue
    pattern: str | None = None  # policy: queues whose name matches
    definition: Mapping[str, Any] | None = None  # policy: None restores the previous one
    fault: Fault | None = None

    def applies_to(self, queue: str) -> bool:
        if self.queue is not None:
            return self.queue == queue
        return self.pattern is None or re.match(self.pattern, queue) is not None


def changes_from(faults: Iterable[Fault], syncs: Iterable[tuple[float, str, str | None]],
                 nodes: tuple[str, ...], partition_handling: str) -> list[Change]:
    """The record's membership changes in time order; ``syncs`` are the nodes' reports
    of completed syncs (time, queue, and the one mirror's node or None for all)."""
    changes: list[Change] = []
    for f in faults:
        if not f.applied:
            continue
        back = f.end is not None and not f.heal_failed
        down: tuple[str, ...] = ()
        if f.kind in CRASH_FAULTS or f.kind in SHUTDOWN_FAULTS:
            down = f.targets
            survivors = len(nodes) - len(down)
            if partition_handling == "pause_minority" and 2 * survivors <= len(nodes):
                down = nodes  # the survivors are a minority: they pause too
        elif f.kind == PARTITION_FAULT and partition_handling == "pause_minority":
            down = paused_minority(f, nodes)
        elif f.kind == "sync" and back and not f.detail.get("cancelled"):
            assert f.end is not None
            changes.append(Change(f.end, SYNC, queue=f.detail.get("queue"), fault=f))
        elif f.kind == POLICY_FAULT:
            queue, pattern = f.detail.get("queue"), f.detail.get("pattern")
            changes.append(Change(f.start, POLICY, queue=queue, pattern=pattern,
                                  definition=f.detail["definition"], fault=f))
            if back:
                assert f.end is not None
                changes.append(Change(f.end, POLICY, queue=queue, pattern=pattern,
                                      definition=f.detail.get("restored"), fault=f))
        if down:
            kind = FORGET if f.kind == FORGET_FAULT else FAIL
            changes.append(Change(f.start, kind, down, f.kind in SHUTDOWN_FAULTS, fault=f))
            if back:
                assert f.end is not None
                changes.append(Change(f.end, JOIN, down, fault=f))
    changes.extend(Change(t, SYNC, () if node is None else (node,), queue=q)
                   for t, q, node in syncs)
    changes.sort(key=lambda c: c.time)
    return changes


def paused_minority(fault: Fault, nodes: tuple[str, ...]) -> tuple[str, ...]:
    """Nodes that stop under ``pause_minority``.

    The partition is the fault's ``grudge`` (node -> nodes it cannot hear), or without
    one, its targets cut off from the other nodes. A cut parts two nodes both ways (each
    loses the other, as when an Erlang connection drops). A node pauses when it reaches
    no more than half the cluster, or when it lost a node that a node it reaches still
    reaches (a partial partition: it pauses until the whole cluster is back).
    """
    grudge: Mapping[str, list[str]] = fault.detail.get("grudge") or {}
    if not grudge:
        inside = set(fault.targets)
        grudge = {n: [m for m in nodes if (m in inside) != (n in inside)] for n in nodes}
    apart = {n: {m for m in nodes if m != n and (m in grudge.get(n, ()) or n in grudge.get(m, ()))}
             for n in nodes}
    reaches = {n: set(nodes) - apart[n] for n in nodes}
    half = len(nodes) / 2
    return tuple(n for n in nodes if len(reaches[n]) <= half
                 or any(lost in reaches[via] for via in reaches[n] - {n} for lost in apart[n]))


def covers(policy: Mapping[str, Any], node: str, members: list[str]) -> bool:
    """Whether the policy places a mirror on ``node`` when it (re)joins ``members``."""
    mode = policy.get("ha-mode")
    params = policy.get("ha-params")
    if mode == "all":
        return True
    if mode == "nodes":
        return isinstance(params, list) and node in params
    if mode == "exactly":
        return isinstance(params, int) and len(members) < params
    return False  # not mirrored: the queue lives on its master alone


def beyond(policy: Mapping[str, Any], members: list[str]) -> list[str]:
    """The mirrors of ``members`` (master first) that the policy does not allow: past
    its count under ``exactly``, on a node it does not name under ``nodes`` (the master
    may stay off the list until a mirror there is synchronised), any under a
    policy that does not mirror."""
    mode = policy.get("ha-mode")
    params = policy.get("ha-params")
    mirrors = members[1:]
    if mode == "all":
        return []
    if mode == "nodes":
        return [m for m in mirrors if not isinstance(params, list) or m not in params]
    if mode == "exactly":
        return members[params:] if isinstance(params, int) and params >= 1 else []
    return mirrors


def kept_by(policy: Mapping[str, Any], members: list[str]) -> list[str]:
    """The members a new policy keeps; the master always stays."""
    params = policy.get("ha-params")
    if policy.get("ha-mode") == "exactly" and isinstance(params, int):
        return members[:max(params, 1)]
    return members[:1] + [m for m in members[1:] if covers(policy, m, [])]


@dataclass(frozen=True)
class Outcome:
    """Where a message stands at the end of the record."""

    holders: tuple[str, ...]  # nodes that should still hold it
    on_disk_of: str | None = None  # a down master that holds it on disk
    cause: str | None = None  # the documented reason it is gone, if it is
    change: Change | None = None  # the moment it went


class Replay:
    """A queue's membership, replayed change by change; optionally one message's
    holders from its publish on."""

    def __init__(self, config: QueueConfig, nodes: tuple[str, ...]) -> None:
        self.name = config.name
        self.nodes = nodes
        self.members = list(config.members)
        self.synced = set(self.members)
        self.policy: Mapping[str, Any] = dict(config.policy)
        self.previous: dict[str, Mapping[str, Any]] = {}  # policy fault id -> replaced policy
        self.dead: set[str] = set()
        self.down_master: str | None = None
        self.waiting: list[str] = []  # mirrors left behind while the queue is down
        self.holders: set[str] | None = None
        self.transient = False
        self.on_disk = False
        self.cause: str | None = None
        self.cause_change: Change | None = None
        self.masters: list[tuple[float, str]] = [(float("-inf"), self.members[0])]
        self.outages: list[list[float]] = []  # [down, back or inf]: no master at all
        self.down_members: list[str] = []  # the members when the queue went down
        # (time, nodes): the queue came back with several of its old members at once;
        # which of them the cluster settles on as master the record cannot tell
        self.contested: list[tuple[float, tuple[str, ...]]] = []

    def track(self, transient: bool) -> None:
        """From now on, follow one message published now."""
        self.holders = set(self.members)
        self.transient = transient

    def outcome(self) -> Outcome:
        holders = tuple(m for m in self.members if self.holders and m in self.holders)
        disk = self.down_master if self.on_disk else None
        return Outcome(holders, disk, self.cause, self.cause_change)

    def apply(self, change: Change) -> None:
        if change.kind in (FAIL, FORGET):
            self._fail(change)
        elif change.kind == JOIN:
            self._join(change)
        elif change.kind == SYNC and change.applies_to(self.name):
            self._sync(change.nodes)
        elif change.kind == POLICY and change.applies_to(self.name):
            self._policy(change)

    def _lose(self, cause: str, change: Change) -> None:
        if self.cause is None:
            self.cause, self.cause_change = cause, change

    def _fail(self, change: Change) -> None:
        dead = set(change.nodes)
        self.dead |= dead
        if not self.members:
            self.waiting = [w for w in self.waiting if w not in dead]
            return
        master = self.members[0]
        survivors = [m for m in self.members if m not in dead]
        holders = self.holders
        if master not in dead:
            self.members = survivors
            self.synced -= dead
            if holders is not None:
                holders -= dead
            return
        held = holders is not None and master in holders
        key = "ha-promote-on-shutdown" if change.shutdown else "ha-promote-on-failure"
        mode = self.policy.get(key, "when-synced" if change.shutdown else "always")
        heir = survivors[0] if survivors else None
        # forget_cluster_node promotes whatever the policy says
        if heir is not None and (mode == "always" or change.kind == FORGET or heir in self.synced
                                 or (holders is not None and heir in holders)):
            self.members = survivors
            self.synced &= set(survivors)
            self.masters.append((change.time, heir))
            if holders is not None:
                if held and heir not in holders:
                    self._lose("unsynchronised-promotion", change)
                    holders.clear()  # the queue is now the heir's copy
                else:
                    holders -= dead
            return
        # no mirror may take over: the queue is down until its master returns
        self.down_members = list(self.members)
        self.down_master, self.waiting, self.members = master, survivors, []
        self.outages.append([change.time, float("inf")])
        if holders is not None:
            self.on_disk = held and not self.transient
            if held and self.transient:
                self._lose("transient-no-replica", change)
            holders.clear()

    def _join(self, change: Change) -> None:
        back = list(change.nodes)
        self.dead -= set(back)
        if not self.members:
            master = self.down_master
            if master is None or master not in back:
                return  # mirrors wait for the master of a down queue
            self.members = [master, *self.waiting]
            self.synced = {master}
            self.masters.append((change.time, master))
            rivals = tuple(n for n in back if n in self.down_members)
            if len(rivals) > 1:
                self.contested.append((change.time, rivals))
            self.outages[-1][1] = change.time
            if self.holders is not None and self.on_disk:
                self.holders.add(master)  # a durable queue's persistent messages reload
            self.down_master, self.waiting, self.on_disk = None, [], False
        for node in back:
            if node not in self.members and covers(self.policy, node, self.members):
                self.members.append(node)  # empty and unsynchronised

    def _sync(self, nodes: tuple[str, ...]) -> None:
        """Every mirror synchronised, or those on ``nodes`` (a mirror synchronised by
        draining): each then holds whatever the master holds."""
        if not self.members:
            return
        done = [m for m in self.members if not nodes or m in nodes]
        self.synced.update(done)
        if self.holders is not None and self.members[0] in self.holders:
            self.holders.update(done)

    def _policy(self, change: Change) -> None:
        fid = change.fault.id if change.fault is not None else ""
        if fid in self.previous:  # the fault's end: its definition, or the one it replaced
            replaced = self.previous.pop(fid)
            self.policy = dict(change.definition) if change.definition else replaced
        else:
            self.previous[fid] = self.policy
            self.policy = dict(change.definition or {})
        if not self.members:
            return
        kept = kept_by(self.policy, self.members)
        dropped = set(self.members) - set(kept)
        self.members = kept
        self.synced -= dropped
        if self.holders is not None:
            self.holders -= dropped
        for node in self.nodes:
            if node not in self.members and node not in self.dead and covers(
                    self.policy, node, self.members):
                self.members.append(node)


def replayed(header: Header, changes: Iterable[Change], queue: str) -> Replay:
    """``queue``'s membership after every change of the record."""
    replay = Replay(header.queue(queue), header.nodes)
    for change in changes:
        replay.apply(change)
    return replay


def master_at(masters: list[tuple[float, str]], time: float) -> str:
    """The master just before ``time`` (a fault at ``time`` hits the master it found)."""
    current = masters[0][1]
    for since, node in masters:
        if since >= time:
            break
        current = node
    return current


def possible_masters(replay: Replay, time: float) -> set[str]:
    """The nodes that may be the master just before ``time``: the replay's one, or,
    since the queue came back with several old members at once and until the next
    master change, any of them."""
    found = {master_at(replay.masters, time)}
    changed = max((since for since, _ in replay.masters if since < time),
                  default=float("-inf"))
    for since, rivals in replay.contested:
        if changed <= since < time:
            found.update(rivals)
    return found


def master_changes(masters: list[tuple[float, str]]) -> list[tuple[float, str, str]]:
    """(time, old master, new master) for each promotion in a replay's ``masters``."""
    return [(t, old, new) for (_, old), (t, new) in pairwise(masters) if new != old]
