"""A queue as one node of the cluster sees it: master, mirror or neither.

Every node holds a `ClusterQueue` for each shared queue, so channels anywhere use it
the same way. What it does depends on the node's role in the queue's record:

* **master**: holds the messages (``copy``, a core `Queue`), decides their order and
  broadcasts every change through the queue's GM group; serves consumers of all nodes
  through `ConsumerProxy` objects that have the credit their channel granted.
* **mirror**: holds a copy that applies the master's broadcasts in GM order, and keeps
  publishes that channels sent it directly until the master's order names them, so a
  mirror promoted before they were ordered still enqueues them.
* **neither** (remote): forwards everything to the master's node.

On every node the local channels' consumers live here; credit for them is granted to
the master, which sends deliveries back.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cluster.core.message import Message
from cluster.core.queue import Entry, Queue
from cluster.gm import GroupMember, LostMembership, View
from cluster.ha.confirms import ConfirmWait
from cluster.ha.record import Member, QueueRecord, node_of
from cluster.ha.wire import OutgoingGM

if TYPE_CHECKING:
    from cluster.amqp.channel import ChannelConsumer
    from cluster.ha.coordinator import Coordinator

# Deliveries a consumer without a prefetch limit may have in flight from another node.
CREDIT_WINDOW = 256
# A content header of class basic (60) with no properties: all the planted bug
# sync-drops-properties leaves of a synced message's header (weight, body size, flags).
_BARE_HEADER = struct.Struct(">HHQH")


def consumer_key(consumer: ChannelConsumer) -> str:
    return f"{consumer.owner}|{consumer.tag}"


class ConsumerProxy:
    """A consumer of some node's channel, as the master's queue serves it."""

    def __init__(self, queue: ClusterQueue, key: str, node: str, owner: str, no_ack: bool,
                 exclusive: bool) -> None:
        self.cluster_queue = queue
        self.tag = key
        self.node = node
        self.owner = owner
        self.no_ack = no_ack
        self.exclusive = exclusive
        self.credit = 0

    def can_take(self) -> bool:
        return self.credit > 0

    def take(self, queue: Queue, entry: Entry, redelivered: bool) -> None:
        self.credit -= 1
        self.cluster_queue.coordinator.deliver(self, self.cluster_queue, entry, redelivered)

    def queue_deleted(self) -> None:
        self.cluster_queue.coordinator.consumer_gone(self, self.cluster_queue)


class ClusterQueue:
    replicated = True

    def __init__(self, coordinator: Coordinator, record: QueueRecord,
                 exclusive_owner: int | None = None) -> None:
        self.coordinator = coordinator
        self.vhost = record.vhost
        self.name = record.name
        self.durable = record.durable
        self.auto_delete = record.auto_delete
        self.arguments = record.arguments
        self.exclusive_owner = exclusive_owner
        self.record = record
        self.me: Member | None = None
        self.copy: Queue | None = None
        self.member: GroupMember | None = None
        # Channel side: this node's consumers and the credit granted for each.
        self.consumers: list[ChannelConsumer] = []
        self.had_consumers = False
        self.granted: dict[ChannelConsumer, int] = {}
        # Master side.
        self.proxies: dict[str, ConsumerProxy] = {}
        self.join_seq: dict[Member, int] = {}
        # Mirror side: direct publishes not yet ordered, by sender and publish id (in
        # the order the sender published them, which is the order the master's are in).
        self.pending: dict[str, OrderedDict[int, tuple[Message, bool]]] = {}
        self.ordered_upto: dict[str, int] = {}
        self.deleted = False
        # The planted bug ``--break rejoin-keeps-contents``: what this node held when it
        # stopped being a replica, taken up again should it rejoin.
        self.kept: Queue | None = None
        # The GM message this replica sent last, while it may still grow (flush_gm).
        self._last_gm: tuple[list[Any], GroupMember, Member, OutgoingGM] | None = None

    # -- role -----------------------------------------------------------------------------

    @property
    def key(self) -> str:
        return f"{self.vhost}\x00{self.name}"

    @property
    def is_master(self) -> bool:
        return self.me is not None and self.me == self.record.master

    @property
    def master_node(self) -> str:
        return node_of(self.record.master)

    @property
    def ready_count(self) -> int:
        return self.copy.ready_count if self.copy is not None else 0

    @property
    def message_bytes(self) -> int:
        return self.copy.message_bytes if self.copy is not None else 0

    def start_master(self, me: Member, copy: Queue) -> None:
        """This node declared the queue (or restored it): it is the master."""
        self.me, self.copy = me, copy
        copy.observer = self
        self.member = self._new_member(me)
        self.member.create(self.record.view)

    def start_mirror(self, me: Member) -> None:
        """The master added this node: start empty and wait for the GM catch-up."""
        self.me = me
        self.copy = self.kept or self.coordinator.new_copy(self)
        self.kept = None
        self.member = self._new_member(me)
        self.member.join(self.record.view)
        self.flush_gm()
        # The left-hand neighbour's catch-up may have reached an earlier member of ours
        # (the group of one a recovered master made): ask for it again.
        self.coordinator.ask_catch_up(self, self.member.left)

    def _new_member(self, me: Member) -> GroupMember:
        return GroupMember(me, takeover=not self.coordinator.breaks.no_gm_takeover)

    def stop_replica(self) -> None:
        """No longer a member: forget the messages, keep serving channels remotely."""
        if self.copy is not None:
            if self.coordinator.breaks.rejoin_keeps_contents:
                self.kept, self.copy.observer = self.copy, None
            else:
                self.copy.drop_all()
        self.me = self.copy = self.member = None
        self.pending.clear()
        self.ordered_upto.clear()
        self.proxies.clear()

    def install(self, record: QueueRecord) -> None:
        """A newer record: a view change for the GM member, maybe a new master (this
        mirror, promoted)."""
        old_master, old_uid = self.record.master, self.record.uid
        was_mirror = self.copy is not None and not self.is_master
        self.record = record
        self.coordinator.replicas_changed(record, old_uid)
        member = self.member
        if member is not None:
            if self.me not in record.view:
                # Dropped, or the cluster's record won over ours after a restart.
                self.stop_replica()
            else:
                try:
                    member.install_view(record.view)
                except LostMembership:
                    self.stop_replica()
                self.flush_gm()
        if record.master != old_master:
            if was_mirror and self.is_master:
                self.promote()
                self.coordinator.promoted(self)
            self.master_changed()

    # -- publishing -----------------------------------------------------------------------

    def publish(self, message: Message, sender: str, pubid: int,
                wait: ConfirmWait | None) -> int:
        """A local channel publishes: to the master and every mirror. Returns the store
        LSN a local replica needs, the other replicas confirm through ``wait``."""
        lsn = 0
        here = self.coordinator.node
        want = wait is not None
        for node in self.record.nodes():
            if not self.coordinator.is_up(node):
                continue  # it will not confirm: a mirror promoted meanwhile has it
            if node == here:
                if self.is_master:
                    lsn = self.order(message, sender, pubid, want)
                    if wait is not None:
                        wait.local = True
                    continue
                self.hold(message, sender, pubid, want)
            else:
                self.coordinator.send_publish(node, self, message, sender, pubid, want)
            if wait is not None:
                wait.outstanding.add((self.record.uid, node))
        return lsn

    def order(self, message: Message, sender: str, pubid: int, want: bool) -> int:
        """Master: enqueue and broadcast the order; returns the store LSN."""
        copy = self.copy
        assert copy is not None and self.member is not None
        seq = copy.next_seq
        lsn = copy.enqueue(message)
        if len(self.record.view.members) > 1:
            self.member.broadcast(["pub", seq, sender, pubid, want, message])
            self.flush_gm()
        return lsn

    def hold(self, message: Message, sender: str, pubid: int, want: bool) -> None:
        """Mirror: a channel's direct copy; kept until the master's order names it."""
        if pubid > self.ordered_upto.get(sender, 0):
            held = self.pending.get(sender)
            if held is None:
                held = self.pending[sender] = OrderedDict()
            held[pubid] = (message, want)

    def received_publish(self, message: Message, sender: str, pubid: int, want: bool) -> None:
        """A publish from another node's channel."""
        if self.is_master:
            lsn = self.order(message, sender, pubid, want)
            if want:
                self.coordinator.confirm_when_durable(lsn, sender, pubid, self.record.uid)
            assert self.copy is not None
            self.copy.dispatch()
        elif self.copy is not None:
            self.hold(message, sender, pubid, want)

    # -- the master's broadcasts (QueueObserver) ------------------------------------------

    def _broadcast(self, op: list[Any]) -> None:
        if self.member is not None and len(self.record.view.members) > 1:
            self.member.broadcast(op)
            self.flush_gm()

    def taken(self, entry: Entry, no_ack: bool) -> None:
        if not (no_ack and self.coordinator.breaks.no_ack_not_replicated):
            self._broadcast(["take", entry.seq, no_ack, entry.owner])
        self.coordinator.queue_changed(self)

    def settled(self, seqs: list[int]) -> None:
        breaks = self.coordinator.breaks
        if not breaks.acks_not_replicated:
            self._broadcast(["settle", seqs[-1:] if breaks.multiple_ack_last_only else seqs])
        self.coordinator.queue_changed(self)

    def requeued(self, seqs: list[int]) -> None:
        self._broadcast(["requeue", seqs])

    def purged(self) -> None:
        if not self.coordinator.breaks.purge_not_replicated:
            self._broadcast(["purge"])
        self.coordinator.queue_changed(self)

    # -- GM -------------------------------------------------------------------------------

    def flush_gm(self) -> None:
        member = self.member
        if member is None:
            return
        coordinator = self.coordinator
        for target, message in member.take_outbox():
            # Activity for the member our last GM message went to joins that message
            # while it waits in the coordinator's outbox (the same outbox list: the
            # shell has not taken it), so a batch of input makes one GM message per
            # hop, not one per broadcast.
            last = self._last_gm
            if (last is not None and last[0] is coordinator.outbox and last[1] is member
                    and last[2] == target and last[3].absorb(message)):
                continue
            out = coordinator.send_gm(self, target, message)
            self._last_gm = (coordinator.outbox, member, target, out)
        deliveries = member.take_deliveries()
        if self.coordinator.breaks.gm_reorder:
            _swap_neighbouring_publishes(deliveries)
        for sender, op in deliveries:
            if sender != self.me:
                self.apply(op)  # type: ignore[arg-type]

    def apply(self, op: list[Any]) -> None:
        """Mirror: one of the master's changes, in GM order."""
        copy = self.copy
        if copy is None or self.is_master:
            return
        kind = op[0]
        if kind == "pub":
            _, seq, sender, pubid, want, message = op
            lsn = copy.enqueue_at(seq, message)
            self.ordered_upto[sender] = max(self.ordered_upto.get(sender, 0), pubid)
            held = self.pending.get(sender)
            while held:
                first = next(iter(held))
                if first > pubid:
                    break
                del held[first]
            if want:
                self.coordinator.confirm_when_durable(lsn, sender, pubid, self.record.uid)
        elif kind == "take":
            copy.take_seq(op[1], op[2], op[3])
        elif kind == "settle":
            copy.settle(op[1])
        elif kind == "requeue":
            copy.requeue(op[1])
        elif kind == "purge":
            copy.purge()
        elif kind == "sync" and self.me in op[1]:
            self._absorb_sync(op[2])

    def _absorb_sync(self, batch: list[list[Any]]) -> None:
        """Mirror: older messages from the master's sync, each with its delivery state
        (an owner: unacknowledged there)."""
        copy = self.copy
        assert copy is not None
        if not batch:
            return
        have = {e.seq for e in copy.held(batch[0][0], batch[-1][0] + 1)}
        drop_properties = self.coordinator.breaks.sync_drops_properties
        for seq, delivered, owner, message in batch:
            if drop_properties:
                message = replace(message, header=_BARE_HEADER.pack(60, 0, len(message.body), 0))
            if seq not in have:
                copy.insert_old(Entry(seq, message, delivered, owner or ""))

    def sync_batch(self, targets: list[Member], low: int, high: int, size: int) -> int:
        """Master: broadcast the next batch of messages older than the targets' joins,
        from ``low``; returns where the next batch starts (``high`` when done)."""
        copy = self.copy
        assert copy is not None
        entries = copy.held(low, high)[:size]
        if not entries:
            return high
        self._broadcast(["sync", targets, [
            [e.seq, e.delivered, e.owner if e.seq in copy.unacked else None, e.message]
            for e in entries]])
        return entries[-1].seq + 1

    def promote(self) -> None:
        """The master died (or handed over) and this is the eldest surviving mirror: take
        over. Every unacknowledged message goes back and every ready one may have been
        delivered already, so all are redelivered flagged; publishes that reached us but
        were never ordered are enqueued and confirmed."""
        copy = self.copy
        assert copy is not None
        copy.observer = self
        breaks = self.coordinator.breaks
        if not breaks.no_requeue_on_promotion:
            copy.requeue(list(copy.unacked))
        unordered = [(pubid, sender, message, want) for sender, held in self.pending.items()
                     for pubid, (message, want) in held.items()]
        for pubid, sender, message, want in sorted(unordered, key=lambda u: u[0]):
            lsn = 0 if breaks.drop_held_publishes else self.order(message, sender, pubid, want)
            if want:
                self.coordinator.confirm_when_durable(lsn, sender, pubid, self.record.uid)
        self.pending.clear()
        # The old master's last orders and deliveries may not have reached us through GM:
        # a publish we only held may have been delivered already, and so may the head.
        copy.mark_ready_delivered()
        self.join_seq = {m: copy.next_seq for m in self.record.mirrors
                         if m not in self.record.synced}

    def master_changed(self) -> None:
        """Channel side: consumers move to the new master, except those that asked to
        be told (``x-cancel-on-ha-failover``), which are cancelled."""
        breaks = self.coordinator.breaks
        for consumer in list(self.consumers):
            asked = bool(consumer.arguments.get("x-cancel-on-ha-failover"))
            if breaks.cancel_all_on_failover or (asked and not breaks.no_failover_cancel):
                self.consumers.remove(consumer)
                self.granted.pop(consumer, None)
                self.coordinator.forget_consumer(consumer)
                consumer.channel.cancel_by_server(consumer)
            else:
                # What the consumer holds from the old master still counts against its
                # prefetch (grant subtracts it); the planted bug credits it again.
                self.granted[consumer] = (-consumer.unacked if breaks.credit_forgets_held
                                          else 0)
                self.coordinator.consume(self, consumer)
        self.dispatch()

    # -- what channels call ---------------------------------------------------------------

    def dispatch(self) -> None:
        for consumer in self.consumers:
            self.grant(consumer)
        if self.is_master:
            assert self.copy is not None
            self.copy.dispatch()

    def grant(self, consumer: ChannelConsumer) -> None:
        """Credit for ``consumer`` up to what it may hold; called as it acks and after
        each delivery (a no-ack consumer never acks)."""
        if not consumer.channel.can_deliver():
            return
        if consumer.prefetch:
            window, least = consumer.prefetch - consumer.unacked, 1
        else:  # no limit: top up in halves of the window, not a message at a time
            window, least = CREDIT_WINDOW, CREDIT_WINDOW // 2
        more = window - self.granted.get(consumer, 0)
        if more >= least:
            self.granted[consumer] = self.granted.get(consumer, 0) + more
            self.coordinator.credit(self, consumer, more)

    def add_consumer(self, consumer: ChannelConsumer) -> None:
        self.consumers.append(consumer)
        self.had_consumers = True
        self.granted[consumer] = 0
        self.coordinator.consume(self, consumer)

    def remove_consumer(self, consumer: ChannelConsumer) -> None:
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            self.granted.pop(consumer, None)
            self.coordinator.cancel(self, consumer)

    def delivered(self, consumer: ChannelConsumer) -> None:
        """A delivery arrived for ``consumer``: one credit used."""
        self.granted[consumer] = self.granted.get(consumer, 1) - 1

    def take_next(self, no_ack: bool, owner: str = "") -> tuple[Entry, bool] | None:
        assert self.copy is not None and self.is_master
        return self.copy.take_next(no_ack, owner)

    def settle(self, seqs: Iterable[int], owner: str | None = None) -> None:
        if self.is_master:
            assert self.copy is not None
            self.copy.settle(seqs, owner)
        else:
            self.coordinator.settle(self, list(seqs), owner, requeue=False)

    def requeue(self, seqs: Iterable[int], owner: str | None = None) -> None:
        if self.is_master:
            assert self.copy is not None
            self.copy.requeue(seqs, owner)
        else:
            self.coordinator.settle(self, list(seqs), owner, requeue=True)

    def purge(self) -> int:
        assert self.copy is not None and self.is_master
        return self.copy.purge()

    def drop_all(self) -> None:
        """Deleted here: by a channel on the master, or because the record went."""
        self.deleted = True
        if self.copy is not None:
            self.copy.drop_all()
        for proxy in list(self.proxies.values()):
            proxy.queue_deleted()
        self.proxies.clear()
        self.coordinator.queue_deleted(self)

    # -- master side: other nodes' consumers ----------------------------------------------

    def add_proxy(self, key: str, node: str, owner: str, no_ack: bool,
                  exclusive: bool) -> ConsumerProxy:
        proxy = self.proxies.get(key)
        if proxy is None:
            proxy = self.proxies[key] = ConsumerProxy(self, key, node, owner, no_ack,
                                                       exclusive)
            assert self.copy is not None
            self.copy.add_consumer(proxy)
        return proxy

    def remove_proxy(self, key: str) -> None:
        proxy = self.proxies.pop(key, None)
        if proxy is not None and self.copy is not None:
            self.copy.remove_consumer(proxy)

    def node_down(self, node: str) -> None:
        """Master: a node died; its channels' consumers go, their messages come back."""
        copy = self.copy
        assert copy is not None
        for key in [k for k, p in self.proxies.items() if p.node == node]:
            self.remove_proxy(key)
        held = copy.unacked_of(f"{node}|")
        if held:
            copy.requeue(held)
        copy.dispatch()

    def unsynchronised_now_synced(self) -> list[Member]:
        """Master: mirrors that joined at seq J hold every message once nothing older
        than J is left."""
        if not self.join_seq or self.copy is None:
            return []
        oldest = self.copy.oldest_seq()
        done = [m for m, joined in self.join_seq.items() if oldest >= joined]
        for member in done:
            del self.join_seq[member]
        return done

    def view(self) -> View:
        return self.record.view

    def gm_last_seq(self) -> int:
        """The seq of this member's latest GM broadcast (-1: none, or no group)."""
        return self.member.last_seq if self.member is not None else -1

    def gm_reached(self, seq: int) -> bool:
        """Whether this member's broadcasts up to ``seq`` have reached every member."""
        return self.member is None or self.member.confirmed_upto >= seq


def _swap_neighbouring_publishes(deliveries: list[tuple[str, Any]]) -> None:
    """The planted bug ``--break gm-reorder``: each pair of publishes delivered together
    is applied in swapped order, so the mirror's queue order is not the master's."""
    for i in range(0, len(deliveries) - 1, 2):
        first, second = deliveries[i][1], deliveries[i + 1][1]
        if first[0] == "pub" and second[0] == "pub" and first[1] < second[1]:
            deliveries[i], deliveries[i + 1] = deliveries[i + 1], deliveries[i]
