"""Synchronising mirrors: how a mirror that joined empty comes to hold everything its
master holds.

A mirror joins at the master's next sequence number J (``ClusterQueue.join_seq``) and
is synchronised once nothing older than J is left on the master (drained: `Syncs.
after_input` notices), or after a sync (`Syncs.start`, by policy ``ha-sync-mode:
automatic`` or by request): batches of ``ha-sync-batch-size`` messages older than the
newest target's join, broadcast through the queue's GM group one batch per `step` (the
node shell runs one per turn of its loop), while the master delivers nothing. A sync is
done when its last batch has gone round the ring, as RabbitMQ's syncer waits for every
mirror's ack of each batch; then its targets are recorded as synchronised.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cluster import events
from cluster.core.queue import Entry, Queue
from cluster.ha.messages import SyncedMessage, SyncOp, SyncRequest
from cluster.ha.record import Member

if TYPE_CHECKING:
    from cluster.ha.coordinator import Coordinator
    from cluster.ha.queue import ClusterQueue

# A content header of class basic (60) with no properties: all the planted bug
# sync-drops-properties leaves of a synced message's header (weight, body size, flags).
_BARE_HEADER = struct.Struct(">HHQH")


@dataclass
class SyncJob:
    targets: list[Member]
    cursor: int  # next seq to send
    high: int  # messages below this seq are older than the newest target's join
    size: int
    # Once every batch is broadcast: the master's GM seq of the last one. The targets
    # hold the messages, and are synchronised, when that broadcast has gone round the
    # ring.
    sent_upto: int | None = None


class Syncs:
    """This node's syncs, by queue, and its masters' mirrors that may have drained."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self.breaks = coordinator.breaks
        self.jobs: dict[ClusterQueue, SyncJob] = {}
        self._changed: set[ClusterQueue] = set()

    def changed(self, queue: ClusterQueue) -> None:
        """Messages left the master: an unsynchronised mirror may have drained."""
        if queue.join_seq:
            self._changed.add(queue)

    def start(self, queue: ClusterQueue) -> str | None:
        """Copy the messages older than their join to the unsynchronised mirrors; the
        queue delivers nothing meanwhile. Asked of a node that is not the master,
        passes the request on."""
        coordinator = self.coordinator
        if not queue.is_master:
            coordinator.outbox.send(queue.master_node, SyncRequest(queue.ref, cancel=False))
            return None
        copy = queue.copy
        assert copy is not None
        targets = [m for m in queue.record.mirrors if m not in queue.record.synced]
        if not targets or queue in self.jobs:
            return None
        high = max(queue.join_seq.get(m, copy.next_seq) for m in targets)
        size = int(coordinator.mirrors.definition(queue).get("ha-sync-batch-size", 4096))
        self.jobs[queue] = SyncJob(targets, 0, high, size)
        copy.paused = True
        coordinator.broker.events.emit(events.SyncStart(vhost=queue.vhost, queue=queue.name,
                                                        mirrors=tuple(targets)))
        return None

    def cancel(self, queue: ClusterQueue) -> str | None:
        coordinator = self.coordinator
        if not queue.is_master:
            coordinator.outbox.send(queue.master_node, SyncRequest(queue.ref, cancel=True))
            return None
        job = self.jobs.pop(queue, None)
        if job is None:
            return "is not synchronising"
        assert queue.copy is not None
        queue.copy.paused = False
        queue.copy.dispatch()
        if self.breaks.cancelled_sync_counts:
            self._mark_synced(queue, job.targets)
        coordinator.broker.events.emit(events.SyncEnd(vhost=queue.vhost, queue=queue.name,
                                                      outcome="cancelled"))
        return None

    def received(self, peer: str, request: SyncRequest) -> None:
        queue = self.coordinator.find(request.queue)
        if queue is not None:
            (self.cancel if request.cancel else self.start)(queue)

    def forget(self, queue: ClusterQueue) -> None:
        """The queue was deleted: its mirrors' synchronisation, noted or under way, is
        never written (that record would be newer than the tombstone and bring the queue
        back)."""
        self._changed.discard(queue)
        self.jobs.pop(queue, None)

    def sending(self) -> bool:
        """Whether a sync has batches left to broadcast."""
        return any(job.sent_upto is None for job in self.jobs.values())

    def step(self) -> bool:
        """One batch of every sync still sending; True while any has batches left."""
        for queue, job in list(self.jobs.items()):
            if job.sent_upto is not None:
                continue
            job.targets = [m for m in job.targets if m in queue.record.view]
            if queue.is_master and job.targets and not self.breaks.sync_noop:
                _send_batch(queue, job)
                if job.cursor < job.high:
                    continue
            job.sent_upto = queue.gm_last_seq()
        self._finish()
        return self.sending()

    def after_input(self) -> None:
        """Record the mirrors synchronised by draining or by a sync that has ended."""
        if self._changed:
            changed, self._changed = self._changed, set()
            for queue in changed:
                self._drained(queue)
        if self.jobs:
            self._finish()

    def _drained(self, queue: ClusterQueue) -> None:
        done = _drained_mirrors(queue)
        if done and queue.is_master:
            self._mark_synced(queue, done)
            for member in done:
                self.coordinator.broker.events.emit(events.MirrorSynchronised(
                    vhost=queue.vhost, queue=queue.name, member=member))
            self.coordinator.mirrors.place(queue)

    def _finish(self) -> None:
        for queue, job in list(self.jobs.items()):
            if job.sent_upto is None or (queue.is_master and not queue.gm_reached(job.sent_upto)):
                continue
            del self.jobs[queue]
            if queue.copy is not None:
                queue.copy.paused = False
                queue.copy.dispatch()
            if not queue.is_master or not job.targets:
                continue
            self._mark_synced(queue, job.targets)
            self.coordinator.broker.events.emit(events.SyncEnd(
                vhost=queue.vhost, queue=queue.name, outcome="synchronised",
                mirrors=tuple(job.targets)))
            self.coordinator.mirrors.place(queue)

    def _mark_synced(self, queue: ClusterQueue, targets: list[Member]) -> None:
        for member in targets:
            queue.join_seq.pop(member, None)
        # A target may have been synchronised by draining while its sync went round.
        added = [m for m in targets if m not in queue.record.synced]
        queue.record = replace(queue.record, synced=(*queue.record.synced, *added))
        self.coordinator.write_record(queue.record)


