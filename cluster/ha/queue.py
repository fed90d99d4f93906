"""A queue as one node of the cluster sees it: master, mirror or neither.

Every node holds a `ClusterQueue` for each shared queue, so channels anywhere use it
the same way. What it does depends on the node's role in the queue's record:

* **master**: holds the messages (``copy``, a core `Queue`), decides their order and
  broadcasts every change through the queue's GM group (an `Op`); serves consumers of
  all nodes through `ConsumerProxy` objects that have the credit their channel granted.
* **mirror**: holds a copy that applies the master's broadcasts in GM order, and keeps
  publishes that channels sent it directly until the master's order names them, so a
  mirror promoted before they were ordered still enqueues them.
* **neither** (remote): forwards everything to the master's node.

On every node the local channels' consumers live here; credit for them is granted to
the master, which sends deliveries back. Channels use it as any queue of their vhost
(`HostedQueue`): what needs the messages, a node that is not the master asks the master.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from cluster.core.clients import Publishing
from cluster.core.hosted import ClientConsumer
from cluster.core.message import Message
from cluster.core.queue import (
    Counts,
    Entry,
    GetAnswer,
    Queue,
    Reply,
    exclusive_use_error,
    in_exclusive_use,
)
from cluster.gm import GroupMember, LostMembership
from cluster.ha import calls, sync
from cluster.ha.confirms import ConfirmWait
from cluster.ha.consumers import ConsumerProxy
from cluster.ha.messages import (
    Ask,
    AskConsume,
    AskCounts,
    AskDelete,
    AskGet,
    AskPurge,
    CallResult,
    Count,
    Op,
    Publish,
    PubOp,
    PurgeOp,
    QueueRef,
    Refused,
    RequeueOp,
    SettleOp,
    SyncOp,
    TakeOp,
)
from cluster.ha.record import Member, QueueRecord, node_of

if TYPE_CHECKING:
    from cluster.ha.coordinator import Coordinator

R = TypeVar("R")

# Deliveries a consumer without a prefetch limit may have in flight from another node.
CREDIT_WINDOW = 256


class ClusterQueue:
    def __init__(self, coordinator: Coordinator, record: QueueRecord,
                 exclusive_owner: int | None = None) -> None:
        self.coordinator = coordinator
        self.vhost = record.vhost
        self.name = record.name
        self.ref = QueueRef(self.vhost, self.name)
        self.durable = record.durable
        self.auto_delete = record.auto_delete
        self.arguments = record.arguments
        self.exclusive_owner = exclusive_owner
        self.record = record
        self.me: Member | None = None
        self.copy: Queue | None = None
        self.member: GroupMember | None = None
        # Channel side: this node's consumers and the credit granted for each.
        self.consumers: list[ClientConsumer] = []
        self.granted: dict[ClientConsumer, int] = {}
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

    # -- role -----------------------------------------------------------------------------

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
        self.coordinator.groups.ask_catch_up(self, self.member.left)

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
        self.coordinator.confirms.replicas_changed(record, old_uid)
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
                self.coordinator.mirrors.promoted(self)
            self.master_changed()

    # -- publishing -----------------------------------------------------------------------

    def publish(self, publishing: Publishing) -> int:
        """A local channel publishes: to the master and every mirror. Returns the store
        LSN a local replica needs, the other replicas confirm through the publishing's
        wait, which the first queue a message is routed to opens."""
        message, channel = publishing.message, publishing.channel
        sender, coordinator = channel.ref, self.coordinator
        wait = publishing.wait
        if wait is None:
            pubid = channel.next_pubid()
            if publishing.confirm:
                wait = publishing.wait = coordinator.confirms.waits.open(channel, pubid)
        else:
            # Routed to queues before this one: their replicas and ours confirm the
            # publish id its wait was opened under, which is what the wait is found by.
            assert isinstance(wait, ConfirmWait)
            pubid = wait.pubid
        lsn = 0
        here = coordinator.node
        want = wait is not None
        outgoing = Publish(sender, pubid, want, message)  # the same for every node
        for node in self.record.nodes():
            if not coordinator.is_up(node):
                continue  # it will not confirm: a mirror promoted meanwhile has it
            if node == here:
                if self.is_master:
                    lsn = self.order(message, sender, pubid, want)
                    if wait is not None:
                        wait.local = True
                    continue
                self.hold(message, sender, pubid, want)
            else:
                coordinator.outbox.publish(node, self.ref, self.record.uid, outgoing)
            if wait is not None:
                wait.expect(self.record.uid, node)
        return lsn

    def order(self, message: Message, sender: str, pubid: int, want: bool) -> int:
        """Master: enqueue and broadcast the order; returns the store LSN."""
        copy = self.copy
        assert copy is not None and self.member is not None
        seq = copy.next_seq
        lsn = copy.enqueue(message)
        self.broadcast(PubOp(seq, sender, pubid, want, message))
        return lsn

    def hold(self, message: Message, sender: str, pubid: int, want: bool) -> None:
        """Mirror: a channel's direct copy; kept until the master's order names it."""
        if pubid > self.ordered_upto.get(sender, 0):
            held = self.pending.get(sender)
            if held is None:
                held = self.pending[sender] = OrderedDict()
            held[pubid] = (message, want)

    def received_publish(self, publish: Publish) -> None:
        """A publish from another node's channel."""
        if self.is_master:
            lsn = self.order(publish.message, publish.sender, publish.pubid, publish.want)
            if publish.want:
                self.coordinator.confirms.when_durable(lsn, publish.sender, publish.pubid,
                                                       self.record.uid)
            assert self.copy is not None
            self.copy.dispatch()
        elif self.copy is not None:
            self.hold(publish.message, publish.sender, publish.pubid, publish.want)

    # -- the master's broadcasts (QueueObserver) ------------------------------------------

    def broadcast(self, op: Op) -> None:
        """Master: replicate ``op`` to the mirrors, if there are any."""
        if self.member is not None and len(self.record.view.members) > 1:
            self.member.broadcast(op)
            self.flush_gm()

    def taken(self, entry: Entry, no_ack: bool) -> None:
        if not (no_ack and self.coordinator.breaks.no_ack_not_replicated):
            self.broadcast(TakeOp(entry.seq, no_ack, entry.owner))
        self.coordinator.syncs.changed(self)

    def settled(self, seqs: list[int]) -> None:
        breaks = self.coordinator.breaks
        if not breaks.acks_not_replicated:
            self.broadcast(SettleOp(tuple(seqs[-1:] if breaks.multiple_ack_last_only else seqs)))
        self.coordinator.syncs.changed(self)

    def requeued(self, seqs: list[int]) -> None:
        self.broadcast(RequeueOp(tuple(seqs)))

    def purged(self) -> None:
        if not self.coordinator.breaks.purge_not_replicated:
            self.broadcast(PurgeOp())
        self.coordinator.syncs.changed(self)

    # -- GM -------------------------------------------------------------------------------

    def flush_gm(self) -> None:
        member = self.member
        if member is None:
            return
        assert self.me is not None
        outbox = self.coordinator.outbox
        # The outbox joins activity for one neighbour into one message until it is
        # taken, so a batch of input makes one GM message per hop.
        for target, message in member.take_outbox():
            outbox.gm(node_of(target), self.ref, self.record.uid, target, self.me, message)
        deliveries = member.take_deliveries()
        if self.coordinator.breaks.gm_reorder:
            _swap_neighbouring_publishes(deliveries)
        for sender, op in deliveries:
            if sender != self.me:
                self.apply(op)  # type: ignore[arg-type]

    def apply(self, op: Op) -> None:
        """Mirror: one of the master's changes, in GM order."""
        copy = self.copy
        if copy is None or self.is_master:
            return
        if isinstance(op, PubOp):
            lsn = copy.enqueue_at(op.seq, op.message)
            self.ordered_upto[op.sender] = max(self.ordered_upto.get(op.sender, 0), op.pubid)
            held = self.pending.get(op.sender)
            while held:
                first = next(iter(held))
                if first > op.pubid:
                    break
                del held[first]
            if op.want:
                self.coordinator.confirms.when_durable(lsn, op.sender, op.pubid,
                                                       self.record.uid)
        elif isinstance(op, TakeOp):
            copy.take_seq(op.seq, op.no_ack, op.owner)
        elif isinstance(op, SettleOp):
            copy.settle(op.seqs)
        elif isinstance(op, RequeueOp):
            copy.requeue(op.seqs)
        elif isinstance(op, PurgeOp):
            copy.purge()
        elif isinstance(op, SyncOp) and self.me in op.targets:
            sync.absorb(copy, op, drop_properties=self.coordinator.breaks.sync_drops_properties)

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
                self.coordinator.confirms.when_durable(lsn, sender, pubid, self.record.uid)
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
                self.coordinator.consumers.forget(consumer)
                consumer.failed_over()
            else:
                # What the consumer holds from the old master still counts against its
                # prefetch (grant subtracts it); the planted bug credits it again.
                self.granted[consumer] = (-consumer.unacked if breaks.credit_forgets_held
                                          else 0)
                self.coordinator.consumers.consume(self, consumer)
        self.dispatch()

    # -- what channels call ---------------------------------------------------------------

    def dispatch(self) -> None:
        for consumer in self.consumers:
            self.grant(consumer)
        if self.is_master:
            assert self.copy is not None
            self.copy.dispatch()

    def grant(self, consumer: ClientConsumer) -> None:
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
            self.coordinator.consumers.credit(self, consumer, more)

    def add_consumer(self, consumer: ClientConsumer) -> None:
        self.consumers.append(consumer)
        self.granted[consumer] = 0
        self.coordinator.consumers.consume(self, consumer)

    def remove_consumer(self, consumer: ClientConsumer) -> bool:
        """False: an auto-delete queue goes when its master says (`remove_proxy`)."""
        if consumer in self.consumers:
            self.consumers.remove(consumer)
            self.granted.pop(consumer, None)
            self.coordinator.consumers.cancel(self, consumer)
        return (self.coordinator.breaks.auto_delete_per_node and self.auto_delete
                and not self.consumers)

    def cancel_consumers(self) -> None:
        """The queue was deleted: this node's consumers are cancelled."""
        consumers, self.consumers = self.consumers, []
        for consumer in consumers:
            consumer.queue_deleted()

    def delivered(self, consumer: ClientConsumer) -> None:
        """A delivery arrived for ``consumer``: one credit used."""
        self.granted[consumer] = self.granted.get(consumer, 1) - 1

    def settle(self, seqs: Iterable[int], owner: str | None = None) -> None:
        if self.is_master:
            assert self.copy is not None
            self.copy.settle(seqs, owner)
        else:
            self.coordinator.consumers.settle(self, list(seqs), owner, requeue=False)

    def requeue(self, seqs: Iterable[int], owner: str | None = None) -> None:
        if self.is_master:
            assert self.copy is not None
            self.copy.requeue(seqs, owner)
        else:
            self.coordinator.consumers.settle(self, list(seqs), owner, requeue=True)

    def drop_all(self) -> None:
        """Deleted here: by a channel on the master, or because the record went."""
        self.deleted = True
        if self.copy is not None:
            self.copy.drop_all()
        for proxy in list(self.proxies.values()):
            proxy.queue_deleted()
        self.proxies.clear()
        self.coordinator.queue_deleted(self)

    # -- what channels ask: the master answers ------------------------------------------

    def ask_get(self, no_ack: bool, owner: str, reply: Reply[GetAnswer]) -> None:
        if self.is_master:
            assert self.copy is not None
            self.copy.ask_get(no_ack, owner, reply)
        else:
            self._ask_master(AskGet(no_ack, owner), GetAnswer, reply)

    def ask_purge(self, reply: Reply[int]) -> None:
        if self.is_master:
            assert self.copy is not None
            self.copy.ask_purge(reply)
        else:
            self._ask_master(AskPurge(), Count, calls.counted(reply))

    def ask_counts(self, reply: Reply[Counts]) -> None:
        if self.is_master:  # this node's channels' consumers (asked from elsewhere: all)
            reply(Counts(self.ready_count, len(self.consumers)))
        else:
            self._ask_master(AskCounts(), Counts, reply)

    def ask_consume(self, exclusive: bool, reply: Reply[Counts]) -> None:
        """This node's consumers answer at once; then the master, which holds every
        node's. A master whose node is down cannot say: the consumer joins, as any
        consumer of a queue in failover, and the promoted master learns of it."""
        if in_exclusive_use(self.consumers, exclusive):
            reply(exclusive_use_error(self.vhost, self.name))
        elif self.is_master:
            assert self.copy is not None
            self.copy.ask_consume(exclusive, reply)
        else:
            def answered(result: CallResult) -> None:
                if isinstance(result, Refused) and result.reason == "down":
                    reply(Counts(self.ready_count, len(self.consumers)))
                else:
                    reply(calls.read(self, result, Counts))
            self.coordinator.calls.call(self, AskConsume(exclusive), answered)

    def ask_delete(self, if_unused: bool, if_empty: bool, delete_here: Callable[[], int],
                   reply: Reply[int]) -> None:
        """The master answers, here as for a node that asks: if_unused counts every
        node's consumers, which only its copy holds."""
        ask = AskDelete(if_unused, if_empty)
        if self.is_master:
            result = calls.answer(self.coordinator.broker, self, ask)
            calls.counted(reply)(calls.read(self, result, Count))
        else:
            self._ask_master(ask, Count, calls.counted(reply))

    def _ask_master(self, ask: Ask, kind: type[R], reply: Reply[R]) -> None:
        self.coordinator.calls.call(self, ask, lambda result: reply(calls.read(self, result,
                                                                                kind)))

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
        """A consumer of any node gone: an auto-delete queue goes with its last one."""
        proxy = self.proxies.pop(key, None)
        if (proxy is not None and self.copy is not None and self.copy.remove_consumer(proxy)
                and not self.coordinator.breaks.auto_delete_kept):
            broker = self.coordinator.broker
            broker.delete_queue(broker.vhosts[self.vhost], self.name)

    def node_down(self, node: str) -> None:
        """Master: a node died; its channels' consumers go, their messages come back."""
        copy = self.copy
        assert copy is not None
        for key in [k for k, p in self.proxies.items() if p.node == node]:
            self.remove_proxy(key)
        if self.deleted:  # its last consumers were there, and it was auto-delete
            return
        held = copy.unacked_on(node)
        if held:
            copy.requeue(held)
        copy.dispatch()

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
        if isinstance(first, PubOp) and isinstance(second, PubOp) and first.seq < second.seq:
            deliveries[i], deliveries[i + 1] = deliveries[i + 1], deliveries[i]
