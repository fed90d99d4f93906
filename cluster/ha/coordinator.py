"""One node's part in the cluster, I/O-free.

The node shell feeds it peer messages (`received`), peer up/down events and the
store's durable LSN, and sends what it leaves in ``outbox`` as ``(peer, Envelope)``.
It keeps the replicated metadata, turns queue records into `ClusterQueue` objects in
the broker's vhosts, places mirrors by policy, promotes the eldest mirror when a master
dies, carries consumers, credit, deliveries, acks and confirms between nodes, and
answers other nodes' calls (``basic.get``, purge, delete, declare counts).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from cluster import events
from cluster.amqp import tablejson
from cluster.core.message import Message
from cluster.core.queue import Entry, Queue
from cluster.gm import GMMessage, View
from cluster.ha import entities
from cluster.ha.confirms import ConfirmBatch, ConfirmWait, ReplicaRef, decode_confirms
from cluster.ha.queue import ClusterQueue, ConsumerProxy, consumer_key
from cluster.ha.record import (
    Member,
    QueueRecord,
    incarnation_of,
    master_fits,
    member_id,
    node_of,
    queue_key,
    unused_member,
    wanted_mirror_nodes,
)
from cluster.ha.wire import OutgoingGM, Publish, PublishBatch, decode_gm, decode_publishes
from cluster.meta.replica import Key, Replica, Update
from cluster.peer.codec import Deferred, Envelope

if TYPE_CHECKING:
    from cluster.amqp.channel import Channel, ChannelConsumer
    from cluster.core.broker import Broker
    from cluster.core.vhost import VirtualHost

Reply = Callable[[dict[str, Any], bytes], None]
B = TypeVar("B", bound=Deferred)


@dataclass
class SyncJob:
    targets: list[Member]
    cursor: int  # next seq to send
    high: int  # messages below this seq are older than the newest target's join
    size: int
    # Once every batch is broadcast: the master's GM seq of the last one. The targets
    # hold the messages, and are synchronised, when that broadcast has gone round the
    # ring (as RabbitMQ's syncer waits for every mirror's ack of each batch).
    sent_upto: int | None = None


class Coordinator:
    def __init__(self, broker: Broker, node: str, incarnation: str, peers: list[str]) -> None:
        self.broker = broker
        self.breaks = broker.config.breaks
        self.node = node
        self.incarnation = incarnation
        self.me_prefix = f"{node}/"
        self.peers = peers
        self.running: dict[str, str] = {}  # peer -> incarnation, while its app runs
        self.meta = Replica(node, tombstones=not self.breaks.forget_deletions)
        self.outbox: list[tuple[str, Envelope]] = []
        self.waits: dict[str, dict[int, ConfirmWait]] = defaultdict(dict)
        self._durable_confirms: list[tuple[int, str, int, str]] = []
        self._consumers: dict[str, tuple[ClusterQueue, ChannelConsumer]] = {}
        self._calls: dict[int, tuple[str, Reply]] = {}
        self._next_call = 1
        self._changed: set[ClusterQueue] = set()
        # GM messages for a replica of ours whose record has not reached us yet (it
        # travels on another link than the catch-up does): replayed once it starts.
        self._early_gm: dict[tuple[str, str, str],
                             list[tuple[dict[str, Any], GMMessage]]] = defaultdict(list)
        self.entities_dirty = True
        self.syncs: dict[ClusterQueue, SyncJob] = {}
        self.leaving: set[str] = set()  # peers that said they are stopping gracefully
        # Running peers whose metadata has not arrived since this app started; until it
        # has, queues recovered here are provisional.
        self.awaiting: set[str] = set()
        # Per queue recovered here and not yet settled: its saved succession (whose
        # copy is trusted first after a full-cluster crash, `QueueRecord.succession`).
        self._succession: dict[Key, list[str]] = {}
        self.on_settled: Callable[[], None] | None = None
        broker.cluster = self

    # -- the node's members -------------------------------------------------------------

    @property
    def me(self) -> Member:
        return member_id(self.node, self.incarnation)

    def _mine(self, member: Member) -> bool:
        """Whether ``member`` is this node's run (under any id it joined a group with)."""
        return node_of(member) == self.node and incarnation_of(member) == self.incarnation

    def cluster_nodes(self) -> list[str]:
        """Nodes whose app runs, this one included, in configured order."""
        return sorted([self.node, *self.running])

    def is_up(self, node: str) -> bool:
        return node == self.node or node in self.running

    def send(self, node: str, envelope: Envelope) -> None:
        self.outbox.append((node, envelope))

    def take_outbox(self) -> list[tuple[str, Envelope]]:
        out, self.outbox = self.outbox, []
        return out

    # -- metadata -----------------------------------------------------------------------

    def after_input(self) -> None:
        """After each batch of input: publish definition changes and sync progress."""
        if self.entities_dirty:
            self.entities_dirty = False
            self._sync_entities()
        if self._changed:
            changed, self._changed = self._changed, set()
            for queue in changed:
                self._update_synced(queue)
        if self.syncs:
            self._finish_syncs()

    def _sync_entities(self) -> None:
        local = entities.records(self.broker)
        updates = []
        for key, value in local.items():
            if self.meta.get(key) != value:
                updates.append(self.meta.put(key, value))
        for kind in entities.KINDS:
            for key, _ in list(self.meta.items(kind)):
                if key not in local:
                    updates.append(self.meta.delete(key))
        self._broadcast_meta(updates)

    def _broadcast_meta(self, updates: list[Update]) -> None:
        if not updates:
            return
        payload = tablejson.dumps([u.to_json() for u in updates]).encode()
        for peer in self.running:
            self.send(peer, Envelope("meta", {}, payload))

    def write_record(self, record: QueueRecord) -> None:
        self._broadcast_meta([self.meta.put(record.key, record.to_json())])
        if record.durable:
            self.broker.save_definitions()  # its succession, before anything relies on it

    def _received_meta(self, peer: str, fields: dict[str, Any], payload: bytes) -> None:
        news = []
        for data in tablejson.loads(payload):
            update = Update.from_json(data)
            if self.meta.apply(update):
                self._apply(update.key, update.value)
                news.append(data)
        if news:
            # Every node keeps the cluster's durable definitions (queues mastered
            # elsewhere too): whichever node starts first after a full stop has them.
            self.broker.save_definitions()
            # Passed on to the other peers: a write its node sent us may not have
            # reached them (a link that dropped it, a node that died right after).
            relay = tablejson.dumps(news).encode()
            for other in self.running:
                if other != peer:
                    self.send(other, Envelope("meta", {"r": 1}, relay))
        if peer in self.awaiting and not fields.get("r"):  # its snapshot, not a relay
            self.awaiting.discard(peer)
            if not self.awaiting:
                self.stop_waiting()

    def join(self, running: dict[str, str], starting: frozenset[str] = frozenset()) -> None:
        """The app starts while these peers run and those in ``starting`` are up with
        their apps still to start: exchange metadata with each running peer, and settle
        the queues recovered here once all of theirs has arrived, and that of every
        starting peer whose copy of one of them comes before ours in its succession
        (the whole cluster crashed: the master's copy, not a mirror's, is the queue)."""
        for peer, incarnation in running.items():
            self.peer_up(peer, incarnation)
        ahead = {node for succession in self._succession.values()
                 for node in succession[:self._place(succession)]}
        self.awaiting = set(running) | (ahead & starting)
        if not self.awaiting:
            self.stop_waiting()

    def stop_waiting(self) -> None:
        self.awaiting.clear()
        self._settle_provisional()
        if self.on_settled is not None:
            self.on_settled()

    def _apply(self, key: Key, value: dict[str, Any] | None) -> None:
        if key[0] == "queue":
            self._apply_queue(key, value)
        elif not (key[0] == "binding" and self.breaks.bindings_not_replicated):
            entities.apply(self.broker, key, value)
        if key[0] == "policy":
            self.policy_changed()  # set on another node: our masters place mirrors anew

    def peer_up(self, peer: str, incarnation: str) -> None:
        self.running[peer] = incarnation
        self.leaving.discard(peer)
        snapshot = self.meta.snapshot()
        self.send(peer, Envelope("meta", {}, tablejson.dumps([u.to_json() for u in snapshot])
                                 .encode()))
        for queue in self._queues():
            if queue.is_master and not self.breaks.no_remirror:
                self._place_mirrors(queue)
            self._renew_catch_ups(queue, peer)

    def _renew_catch_ups(self, queue: ClusterQueue, peer: str) -> None:
        """GM messages to or from ``peer`` were dropped while it was not up (see
        `received`): a catch-up it should have had from us, or we from it, goes again,
        after the metadata that names its member."""
        member = queue.member
        if member is None:
            return
        if node_of(member.right) == peer:
            member.catch_up_right()
            queue.flush_gm()
        if node_of(member.left) == peer and not member.caught_up:
            self.ask_catch_up(queue, member.left)

    def peer_down(self, peer: str) -> None:
        self.running.pop(peer, None)
        if peer in self.awaiting:
            self.awaiting.discard(peer)
            if not self.awaiting:
                self.stop_waiting()
        if not self.breaks.confirm_waits_for_dead:
            self._stop_waiting_for(lambda wait: wait.lost(peer))
        for queue in self._queues():
            self._member_lost(queue, peer)
        for call_id, (node, reply) in list(self._calls.items()):
            if node == peer:
                del self._calls[call_id]
                reply({"error": "down"}, b"")

    # -- queues and their records -------------------------------------------------------

    def _queues(self) -> list[ClusterQueue]:
        return [q for vhost in self.broker.vhosts.values() for q in vhost.queues.values()
                if isinstance(q, ClusterQueue)]

    def _find(self, vhost: str, name: str) -> ClusterQueue | None:
        host = self.broker.vhosts.get(vhost)
        queue = host.queues.get(name) if host is not None else None
        return queue if isinstance(queue, ClusterQueue) else None

    def new_queue(self, vhost: str, name: str, *, durable: bool, exclusive_owner: int | None,
                  auto_delete: bool, arguments: dict[str, Any]) -> Queue | ClusterQueue:
        """A channel here declared a new queue: this node is its master. Exclusive
        queues are never mirrored and stay on their connection's node."""
        copy = Queue(vhost, name, durable=durable, exclusive_owner=exclusive_owner,
                     auto_delete=auto_delete, arguments=arguments, log=self.broker.log,
                     requeue_at_tail=self.breaks.requeue_at_tail)
        if exclusive_owner is not None and not self.breaks.mirrors_exclusive:
            return copy
        return self._start_master(vhost, name, copy)

    def _start_master(self, vhost: str, name: str, copy: Queue, *,
                      provisional: bool = False) -> ClusterQueue:
        record = QueueRecord(vhost, name, copy.durable, copy.auto_delete, copy.arguments,
                             View.first(self.me), uid=self.broker.generated_name(""))
        queue = ClusterQueue(self, record)
        queue.start_master(self.me, copy)
        self.broker.events.emit(events.QueueMaster(vhost=vhost, queue=name, member=self.me,
                                                   provisional=provisional))
        if provisional:
            place = self._place(self._succession[record.key])
            self.meta.put_provisional(record.key, record.to_json(), place)
        else:
            self.write_record(record)
            self._place_mirrors(queue)
        return queue

    def restored(self, copy: Queue, succession: list[str]) -> ClusterQueue:
        """A durable queue recovered from this node's store at start-up, with its
        succession as last saved here (empty if unknown). Its record is provisional:
        the cluster's record, if any peer has one, wins over it, and so does another
        recovered copy that comes before ours in the succession."""
        self._succession[queue_key(copy.vhost, copy.name)] = succession
        return self._start_master(copy.vhost, copy.name, copy, provisional=True)

    def _place(self, succession: list[str]) -> int:
        """Our copy's place in a saved succession; unknown comes after every node."""
        return succession.index(self.node) if self.node in succession else len(self.peers) + 1

    def successions(self) -> dict[str, dict[str, list[str]]]:
        """Per vhost and durable queue, the succession of its record, saved with the
        definitions; a queue recovered and not yet settled keeps the one it was saved
        with (its record is only our claim)."""
        saved: dict[str, dict[str, list[str]]] = defaultdict(dict)
        for queue in self._queues():
            if queue.durable:
                key = queue.record.key
                saved[queue.vhost][queue.name] = (
                    self._succession[key] if self.meta.is_provisional(key)
                    else queue.record.succession())
        return dict(saved)

    def _settle_provisional(self) -> None:
        """A peer's metadata has arrived: queues recovered here that the cluster knows
        nothing of are ours, and are now announced."""
        for queue in self._queues():
            if queue.is_master and self.meta.is_provisional(queue.record.key):
                self.write_record(queue.record)
                self._place_mirrors(queue)
        self._succession.clear()

    def new_copy(self, queue: ClusterQueue) -> Queue:
        host = self.broker.vhosts[queue.vhost]
        return Queue(queue.vhost, queue.name, durable=queue.durable,
                     auto_delete=queue.auto_delete, arguments=queue.arguments, log=host.log,
                     requeue_at_tail=self.breaks.requeue_at_tail)

    def _apply_queue(self, key: Key, value: dict[str, Any] | None) -> None:
        _, vhost_name, name = key
        queue = self._find(vhost_name, name)
        host = self.broker.vhosts.get(vhost_name)
        if value is None:
            if queue is not None and host is not None and not queue.deleted:
                queue.deleted = True
                self.broker.delete_queue(host, name)
            return
        if host is None:
            return
        record = QueueRecord.from_json(key, value)
        if node_of(record.master) == self.node and not self._mine(record.master):
            self._reclaim(host, queue, record)
            return
        if queue is None:
            local = host.queues.get(name)
            if local is not None:  # our own copy lost to the cluster's: start empty
                local.drop_all()
            queue = ClusterQueue(self, record)
            host.add_queue(queue)
        elif queue.me is not None and (record.uid != queue.record.uid
                                       or (queue.is_master and record.master != queue.me)):
            # Our replica lost to the cluster's record: what we recovered as master, or
            # our place in a recovered master's group when another declaration won.
            # Start over empty, as a joiner waiting for the winner's catch-up (held
            # meanwhile in _early_gm). The old member must not go on: it would judge
            # the winning group's views by the old group's version numbers, and ignore
            # one as stale whose members it never had as neighbours.
            queue.stop_replica()
            queue.install(record)
        else:
            queue.install(record)
        mine = next((m for m in record.view.members if self._mine(m)), None)
        if queue.me is None and mine is not None:
            queue.start_mirror(mine)
            self.broker.events.emit(events.MirrorAdded(vhost=vhost_name, queue=name,
                                                       member=mine))
            early = [k for k in self._early_gm if k[:2] == (vhost_name, name)]
            for held in early:  # only this declaration's; any older one's are stale
                for fields, message in self._early_gm.pop(held):
                    if held[2] == record.uid:
                        self._received_gm(queue, fields, message)

    def _reclaim(self, host: VirtualHost, queue: ClusterQueue | None,
                 record: QueueRecord) -> None:
        """The record still names an earlier run of this node as master: no mirror took
        over, so this node is the master again, with what it recovered from disk."""
        copy = queue.copy if queue is not None and queue.is_master else None
        if copy is None:
            copy = Queue(record.vhost, record.name, durable=record.durable,
                         auto_delete=record.auto_delete, arguments=record.arguments,
                         log=host.log, requeue_at_tail=self.breaks.requeue_at_tail)
        reclaimed = QueueRecord(record.vhost, record.name, record.durable,
                                record.auto_delete, record.arguments,
                                View(record.view.version + 1, (self.me,)), uid=record.uid)
        fresh = ClusterQueue(self, reclaimed)
        fresh.start_master(self.me, copy)
        host.add_queue(fresh)
        self.write_record(reclaimed)
        self.broker.events.emit(events.QueueMaster(vhost=record.vhost, queue=record.name,
                                                   member=self.me, reclaimed=True))
        self._place_mirrors(fresh)

    def queue_deleted(self, queue: ClusterQueue) -> None:
        uid = queue.record.uid
        self._stop_waiting_for(lambda wait: wait.deleted(uid))
        # Its mirrors' synchronisation, noted or under way, is never written: that
        # record would be newer than the tombstone and bring the queue back.
        self._changed.discard(queue)
        self.syncs.pop(queue, None)
        key = queue_key(queue.vhost, queue.name)
        if self.meta.get(key) is not None:
            self._broadcast_meta([self.meta.delete(key)])

    def queue_changed(self, queue: ClusterQueue) -> None:
        if queue.join_seq:
            self._changed.add(queue)

    def _update_synced(self, queue: ClusterQueue) -> None:
        done = queue.unsynchronised_now_synced()
        if done and queue.is_master:
            record = queue.record
            queue.record = replace(record, synced=(*record.synced, *done))
            self.write_record(queue.record)
            for member in done:
                self.broker.events.emit(events.MirrorSynchronised(
                    vhost=queue.vhost, queue=queue.name, member=member))
            self._place_mirrors(queue)

    def policy_changed(self) -> None:
        for queue in self._queues():
            if queue.is_master:
                self._place_mirrors(queue)

    def _definition(self, queue: ClusterQueue) -> dict[str, Any]:
        policy = self.broker.policy_for(queue)
        return policy.definition if policy is not None else {}

    def _place_mirrors(self, queue: ClusterQueue) -> None:
        """Master: make the mirrors what the policy wants on the running nodes. Mirrors
        are added (empty, unsynchronised) and dropped as it says; the master hands over
        to a synchronised mirror when the policy no longer wants its node, never before
        one is synchronised."""
        copy, me = queue.copy, queue.me
        assert copy is not None and me is not None
        if self.meta.is_provisional(queue.record.key):
            return  # placed once the cluster has said whether the queue is ours
        definition = self._definition(queue)
        record = queue.record
        current = [node_of(m) for m in record.mirrors]
        wanted = wanted_mirror_nodes(definition, self.node, current, self.cluster_nodes())
        view = record.view
        added = []
        for node in wanted:
            if node not in current and node in self.running:
                member = unused_member(view, node, self.running[node])
                view = view.joined(member)
                if not self.breaks.instant_sync:
                    queue.join_seq[member] = copy.next_seq
                added.append(member)
        unwanted = [] if self.breaks.keeps_unwanted_mirrors else [
            m for m in record.mirrors if node_of(m) not in wanted]
        successor = next((m for m in view.members[1:] if node_of(m) in wanted and (
            m in record.synced or self.breaks.unsynced_handover)), None)
        if not master_fits(definition, self.node) and successor is not None:
            # Hand over: the eldest remaining mirror must be a synchronised one.
            unwanted = [m for m in view.members[1:] if m != successor
                        and (node_of(m) not in wanted or view.members.index(m)
                             < view.members.index(successor))]
            unwanted.append(me)
        if unwanted:
            view = view.without(*unwanted)
            for member in unwanted:
                queue.join_seq.pop(member, None)
                self.broker.events.emit(events.MirrorDropped(
                    vhost=queue.vhost, queue=queue.name, member=member, reason="policy"))
        if added or unwanted:
            placed = record.with_view(view)
            if self.breaks.instant_sync:
                # The bug: called synchronised though it holds nothing older than its join.
                placed = replace(placed, synced=(*placed.synced, *added))
                for member in added:
                    self.broker.events.emit(events.MirrorSynchronised(
                        vhost=queue.vhost, queue=queue.name, member=member))
            self._install(queue, placed)
        if not queue.is_master:
            return
        if definition.get("ha-sync-mode") == "automatic":
            self.sync(queue)  # new mirrors, or a policy that just turned automatic
        elif added and not copy.ready_count and not copy.unacked:
            self._changed.add(queue)

    def _install(self, queue: ClusterQueue, record: QueueRecord) -> None:
        self.write_record(record)
        queue.install(record)

    def _member_lost(self, queue: ClusterQueue, peer: str, *, forced: bool = False) -> None:
        """A node died: the eldest live member of each queue it was in fixes the view.
        When the master died, that member is promoted unless the policy's
        ``ha-promote-on-failure`` (``-on-shutdown`` after a graceful stop) is
        ``when-synced`` and it is not synchronised: then the queue stays unavailable
        until its master comes back."""
        record = queue.record
        if queue.is_master:
            queue.node_down(peer)
        # Every member on a node that is down, not only ``peer``'s: when two die at once
        # the eldest survivor must look past both.
        dead = [m for m in record.view.members if not self.is_up(node_of(m))]
        if peer not in [node_of(m) for m in dead] or queue.me is None:
            return
        alive = [m for m in record.view.members if m not in dead]
        if not alive:
            return
        master_died = record.master in dead
        youngest = master_died and self.breaks.youngest_promoted
        acting = alive[-1] if youngest else alive[0]  # and promoted, if the master died
        if acting != queue.me:
            return
        queue.join_seq = {m: s for m, s in queue.join_seq.items() if m not in dead}
        if master_died and not forced:
            graceful = peer in self.leaving
            key = "ha-promote-on-shutdown" if graceful else "ha-promote-on-failure"
            default = "when-synced" if graceful else "always"
            ignored = (self.breaks.shutdown_promotes_unsynced if graceful
                       else self.breaks.failure_promotes_unsynced)
            if (self._definition(queue).get(key, default) == "when-synced"
                    and queue.me not in record.synced and not ignored):
                self.broker.events.emit(events.PromotionRefused(
                    vhost=queue.vhost, queue=queue.name, member=queue.me, setting=key))
                return
        if record.master not in dead:
            for member in dead:
                self.broker.events.emit(events.MirrorDropped(
                    vhost=queue.vhost, queue=queue.name, member=member, reason="down"))
        view = record.view.without(*dead)
        if youngest:
            view = replace(view, members=(acting, *[m for m in view.members if m != acting]))
        self._install(queue, record.with_view(view))
        if queue.is_master and (master_died or not self.breaks.no_spare_mirror):
            self._place_mirrors(queue)

    def promoted(self, queue: ClusterQueue) -> None:
        """A mirror here became the master (its old master died or handed over)."""
        previous = [m for m, _ in queue.record.view.aliases if m not in queue.record.view]
        assert queue.me is not None  # a member of the group it now leads
        self.broker.events.emit(events.Promotion(
            vhost=queue.vhost, queue=queue.name, member=queue.me,
            synchronised=queue.me in queue.record.synced, previous=tuple(previous[-1:])))
        self._place_mirrors(queue)
        assert queue.copy is not None
        queue.copy.dispatch()

    # -- synchronisation ----------------------------------------------------------------

    def sync(self, queue: ClusterQueue) -> str | None:
        """Copy the messages older than their join to the unsynchronised mirrors, in
        batches of ``ha-sync-batch-size``; the queue delivers nothing meanwhile. Asked
        of a node that is not the master, passes the request on."""
        if not queue.is_master:
            self.send(queue.master_node, Envelope("q.sync", {
                "q": [queue.vhost, queue.name], "op": "sync"}))
            return None
        copy = queue.copy
        assert copy is not None
        targets = [m for m in queue.record.mirrors if m not in queue.record.synced]
        if not targets or queue in self.syncs:
            return None
        high = max(queue.join_seq.get(m, copy.next_seq) for m in targets)
        size = int(self._definition(queue).get("ha-sync-batch-size", 4096))
        self.syncs[queue] = SyncJob(targets, 0, high, size)
        copy.paused = True
        self.broker.events.emit(events.SyncStart(vhost=queue.vhost, queue=queue.name,
                                                 mirrors=tuple(targets)))
        return None

    def cancel_sync(self, queue: ClusterQueue) -> str | None:
        if not queue.is_master:
            self.send(queue.master_node, Envelope("q.sync", {
                "q": [queue.vhost, queue.name], "op": "cancel"}))
            return None
        job = self.syncs.pop(queue, None)
        if job is None:
            return "is not synchronising"
        assert queue.copy is not None
        queue.copy.paused = False
        queue.copy.dispatch()
        if self.breaks.cancelled_sync_counts:
            self._mark_synced(queue, job.targets)
        self.broker.events.emit(events.SyncEnd(vhost=queue.vhost, queue=queue.name,
                                               outcome="cancelled"))
        return None

    def sync_sending(self) -> bool:
        """Whether a sync has batches left to broadcast."""
        return any(job.sent_upto is None for job in self.syncs.values())

    def sync_step(self) -> bool:
        """One batch of every sync still sending; True while any has batches left. A
        sync ends once its last batch has reached every member."""
        for queue, job in list(self.syncs.items()):
            if job.sent_upto is not None:
                continue
            job.targets = [m for m in job.targets if m in queue.record.view]
            if queue.is_master and job.targets and not self.breaks.sync_noop:
                job.cursor = queue.sync_batch(job.targets, job.cursor, job.high, job.size)
                if job.cursor < job.high:
                    continue
            job.sent_upto = queue.gm_last_seq()
        self._finish_syncs()
        return self.sync_sending()

    def _finish_syncs(self) -> None:
        for queue, job in list(self.syncs.items()):
            if job.sent_upto is None or (queue.is_master and not queue.gm_reached(job.sent_upto)):
                continue
            del self.syncs[queue]
            if queue.copy is not None:
                queue.copy.paused = False
                queue.copy.dispatch()
            if not queue.is_master or not job.targets:
                continue
            self._mark_synced(queue, job.targets)
            self.broker.events.emit(events.SyncEnd(vhost=queue.vhost, queue=queue.name,
                                                   outcome="synchronised",
                                                   mirrors=tuple(job.targets)))
            self._place_mirrors(queue)

    def _mark_synced(self, queue: ClusterQueue, targets: list[Member]) -> None:
        for member in targets:
            queue.join_seq.pop(member, None)
        # A target may have been synchronised by draining while its sync went round.
        added = [m for m in targets if m not in queue.record.synced]
        queue.record = replace(queue.record, synced=(*queue.record.synced, *added))
        self.write_record(queue.record)

    # -- membership ---------------------------------------------------------------------

    def leave(self) -> None:
        """This node's app is stopping gracefully: peers promote by
        ``ha-promote-on-shutdown`` rather than ``-on-failure``."""
        for peer in self.running:
            self.send(peer, Envelope("bye", {}))

    def forget(self, node: str) -> str | None:
        """``forget_cluster_node`` of a stopped node: its replicas are dropped and the
        queues it mastered promote a mirror whatever their policy. Started again, it
        rejoins as a new node would, its mirrors empty."""
        if node in self.running:
            return f"node {node} is running; stop it first"
        if node not in self.peers:
            return f"node {node} is not in the cluster"
        for peer in self.running:
            self.send(peer, Envelope("forget", {"node": node}))
        self._forget(node)
        return None

    def _forget(self, node: str) -> None:
        forced = not self.breaks.forget_no_promotion
        for queue in self._queues():
            self._member_lost(queue, node, forced=forced)

    # -- publishes and confirms ---------------------------------------------------------

    def wait_for(self, sender: str, pubid: int) -> ConfirmWait:
        wait = self.waits[sender][pubid] = ConfirmWait(any_one=self.breaks.confirm_one_mirror)
        return wait

    def forget_channel(self, sender: str) -> None:
        self.waits.pop(sender, None)

    def send_publish(self, node: str, queue: ClusterQueue, message: Message, sender: str,
                     pubid: int, want: bool) -> None:
        self._batch(node, "q.pub", {}, PublishBatch).add(
            queue.vhost, queue.name, queue.record.uid, sender, pubid, want, message)

    def _batch(self, node: str, kind: str, fields: dict[str, Any], batch: type[B]) -> B:
        """The envelope queued last for ``node``'s ``batch`` if it carries one, else a
        new one in a ``kind`` envelope queued after it: what joins a batch must not
        overtake whatever else was queued for that node since (the link's order)."""
        for peer, envelope in reversed(self.outbox[-8:]):
            if peer == node:
                if isinstance(envelope.deferred, batch):
                    return envelope.deferred
                break
        new = batch()
        self.send(node, Envelope(kind, fields, deferred=new))
        return new

    def confirm_when_durable(self, lsn: int, sender: str, pubid: int, uid: str) -> None:
        if lsn <= self.broker.durable_lsn:
            self._confirm(sender, pubid, uid)
        else:
            self._durable_confirms.append((lsn, sender, pubid, uid))

    def on_durable(self, lsn: int) -> None:
        ready = [c for c in self._durable_confirms if c[0] <= lsn]
        if ready:
            self._durable_confirms = [c for c in self._durable_confirms if c[0] > lsn]
            for _, sender, pubid, uid in ready:
                self._confirm(sender, pubid, uid)

    def _confirm(self, sender: str, pubid: int, uid: str) -> None:
        node = sender.partition("|")[0]
        if node == self.node:
            self._heard(sender, [pubid], (uid, self.node))
            return
        self._batch(node, "q.confirm", {"n": self.node}, ConfirmBatch).add(sender, uid, pubid)

    def _heard(self, sender: str, pubids: list[int], replica: ReplicaRef) -> None:
        waits = self.waits.get(sender)
        if waits is None:
            return
        done = False
        for pubid in pubids:
            wait = waits.get(pubid)
            if wait is not None:
                wait.heard(replica)
                if wait.done:
                    del waits[pubid]
                    done = True
        if done:
            self.broker.confirm_waits_changed(sender)

    def replicas_changed(self, record: QueueRecord, old_uid: str) -> None:
        """A queue's new record: publishes stop waiting for replicas it dropped, and for
        every replica of the declaration it replaced (another uid: a record that lost,
        whose replicas start over in the winner's group and confirm only under its uid)."""
        if self.breaks.confirm_waits_for_dead:
            return
        nodes = set(record.nodes())

        def change(wait: ConfirmWait) -> None:
            wait.left(record.uid, nodes)
            if old_uid != record.uid:
                wait.left(old_uid, set())

        self._stop_waiting_for(change)

    def _stop_waiting_for(self, change: Callable[[ConfirmWait], None]) -> None:
        """``change`` every publish's wait (replicas that will not confirm); confirm the
        publishes left waiting for none. A confirm released only in order would
        otherwise hold up every later one of its channel."""
        for sender, waits in self.waits.items():
            for pubid, wait in list(waits.items()):
                change(wait)
                self._maybe_done(sender, pubid, wait)

    def _maybe_done(self, sender: str, pubid: int, wait: ConfirmWait) -> None:
        if wait.done:
            del self.waits[sender][pubid]
            self.broker.confirm_waits_changed(sender)

    # -- consumers, credit, deliveries --------------------------------------------------

    def consume(self, queue: ClusterQueue, consumer: ChannelConsumer) -> None:
        key = consumer_key(consumer)
        self._consumers[key] = (queue, consumer)
        if queue.is_master:
            queue.add_proxy(key, self.node, consumer.owner, consumer.no_ack, consumer.exclusive)
        else:
            self.send(queue.master_node, Envelope("q.consume", {
                "q": [queue.vhost, queue.name], "k": key, "o": consumer.owner,
                "na": consumer.no_ack, "x": consumer.exclusive}))

    def cancel(self, queue: ClusterQueue, consumer: ChannelConsumer) -> None:
        key = consumer_key(consumer)
        self.forget_consumer(consumer)
        if queue.is_master:
            queue.remove_proxy(key)
        else:
            self.send(queue.master_node, Envelope("q.cancel", {
                "q": [queue.vhost, queue.name], "k": key}))

    def forget_consumer(self, consumer: ChannelConsumer) -> None:
        self._consumers.pop(consumer_key(consumer), None)

    def credit(self, queue: ClusterQueue, consumer: ChannelConsumer, more: int) -> None:
        key = consumer_key(consumer)
        if queue.is_master:
            proxy = queue.proxies.get(key)
            if proxy is not None:
                proxy.credit += more
                queue.copy.dispatch()  # type: ignore[union-attr]
        else:
            self.send(queue.master_node, Envelope("q.credit", {
                "q": [queue.vhost, queue.name], "k": key, "n": more}))

    def deliver(self, proxy: ConsumerProxy, queue: ClusterQueue, entry: Entry,
                redelivered: bool) -> None:
        if proxy.node == self.node:
            self._delivered(queue, proxy.tag, entry, redelivered)
        else:
            self.send(proxy.node, Envelope("q.deliver", {
                "q": [queue.vhost, queue.name], "k": proxy.tag, "seq": entry.seq,
                "r": redelivered}, entry.message.encode()))

    def _delivered(self, queue: ClusterQueue, key: str, entry: Entry,
                   redelivered: bool) -> None:
        found = self._consumers.get(key)
        if found is None or found[1].channel.closing:
            # Cancelled meanwhile: the message goes back for someone else.
            owner = key.rpartition("|")[0]
            queue.requeue([entry.seq], owner)
            return
        consumer = found[1]
        queue.delivered(consumer)
        consumer.channel.deliver(consumer, queue, entry, redelivered)
        queue.grant(consumer)

    def consumer_gone(self, proxy: ConsumerProxy, queue: ClusterQueue) -> None:
        if proxy.node == self.node:
            self._cancelled(proxy.tag)
        else:
            self.send(proxy.node, Envelope("q.cancelled", {"k": proxy.tag}))

    def _cancelled(self, key: str) -> None:
        found = self._consumers.pop(key, None)
        if found is not None:
            queue, consumer = found
            if consumer in queue.consumers:
                queue.consumers.remove(consumer)
            consumer.channel.cancel_by_server(consumer)

    def settle(self, queue: ClusterQueue, seqs: list[int], owner: str | None,
               requeue: bool) -> None:
        self.send(queue.master_node, Envelope("q.settle", {
            "q": [queue.vhost, queue.name], "seqs": seqs, "o": owner, "r": requeue}))

    # -- calls to the master ------------------------------------------------------------

    def call(self, queue: ClusterQueue, op: str, args: dict[str, Any], reply: Reply) -> None:
        """Ask the queue's master; ``reply`` gets its answer (``{"error": ...}`` when the
        master's node went down first)."""
        node = queue.master_node
        if node == self.node or node not in self.running:
            reply({"error": "down"}, b"")
            return
        call_id = self._next_call
        self._next_call += 1
        self._calls[call_id] = (node, reply)
        self.send(node, Envelope("q.call", {"q": [queue.vhost, queue.name], "id": call_id,
                                           "op": op, **args}))

    def _answer(self, peer: str, fields: dict[str, Any]) -> None:
        queue = self._find(*fields["q"])
        answer: dict[str, Any] = {"id": fields["id"]}
        payload = b""
        if queue is None or not queue.is_master:
            answer["error"] = "not_found"
        elif fields["op"] == "get":
            taken = queue.take_next(bool(fields["no_ack"]), fields["owner"])
            answer["count"] = queue.ready_count
            if taken is not None:
                entry, redelivered = taken
                answer.update(seq=entry.seq, redelivered=redelivered)
                payload = entry.message.encode()
        elif fields["op"] == "purge":
            answer["count"] = queue.purge()
        elif fields["op"] == "delete":
            answer.update(self._delete_for(queue, fields["if_unused"], fields["if_empty"]))
        elif fields["op"] == "status":
            assert queue.copy is not None
            answer.update(count=queue.ready_count, consumers=len(queue.copy.consumers))
        self.send(peer, Envelope("q.reply", answer, payload))

    def _delete_for(self, queue: ClusterQueue, if_unused: bool,
                    if_empty: bool) -> dict[str, Any]:
        host = self.broker.vhosts[queue.vhost]
        copy = queue.copy
        assert copy is not None
        if if_unused and copy.consumers:
            return {"error": "precondition",
                    "text": f"{host.describe('queue', queue.name)} in use"}
        if if_empty and copy.ready_count:
            return {"error": "precondition",
                    "text": f"{host.describe('queue', queue.name)} not empty"}
        count = copy.ready_count
        self.broker.delete_queue(host, queue.name)
        return {"count": count}

    # -- peer messages ------------------------------------------------------------------

    def received(self, peer: str, envelope: Envelope) -> None:
        if peer not in self.running:
            return  # partitioned off, forgotten, or its app is down: not our cluster now
        kind, fields = envelope.type, envelope.fields
        if kind == "bye":
            self.leaving.add(peer)
            return
        if kind == "forget":
            self._forget(fields["node"])
            return
        if kind == "meta":
            self._received_meta(peer, envelope.fields, envelope.payload)
            return
        if kind == "q.confirm":
            for sender, uid, pubids in decode_confirms(envelope.payload):
                self._heard(sender, pubids, (uid, fields["n"]))
            return
        if kind == "q.pub":
            for vhost, name, uid, publishes in decode_publishes(envelope.payload):
                self._received_publishes(self._find(vhost, name), uid, publishes)
            return
        if kind == "q.reply":
            call = self._calls.pop(fields["id"], None)
            if call is not None:
                call[1](fields, envelope.payload)
            return
        if kind == "q.cancelled":
            self._cancelled(fields["k"])
            return
        queue = self._find(*fields["q"])
        if kind == "q.call":
            self._answer(peer, fields)
            return
        if kind == "gm" and self._mine(fields["to"]) and (
                queue is None or queue.me is None or queue.record.uid != fields["u"]
                or self.meta.is_provisional(queue.record.key)):
            self._early_gm[(fields["q"][0], fields["q"][1], fields["u"])].append(
                (fields, decode_gm(envelope.payload)))
            return
        if queue is None:
            return
        if kind == "gm":
            self._received_gm(queue, fields, decode_gm(envelope.payload))
        elif kind == "gm.ask":
            self._catch_up_asked(queue, fields)
        elif kind == "q.sync":
            (self.sync if fields["op"] == "sync" else self.cancel_sync)(queue)
        elif kind == "q.deliver":
            entry = Entry(fields["seq"], Message.decode(envelope.payload))
            self._delivered(queue, fields["k"], entry, fields["r"])
        elif queue.is_master:
            self._received_for_master(queue, kind, fields, peer)

    def _received_publishes(self, queue: ClusterQueue | None, uid: str,
                            publishes: list[Publish]) -> None:
        if queue is None:
            return
        if queue.is_master and uid != queue.record.uid:
            # Routed to a declaration of this name that has been deleted: gone with it,
            # as a publish to a deleted queue is, and confirmed.
            for sender, pubid, want, _ in publishes:
                if want:
                    self._confirm(sender, pubid, uid)
            return
        for sender, pubid, want, message in publishes:
            queue.received_publish(message, sender, pubid, want)

    def _received_for_master(self, queue: ClusterQueue, kind: str, fields: dict[str, Any],
                             peer: str) -> None:
        copy = queue.copy
        assert copy is not None
        if kind == "q.consume":
            queue.add_proxy(fields["k"], peer, fields["o"], fields["na"], fields["x"])
        elif kind == "q.cancel":
            queue.remove_proxy(fields["k"])
        elif kind == "q.credit":
            proxy = queue.proxies.get(fields["k"])
            if proxy is not None:
                proxy.credit += fields["n"]
        elif kind == "q.settle":
            if fields["r"]:
                copy.requeue(fields["seqs"], fields["o"])
            else:
                copy.settle(fields["seqs"], fields["o"])
        copy.dispatch()

    def _received_gm(self, queue: ClusterQueue, fields: dict[str, Any],
                     message: GMMessage) -> None:
        member = queue.member
        if member is None or queue.me != fields["to"] or queue.record.uid != fields["u"]:
            return  # meant for an earlier incarnation of this replica, or of the queue
        member.receive(fields["fr"], message)
        queue.flush_gm()

    def ask_catch_up(self, queue: ClusterQueue, left: Member) -> None:
        if left != queue.me:
            self.send(node_of(left), Envelope("gm.ask", {
                "q": [queue.vhost, queue.name], "u": queue.record.uid, "to": left,
                "fr": queue.me}))

    def _catch_up_asked(self, queue: ClusterQueue, fields: dict[str, Any]) -> None:
        member = queue.member
        if (member is not None and queue.me == fields["to"] and queue.record.uid == fields["u"]
                and member.right == fields["fr"]):
            member.catch_up_right()
            queue.flush_gm()

    def send_gm(self, queue: ClusterQueue, target: Member, message: GMMessage) -> OutgoingGM:
        out = OutgoingGM(message)
        self.send(node_of(target), Envelope("gm", {
            "q": [queue.vhost, queue.name], "u": queue.record.uid, "to": target,
            "fr": queue.me}, deferred=out))
        return out

    # -- shutdown -----------------------------------------------------------------------

    def channel_closed(self, channel: Channel) -> None:
        self.forget_channel(channel.ref)
