"""Each queue's GM traffic between this node's members and their neighbours on other
nodes.

A member's messages go out through the outbox (`ClusterQueue.flush_gm`); what arrives
for one is handed to it if it is the member named, of the declaration named. A message
for a member of ours whose record has not reached us yet (it travels on another link
than the catch-up does), or whose record is only provisional, is held and replayed once
the member starts. Catch-ups lost while a neighbour's node was down are asked for, or
sent, again when it comes back.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from cluster.ha.messages import CatchUpAsk, GroupMessage, QueueRef
from cluster.ha.record import Member, node_of

if TYPE_CHECKING:
    from cluster.ha.coordinator import Coordinator
    from cluster.ha.queue import ClusterQueue


class GroupRelay:
    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self._early: dict[tuple[QueueRef, str], list[GroupMessage]] = defaultdict(list)

    def received(self, peer: str, message: GroupMessage) -> None:
        coordinator = self.coordinator
        queue = coordinator.find(message.queue)
        if coordinator.mine(message.to) and (
                queue is None or queue.me is None or queue.record.uid != message.uid
                or coordinator.meta.is_provisional(queue.record.key)):
            self._early[(message.queue, message.uid)].append(message)
        elif queue is not None:
            self._to_member(queue, message)

    def started(self, queue: ClusterQueue) -> None:
        """A member of ours started: what arrived for it early is its own; what arrived
        for an older declaration of the queue is stale."""
        for held in [k for k in self._early if k[0] == queue.ref]:
            for message in self._early.pop(held):
                if held[1] == queue.record.uid:
                    self._to_member(queue, message)

    def _to_member(self, queue: ClusterQueue, message: GroupMessage) -> None:
        member = queue.member
        if member is None or queue.me != message.to or queue.record.uid != message.uid:
            return  # meant for an earlier incarnation of this replica, or of the queue
        member.receive(message.sender, message.message)
        queue.flush_gm()

    def ask_catch_up(self, queue: ClusterQueue, left: Member) -> None:
        if left != queue.me:
            assert queue.me is not None
            self.coordinator.outbox.send(node_of(left), CatchUpAsk(
                queue.ref, queue.record.uid, left, queue.me))

    def catch_up_asked(self, peer: str, ask: CatchUpAsk) -> None:
        queue = self.coordinator.find(ask.queue)
        member = queue.member if queue is not None else None
        if (queue is not None and member is not None and queue.me == ask.to
                and queue.record.uid == ask.uid and member.right == ask.sender):
            member.catch_up_right()
            queue.flush_gm()

    def peer_up(self, queue: ClusterQueue, peer: str) -> None:
        """GM messages to or from ``peer`` were dropped while it was not up (the
        coordinator takes nothing from a peer that is not running): a catch-up it should
        have had from us, or we from it, goes again, after the metadata that names its
        member."""
        member = queue.member
        if member is None:
            return
        if node_of(member.right) == peer:
            member.catch_up_right()
            queue.flush_gm()
        if node_of(member.left) == peer and not member.caught_up:
            self.ask_catch_up(queue, member.left)
