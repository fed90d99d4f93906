"""One node's part in the cluster, I/O-free: the cluster layer put together.

The node shell feeds it peer envelopes (`received`), peers' apps going up and down and
the store's durable LSN; it sends what it takes from the outbox (`take_outbox`). A
peer's envelope is decoded into its message (`cluster.ha.wire`) and handed to the
handler the dispatch table names for its class. Each concern is a module of its own:

    mirrors     placing mirrors and succeeding the dead (decided by `placement`)
    sync        synchronising new mirrors
    confirms    publisher confirms across nodes
    consumers   consumers of queues mastered on another node
    calls       basic.get, purge, delete and declare counts asked of such a master
    groups      each queue's GM traffic
    messages    the peer protocol's envelopes and replicated ops; `wire`, their codec
    outbox      what goes to the peers, batched

What is left here: the replicated metadata and the queue records in it, which make a
`ClusterQueue` (master, mirror or remote) in the broker's vhost, and which peers run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cluster import events
from cluster.core.clients import ClientChannel
from cluster.core.queue import Queue
from cluster.gm import View
from cluster.ha import calls, entities, wire
from cluster.ha.calls import Calls
from cluster.ha.confirms import ConfirmTracker
from cluster.ha.consumers import RemoteConsumers
from cluster.ha.groups import GroupRelay
from cluster.ha.messages import (
    Answer,
    Bye,
    Call,
    Cancel,
    CatchUpAsk,
    Confirms,
    Consume,
    ConsumerGone,
    Credit,
    Deliver,
    Forget,
    GroupMessage,
    Meta,
    Publishes,
    QueueRef,
    Settle,
    SyncRequest,
)
from cluster.ha.mirrors import Mirrors
from cluster.ha.outbox import Outbox
from cluster.ha.queue import ClusterQueue
from cluster.ha.record import Member, QueueRecord, incarnation_of, member_id, node_of, queue_key
from cluster.ha.sync import Syncs
from cluster.meta.replica import Key, Replica, Update
from cluster.peer.codec import Envelope

if TYPE_CHECKING:
    from cluster.core.broker import BrokerModel
    from cluster.core.vhost import VirtualHost


class Coordinator:
    def __init__(self, broker: BrokerModel, node: str, incarnation: str,
                 peers: list[str]) -> None:
        self.broker = broker
        self.breaks = breaks = broker.config.breaks
        self.node = node
        self.incarnation = incarnation
        self.peers = peers
        self.running: dict[str, str] = {}  # peer -> incarnation, while its app runs
        self.meta = Replica(node, tombstones=not breaks.forget_deletions)
        self.outbox = Outbox(node)
        self.confirms = ConfirmTracker(node, self.outbox, lambda: broker.durable_lsn,
                                       any_one=breaks.confirm_one_mirror,
                                       waits_for_dead=breaks.confirm_waits_for_dead)
        self.consumers = RemoteConsumers(node, self.outbox, self.find)
        self.calls = Calls(node, self.outbox, self.is_up)
        self.syncs = Syncs(self)
        self.mirrors = Mirrors(self)
        self.groups = GroupRelay(self)
        self.entities_dirty = True
        self.leaving: set[str] = set()  # peers that said they are stopping gracefully
        # Running peers whose metadata has not arrived since this app started; until it
        # has, queues recovered here are provisional.
        self.awaiting: set[str] = set()
        # Per queue recovered here and not yet settled: its saved succession (whose
        # copy is trusted first after a full-cluster crash, `QueueRecord.succession`).
        self._succession: dict[Key, list[str]] = {}
        self.on_settled: Callable[[], None] | None = None
        # The dispatch table: each peer message's class and its handler.
        self._handlers: dict[type, Callable[[str, Any], None]] = {
            Meta: self._received_meta,
            Bye: lambda peer, bye: self.leaving.add(peer),
            Forget: lambda peer, forget: self._forget(forget.node),
            Publishes: self._received_publishes,
            Confirms: self.confirms.received,
            GroupMessage: self.groups.received,
            CatchUpAsk: self.groups.catch_up_asked,
            SyncRequest: self.syncs.received,
            Consume: self.consumers.at_master,
            Cancel: self.consumers.at_master,
            Credit: self.consumers.at_master,
            Settle: self.consumers.at_master,
            Deliver: self.consumers.delivered,
            ConsumerGone: self.consumers.gone,
            Call: self._answer_call,
            Answer: self.calls.answered,
        }
        broker.cluster = self

    # -- the node's members -------------------------------------------------------------

    @property
    def me(self) -> Member:
        return member_id(self.node, self.incarnation)

    def mine(self, member: Member) -> bool:
        """Whether ``member`` is this node's run (under any id it joined a group with)."""
        return node_of(member) == self.node and incarnation_of(member) == self.incarnation

    def is_up(self, node: str) -> bool:
        return node == self.node or node in self.running

    def take_outbox(self) -> list[tuple[str, Envelope]]:
        return self.outbox.take()

    def received(self, peer: str, envelope: Envelope) -> None:
        """An envelope from ``peer``. One that is none of the protocol's raises
        `MalformedEnvelope` before anything is done."""
        if peer not in self.running:
            return  # partitioned off, forgotten, or its app is down: not our cluster now
        message = wire.decode(envelope)
        self._handlers[type(message)](peer, message)

    # -- metadata -----------------------------------------------------------------------

    def after_input(self) -> None:
        """After each batch of input: publish definition changes and sync progress."""
        if self.entities_dirty:
            self.entities_dirty = False
            self._sync_entities()
        self.syncs.after_input()

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
        if updates:
            for peer in self.running:
                self.outbox.send(peer, Meta(tuple(updates)))

    def write_record(self, record: QueueRecord) -> None:
        self._broadcast_meta([self.meta.put(record.key, record.to_json())])
        if record.durable:
            self.broker.save_definitions()  # its succession, before anything relies on it

    def _received_meta(self, peer: str, meta: Meta) -> None:
        news = []
        for update in meta.updates:
            if self.meta.apply(update):
                self._apply(update.key, update.value)
                news.append(update)
        if news:
            # Every node keeps the cluster's durable definitions (queues mastered
            # elsewhere too): whichever node starts first after a full stop has them.
            self.broker.save_definitions()
            # Passed on to the other peers: a write its node sent us may not have
            # reached them (a link that dropped it, a node that died right after).
            for other in self.running:
                if other != peer:
                    self.outbox.send(other, Meta(tuple(news), relay=True))
        if not meta.relay:  # its snapshot
            self._awaited(peer)

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

    def _awaited(self, peer: str) -> None:
        """``peer``'s metadata has arrived, or it never will (it went down)."""
        if peer in self.awaiting:
            self.awaiting.discard(peer)
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
        elif not (key[0] == "binding" and (
                self.breaks.bindings_not_replicated
                or (value is None and self.breaks.unbind_not_replicated))):
            entities.apply(self.broker, key, value)
        if key[0] == "policy":
            self.policy_changed()  # set on another node: our masters place mirrors anew

    # -- peers ----------------------------------------------------------------------------

    def peer_up(self, peer: str, incarnation: str) -> None:
        self.running[peer] = incarnation
        self.leaving.discard(peer)
        self.outbox.send(peer, Meta(tuple(self.meta.snapshot())))
        for queue in self.queues():
            if queue.is_master and not self.breaks.no_remirror:
                self.mirrors.place(queue)
            self.groups.peer_up(queue, peer)

    def peer_down(self, peer: str) -> None:
        self.running.pop(peer, None)
        self._awaited(peer)
        self.confirms.lost(peer)
        for queue in self.queues():
            self.mirrors.member_lost(queue, peer)
        self.calls.lost(peer)

    def leave(self) -> None:
        """This node's app is stopping gracefully: peers promote by
        ``ha-promote-on-shutdown`` rather than ``-on-failure``."""
        for peer in self.running:
            self.outbox.send(peer, Bye())

    def forget(self, node: str) -> str | None:
        """``forget_cluster_node`` of a stopped node: its replicas are dropped and the
        queues it mastered promote a mirror whatever their policy. Started again, it
        rejoins as a new node would, its mirrors empty."""
        if node in self.running:
            return f"node {node} is running; stop it first"
        if node not in self.peers:
            return f"node {node} is not in the cluster"
        for peer in self.running:
            self.outbox.send(peer, Forget(node))
        self._forget(node)
        return None

    def _forget(self, node: str) -> None:
        forced = not self.breaks.forget_no_promotion
        for queue in self.queues():
            self.mirrors.member_lost(queue, node, forced=forced)

    # -- queues and their records -------------------------------------------------------

    def queues(self) -> list[ClusterQueue]:
        return [q for vhost in self.broker.vhosts.values() for q in vhost.queues.values()
                if isinstance(q, ClusterQueue)]

    def find(self, ref: QueueRef) -> ClusterQueue | None:
        host = self.broker.vhosts.get(ref.vhost)
        queue = host.queues.get(ref.name) if host is not None else None
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
            self.mirrors.place(queue)
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
        for queue in self.queues():
            if queue.durable:
                key = queue.record.key
                saved[queue.vhost][queue.name] = (
                    self._succession[key] if self.meta.is_provisional(key)
                    else queue.record.succession())
        return dict(saved)

    def _settle_provisional(self) -> None:
        """A peer's metadata has arrived: queues recovered here that the cluster knows
        nothing of are ours, and are now announced."""
        for queue in self.queues():
            if queue.is_master and self.meta.is_provisional(queue.record.key):
                self.write_record(queue.record)
                self.mirrors.place(queue)
        self._succession.clear()

    def new_copy(self, queue: ClusterQueue | QueueRecord) -> Queue:
        """An empty copy of ``queue``'s messages, for a replica starting here."""
        host = self.broker.vhosts[queue.vhost]
        return Queue(queue.vhost, queue.name, durable=queue.durable,
                     auto_delete=queue.auto_delete, arguments=queue.arguments, log=host.log,
                     requeue_at_tail=self.breaks.requeue_at_tail)

    def _apply_queue(self, key: Key, value: dict[str, Any] | None) -> None:
        _, vhost_name, name = key
        queue = self.find(QueueRef(vhost_name, name))
        host = self.broker.vhosts.get(vhost_name)
        if value is None:
            if queue is not None and host is not None and not queue.deleted:
                queue.deleted = True
                self.broker.delete_queue(host, name)
            return
        if host is None:
            return
        record = QueueRecord.from_json(key, value)
        if node_of(record.master) == self.node and not self.mine(record.master):
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
            # meanwhile by `groups`). The old member must not go on: it would judge the
            # winning group's views by the old group's version numbers, and ignore one
            # as stale whose members it never had as neighbours.
            queue.stop_replica()
            queue.install(record)
        else:
            queue.install(record)
        mine = next((m for m in record.view.members if self.mine(m)), None)
        if queue.me is None and mine is not None:
            queue.start_mirror(mine)
            self.broker.events.emit(events.MirrorAdded(vhost=vhost_name, queue=name,
                                                       member=mine))
            self.groups.started(queue)

    def _reclaim(self, host: VirtualHost, queue: ClusterQueue | None,
                 record: QueueRecord) -> None:
        """The record still names an earlier run of this node as master: no mirror took
        over, so this node is the master again, with what it recovered from disk."""
        copy = queue.copy if queue is not None and queue.is_master else None
        if copy is None:
            copy = self.new_copy(record)
        reclaimed = QueueRecord(record.vhost, record.name, record.durable,
                                record.auto_delete, record.arguments,
                                View(record.view.version + 1, (self.me,)), uid=record.uid)
        fresh = ClusterQueue(self, reclaimed)
        fresh.start_master(self.me, copy)
        host.add_queue(fresh)
        self.write_record(reclaimed)
        self.broker.events.emit(events.QueueMaster(vhost=record.vhost, queue=record.name,
                                                   member=self.me, reclaimed=True))
        self.mirrors.place(fresh)

    def queue_deleted(self, queue: ClusterQueue) -> None:
        self.confirms.deleted(queue.record.uid)
        self.syncs.forget(queue)
        key = queue_key(queue.vhost, queue.name)
        if self.meta.get(key) is not None:
            self._broadcast_meta([self.meta.delete(key)])

    def policy_changed(self) -> None:
        self.mirrors.policy_changed()

    # -- syncs, as the node shell and the management API ask for them ---------------------

    def sync(self, queue: ClusterQueue) -> str | None:
        return self.syncs.start(queue)

    def cancel_sync(self, queue: ClusterQueue) -> str | None:
        return self.syncs.cancel(queue)

    def sync_sending(self) -> bool:
        return self.syncs.sending()

    def sync_step(self) -> bool:
        return self.syncs.step()

    # -- peer messages for queues -----------------------------------------------------------

    def _received_publishes(self, peer: str, publishes: Publishes) -> None:
        for run in publishes.runs:
            queue = self.find(run.queue)
            if queue is None:
                continue
            if queue.is_master and run.uid != queue.record.uid:
                # Routed to a declaration of this name that has been deleted: gone with
                # it, as a publish to a deleted queue is, and confirmed.
                for publish in run.publishes:
                    if publish.want:
                        self.confirms.confirm(publish.sender, publish.pubid, run.uid)
                continue
            for publish in run.publishes:
                queue.received_publish(publish)

    def _answer_call(self, peer: str, call: Call) -> None:
        result = calls.answer(self.broker, self.find(call.queue), call.ask)
        self.outbox.send(peer, Answer(call.call_id, result))

    # -- the broker's end of publishes ----------------------------------------------------

    def on_durable(self, lsn: int) -> None:
        self.confirms.on_durable(lsn)

    def channel_closed(self, channel: ClientChannel) -> None:
        self.confirms.channel_closed(channel)
