"""Keeping each queue's replicas what its policy and the running nodes say: the
coordinator's side of `cluster.ha.placement`, which decides; this applies.

A master places its mirrors (`Mirrors.place`) when its queue starts or is settled as
ours, when a policy changes, when a node comes up and when a mirror is synchronised.
When a node goes, the eldest surviving member of each queue it was in writes the view
without it (`Mirrors.member_lost`) and, if the master died and the policy allows it,
is promoted. Each change is a new record, written and installed at once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cluster import events
from cluster.ha import placement
from cluster.ha.record import QueueRecord, node_of

if TYPE_CHECKING:
    from cluster.ha.coordinator import Coordinator
    from cluster.ha.queue import ClusterQueue


class Mirrors:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.breaks = coordinator.breaks
        self.events = coordinator.broker.events

    def definition(self, queue: ClusterQueue) -> dict[str, Any]:
        policy = self.coordinator.broker.policy_for(queue)
        return policy.definition if policy is not None else {}

    def policy_changed(self) -> None:
        for queue in self.coordinator.queues():
            if queue.is_master:
                self.place(queue)

    def place(self, queue: ClusterQueue) -> None:
        """Master: make the mirrors what the policy wants on the running nodes
        (`placement.place`); new ones are empty and unsynchronised."""
        coordinator, breaks = self.coordinator, self.breaks
        copy = queue.copy
        assert copy is not None
        if coordinator.meta.is_provisional(queue.record.key):
            return  # placed once the cluster has said whether the queue is ours
        definition = self.definition(queue)
        placed = placement.place(definition, queue.record, coordinator.running,
                                 keep_unwanted=breaks.keeps_unwanted_mirrors,
                                 unsynced_handover=breaks.unsynced_handover)
        if not breaks.instant_sync:
            for member in placed.added:
                queue.join_seq[member] = copy.next_seq
        for member in placed.dropped:
            queue.join_seq.pop(member, None)
            self.events.emit(events.MirrorDropped(vhost=queue.vhost, queue=queue.name,
                                                  member=member, reason="policy"))
        if placed.added or placed.dropped:
            record = queue.record.with_view(placed.view)
            if breaks.instant_sync:
                # The bug: called synchronised though it holds nothing older than its join.
                record = replace(record, synced=(*record.synced, *placed.added))
                for member in placed.added:
                    self.events.emit(events.MirrorSynchronised(
                        vhost=queue.vhost, queue=queue.name, member=member))
            self._install(queue, record)
        if not queue.is_master:
            return
        if definition.get("ha-sync-mode") == "automatic":
            coordinator.syncs.start(queue)  # new mirrors, or a policy just turned automatic
        elif placed.added and not copy.ready_count and not copy.unacked:
            coordinator.syncs.changed(queue)  # nothing to copy: synchronised at once

    def _install(self, queue: ClusterQueue, record: QueueRecord) -> None:
        self.coordinator.write_record(record)
        queue.install(record)

    def member_lost(self, queue: ClusterQueue, peer: str, *, forced: bool = False) -> None:
        """A node died (or, ``forced``, was forgotten: promote whatever the policy): the
        eldest live member of each queue it was in writes the view without it
        (`placement.succession`), promoted if the master died, unless the policy forbids
        it (`placement.promotion_refused`): then the queue stays unavailable until its
        master comes back."""
        coordinator, breaks = self.coordinator, self.breaks
        record = queue.record
        if queue.is_master:
            queue.node_down(peer)
            if queue.deleted:  # auto-delete, and its last consumers were on that node
                return
        after = placement.succession(record, {coordinator.node, *coordinator.running},
                                     youngest=breaks.youngest_promoted)
        if (after is None or queue.me is None or after.acting != queue.me
                or peer not in [node_of(m) for m in after.dead]):
            return
        queue.join_seq = {m: s for m, s in queue.join_seq.items() if m not in after.dead}
        if after.master_died and not forced:
            graceful = peer in coordinator.leaving
            refused = placement.promotion_refused(
                self.definition(queue), record, queue.me, graceful=graceful,
                ignore=(breaks.shutdown_promotes_unsynced if graceful
                        else breaks.failure_promotes_unsynced))
            if refused is not None:
                self.events.emit(events.PromotionRefused(
                    vhost=queue.vhost, queue=queue.name, member=queue.me, setting=refused))
                return
        if not after.master_died:
            for member in after.dead:
                self.events.emit(events.MirrorDropped(
                    vhost=queue.vhost, queue=queue.name, member=member, reason="down"))
        self._install(queue, record.with_view(after.view))
        if queue.is_master and (after.master_died or not breaks.no_spare_mirror):
            self.place(queue)

    def promoted(self, queue: ClusterQueue) -> None:
        """A mirror here became the master (its old master died or handed over)."""
        previous = [m for m, _ in queue.record.view.aliases if m not in queue.record.view]
        assert queue.me is not None  # a member of the group it now leads
        self.events.emit(events.Promotion(
            vhost=queue.vhost, queue=queue.name, member=queue.me,
            synchronised=queue.me in queue.record.synced, previous=tuple(previous[-1:])))
        self.place(queue)
        assert queue.copy is not None
        queue.copy.dispatch()