def _drained_mirrors(queue: ClusterQueue) -> list[Member]:
    """Master: mirrors that joined at seq J hold every message once nothing older than
    J is left; they are no longer waited for."""
    if not queue.join_seq or queue.copy is None:
        return []
    oldest = queue.copy.oldest_seq()
    done = [m for m, joined in queue.join_seq.items() if oldest >= joined]
    for member in done:
        del queue.join_seq[member]
    return done


def _send_batch(queue: ClusterQueue, job: SyncJob) -> None:
    """Master: broadcast the batch of messages older than the targets' joins from the
    job's cursor, and move the cursor past it (to ``high`` when none is left)."""
    copy = queue.copy
    assert copy is not None
    entries = copy.held(job.cursor, job.high)[:job.size]
    if not entries:
        job.cursor = job.high
        return
    queue.broadcast(SyncOp(tuple(job.targets), tuple(
        SyncedMessage(e.seq, e.delivered, e.owner if e.seq in copy.unacked else None,
                      e.message) for e in entries)))
    job.cursor = entries[-1].seq + 1


def absorb(copy: Queue, batch: SyncOp, *, drop_properties: bool = False) -> None:
    """Mirror: the older messages of a sync batch, each with its delivery state (an
    owner: unacknowledged there). ``drop_properties`` is the planted bug
    sync-drops-properties."""
    if not batch.messages:
        return
    have = {e.seq for e in copy.held(batch.messages[0].seq, batch.messages[-1].seq + 1)}
    for synced in batch.messages:
        message = synced.message
        if drop_properties:
            message = replace(message, header=_BARE_HEADER.pack(60, 0, len(message.body), 0))
        if synced.seq not in have:
            copy.insert_old(Entry(synced.seq, message, synced.delivered, synced.owner or ""))
