"""Publisher confirms across nodes: what each publish waits for, and what this node's
replicas owe the channels that published to them.

A channel here that publishes with confirms to a queue with replicas elsewhere waits
for every replica (`ConfirmWait`, kept per channel by `ChannelWaits`). Each replica
confirms once it holds the message, after the store's fsync when it is persistent
(`ConfirmTracker.when_durable`): to the channel's node in a ``q.confirm``, or, for a
channel of its own node, at once. A replica that dies, is dropped by the policy or is
deleted with its queue stops being waited for.
"""

from __future__ import annotations

from collections.abc import Callable

from cluster.core.clients import ClientChannel, node_of_ref
from cluster.ha.messages import Confirms
from cluster.ha.outbox import Outbox
from cluster.ha.record import QueueRecord

ReplicaRef = tuple[str, str]  # (queue declaration uid, node)


class ConfirmWait:
    """The replicas (queue declaration and node) that have yet to confirm one publish,
    ``pubid`` of its channel, whichever queues it was routed to.

    A replica on the publishing channel's own node is covered by the store's LSN, as a
    single node's confirms are (``local``). A replica that dies stops being waited for;
    a publish that no replica ever confirmed and no local one holds is nacked.
    """

    __slots__ = ("any_one", "confirmed", "local", "outstanding", "pubid")

    def __init__(self, pubid: int, *, any_one: bool = False) -> None:
        self.pubid = pubid
        self.outstanding: set[ReplicaRef] = set()
        self.confirmed = 0
        self.local = False
        self.any_one = any_one  # planted bug confirm-one-mirror: one confirm is enough

    @property
    def done(self) -> bool:
        return not self.outstanding

    @property
    def failed(self) -> bool:
        return not self.outstanding and not self.local and self.confirmed == 0

    def expect(self, uid: str, node: str) -> None:
        self.outstanding.add((uid, node))

    def heard(self, replica: ReplicaRef) -> None:
        if replica in self.outstanding:
            self.outstanding.discard(replica)
            self.confirmed += 1
            if self.any_one:
                self.outstanding.clear()

    def lost(self, node: str) -> None:
        self.outstanding = {r for r in self.outstanding if r[1] != node}

    def left(self, uid: str, nodes: set[str]) -> None:
        """The queue declaration ``uid`` now has replicas on ``nodes`` only: one dropped
        from it (a policy that no longer covers its node) will not confirm."""
        self.outstanding = {r for r in self.outstanding if r[0] != uid or r[1] in nodes}

    def deleted(self, uid: str) -> None:
        """The queue was deleted: what it had is gone with it, and counts as confirmed
        (RabbitMQ confirms publishes to a queue that is deleted)."""
        gone = {r for r in self.outstanding if r[0] == uid}
        if gone:
            self.outstanding -= gone
            self.confirmed += 1


class ChannelWaits:
    """The publishes of this node's channels that wait for replicas, by channel (its
    cluster-wide name, which confirms carry) and publish id. A channel is called back
    when one of its publishes is done waiting."""

    def __init__(self, *, any_one: bool = False) -> None:
        self.any_one = any_one  # planted bug confirm-one-mirror, for every wait
        self._channels: dict[str, tuple[ClientChannel, dict[int, ConfirmWait]]] = {}

    def open(self, channel: ClientChannel, pubid: int) -> ConfirmWait:
        """A wait for ``channel``'s publish ``pubid``."""
        found = self._channels.get(channel.ref)
        if found is None:
            found = self._channels[channel.ref] = (channel, {})
        wait = found[1][pubid] = ConfirmWait(pubid, any_one=self.any_one)
        return wait

    def forget(self, channel: ClientChannel) -> None:
        """The channel closed: its confirms are no longer wanted."""
        self._channels.pop(channel.ref, None)

    def heard(self, sender: str, pubids: tuple[int, ...], replica: ReplicaRef) -> None:
        """``replica`` holds these publishes of the channel named ``sender``."""
        found = self._channels.get(sender)
        if found is None:
            return
        channel, waits = found
        done = False
        for pubid in pubids:
            wait = waits.get(pubid)
            if wait is not None:
                wait.heard(replica)
                if wait.done:
                    del waits[pubid]
                    done = True
        if done:
            channel.replicas_confirmed()

    def change_all(self, change: Callable[[ConfirmWait], None]) -> None:
        """``change`` every wait (replicas that will not confirm); a publish left waiting
        for none is done at once, since a confirm released only in order would
        otherwise hold up every later one of its channel."""
        for channel, waits in self._channels.values():
            for pubid, wait in list(waits.items()):
                change(wait)
                if wait.done:
                    del waits[pubid]
                    channel.replicas_confirmed()


class ConfirmTracker:
    """This node's confirms, both ends: its channels' waits (``waits``) and what its
    replicas confirm once the store has made it durable."""

    def __init__(self, node: str, outbox: Outbox, durable_lsn: Callable[[], int], *,
                 any_one: bool = False, waits_for_dead: bool = False) -> None:
        self.node = node
        self.outbox = outbox
        self.durable_lsn = durable_lsn
        self.waits = ChannelWaits(any_one=any_one)
        # The planted bug confirm-waits-for-dead: waits keep replicas that will never
        # confirm (dead, dropped, of a declaration that lost).
        self.waits_for_dead = waits_for_dead
        self._durable: list[tuple[int, str, int, str]] = []  # (lsn, sender, pubid, uid)

    def when_durable(self, lsn: int, sender: str, pubid: int, uid: str) -> None:
        """The replica here of declaration ``uid`` holds publish ``pubid`` of channel
        ``sender`` once the store is durable up to ``lsn``."""
        if lsn <= self.durable_lsn():
            self.confirm(sender, pubid, uid)
        else:
            self._durable.append((lsn, sender, pubid, uid))

    def on_durable(self, lsn: int) -> None:
        ready = [c for c in self._durable if c[0] <= lsn]
        if ready:
            self._durable = [c for c in self._durable if c[0] > lsn]
            for _, sender, pubid, uid in ready:
                self.confirm(sender, pubid, uid)

    def confirm(self, sender: str, pubid: int, uid: str) -> None:
        node = node_of_ref(sender)
        if node == self.node:
            self.waits.heard(sender, (pubid,), (uid, self.node))
        else:
            self.outbox.confirm(node, sender, uid, pubid)

    def received(self, peer: str, confirms: Confirms) -> None:
        for run in confirms.runs:
            self.waits.heard(run.sender, run.pubids, (run.uid, confirms.node))

    def lost(self, node: str) -> None:
        if not self.waits_for_dead:
            self.waits.change_all(lambda wait: wait.lost(node))

    def replicas_changed(self, record: QueueRecord, old_uid: str) -> None:
        """A queue's new record: publishes stop waiting for replicas it dropped, and for
        every replica of the declaration it replaced (another uid: a record that lost,
        whose replicas start over in the winner's group and confirm only under its uid)."""
        if self.waits_for_dead:
            return
        nodes = set(record.nodes())

        def change(wait: ConfirmWait) -> None:
            wait.left(record.uid, nodes)
            if old_uid != record.uid:
                wait.left(old_uid, set())

        self.waits.change_all(change)

    def deleted(self, uid: str) -> None:
        self.waits.change_all(lambda wait: wait.deleted(uid))

    def channel_closed(self, channel: ClientChannel) -> None:
        self.waits.forget(channel)
