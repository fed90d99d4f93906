"""What this node's coordinator has for its peers until the node shell takes it: the
one place that batches.

A batch of input (one read of a client's bytes, one read from a peer link) makes many
publishes, confirms and GM broadcasts, and each peer should get them as few envelopes:

* publishes for a node join the `Publishes` envelope queued last for it, and confirms
  the `Confirms` envelope, but only while nothing else is queued for that node after
  it: what joins a batch must not overtake what was queued since (the link's order);
* a GM member's activity for its neighbour joins the activity it sent that neighbour
  since the outbox was last taken, if the view is the same (GM takes a message's
  entries in any grouping: acks are watermarks applied after the broadcasts).

So a batch of publishes makes one GM message per hop, one ``q.pub`` per replica's node
and one ``q.confirm`` per replica. `take` ends every batch and hands over the envelopes,
in order, encoded (`cluster.ha.wire`).
"""

from __future__ import annotations

from cluster.gm import Activity, GMMessage
from cluster.ha.messages import (
    ConfirmRun,
    Confirms,
    GroupMessage,
    PeerMessage,
    Publish,
    Publishes,
    PublishRun,
    QueueRef,
)
from cluster.ha.record import Member
from cluster.ha.wire import encode
from cluster.peer.codec import Envelope


class _PublishBatch:
    """A `Publishes` envelope still growing: runs of (queue, uid, publishes)."""

    __slots__ = ("runs",)

    def __init__(self) -> None:
        self.runs: list[tuple[QueueRef, str, list[Publish]]] = []

    def add(self, queue: QueueRef, uid: str, publish: Publish) -> None:
        runs = self.runs
        if not runs or runs[-1][1] != uid or runs[-1][0] != queue:
            runs.append((queue, uid, []))
        runs[-1][2].append(publish)

    def done(self) -> Publishes:
        return Publishes(tuple(PublishRun(queue, uid, tuple(publishes))
                               for queue, uid, publishes in self.runs))


class _ConfirmBatch:
    """A `Confirms` envelope still growing: publish ids by sender, then declaration."""

    __slots__ = ("node", "senders")

    def __init__(self, node: str) -> None:
        self.node = node
        self.senders: dict[str, dict[str, list[int]]] = {}

    def add(self, sender: str, uid: str, pubid: int) -> None:
        self.senders.setdefault(sender, {}).setdefault(uid, []).append(pubid)

    def done(self) -> Confirms:
        return Confirms(self.node, tuple(ConfirmRun(sender, uid, tuple(pubids))
                                         for sender, uids in self.senders.items()
                                         for uid, pubids in uids.items()))


def absorb(mine: GMMessage, later: GMMessage) -> bool:
    """Merge ``later``, the next message from the same member to the same neighbour,
    into ``mine``; False (nothing done) when one is not activity or their views differ."""
    if not (isinstance(mine, Activity) and isinstance(later, Activity)
            and mine.view_version == later.view_version):
        return False
    for entry in later.entries:
        mine.add(entry.sender, entry.pubs, entry.ack)
    return True


_Queued = PeerMessage | _PublishBatch | _ConfirmBatch
_BATCHES = (_PublishBatch, _ConfirmBatch)


class Outbox:
    def __init__(self, node: str) -> None:
        self.node = node
        self._queued: list[tuple[str, _Queued]] = []
        self._last: dict[str, _Queued] = {}  # per peer, what was queued for it last
        # Per sending member (its queue, declaration and id), the GM message it queued
        # last and for whom: later activity for the same member may join it.
        self._gm: dict[tuple[QueueRef, str, Member], GroupMessage] = {}

    def send(self, peer: str, message: PeerMessage) -> None:
        self._queued.append((peer, message))
        self._last[peer] = message

    def publish(self, peer: str, queue: QueueRef, uid: str, publish: Publish) -> None:
        batch = self._last.get(peer)
        if not isinstance(batch, _PublishBatch):
            batch = _PublishBatch()
            self._queued.append((peer, batch))
            self._last[peer] = batch
        batch.add(queue, uid, publish)

    def confirm(self, peer: str, sender: str, uid: str, pubid: int) -> None:
        """The replica here of declaration ``uid`` holds publish ``pubid`` of channel
        ``sender``, on ``peer``."""
        batch = self._last.get(peer)
        if not isinstance(batch, _ConfirmBatch):
            batch = _ConfirmBatch(self.node)
            self._queued.append((peer, batch))
            self._last[peer] = batch
        batch.add(sender, uid, pubid)

    def gm(self, peer: str, queue: QueueRef, uid: str, to: Member, sender: Member,
           message: GMMessage) -> None:
        """GM ``message`` from member ``sender`` to member ``to`` (on ``peer``) of
        declaration ``uid``'s group. The envelope is built only when the message does not
        join the last one: a master's every publish brings activity for its neighbour."""
        key = (queue, uid, sender)
        last = self._gm.get(key)
        if last is not None and last.to == to and absorb(last.message, message):
            return
        group = self._gm[key] = GroupMessage(queue, uid, to, sender, message)
        self.send(peer, group)

    def take(self) -> list[tuple[str, Envelope]]:
        """Everything queued, in order, as envelopes; the outbox is empty after."""
        queued, self._queued = self._queued, []
        self._last.clear()
        self._gm.clear()
        return [(peer, encode(item.done() if isinstance(item, _BATCHES) else item))
                for peer, item in queued]
