"""What the coordinators of a cluster send each other, as typed values.

Two families of values that nothing changes once built:

* **Envelopes** (`PeerMessage`): one class per kind of message one node's coordinator
  sends another's over their link: metadata, publishes and confirms, GM traffic of a
  queue's group, remote consumers' traffic, calls to a queue's master and their
  answers. `cluster.ha.wire` turns each into a peer `Envelope` and back (its header
  says which class is which kind on the wire). Those built for every message
  replicated or delivered are not frozen (marked so): a frozen dataclass costs nearly
  four times as much to build (0.62 µs against 0.17 µs, five fields).
* **Replicated ops** (`Op`): what a queue's master broadcasts through the queue's GM
  group, which every mirror applies in GM order: an ordered publish, a delivery, an
  ack, a requeue, a purge, a sync batch. Named tuples, not frozen dataclasses: they
  cost less than half as much to build, and one is built per message on every replica.

Nothing here does anything: the coordinator's dispatch table maps each envelope class
to its handler, and `ClusterQueue.apply` each op class to the change it makes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from cluster.core.message import Message
from cluster.core.queue import Counts, GetAnswer
from cluster.gm import GMMessage
from cluster.ha.record import Member
from cluster.meta.replica import Update


class QueueRef(NamedTuple):
    """A queue by name, as envelopes address it (its record tells the declaration)."""

    vhost: str
    name: str


# -- replicated ops ------------------------------------------------------------------


class PubOp(NamedTuple):
    """The master enqueued a publish at ``seq``. ``sender`` and ``pubid`` name the
    channel's publish (a mirror drops the direct copy it held); ``want``: the channel
    waits for this replica's confirm."""

    seq: int
    sender: str
    pubid: int
    want: bool
    message: Message


class TakeOp(NamedTuple):
    """The master delivered ``seq`` to a consumer (or ``basic.get``) of channel
    ``owner``; a ``no_ack`` delivery is gone."""

    seq: int
    no_ack: bool
    owner: str


class SettleOp(NamedTuple):
    """Acknowledged: gone."""

    seqs: tuple[int, ...]


class RequeueOp(NamedTuple):
    """Rejected or left unacknowledged: ready again."""

    seqs: tuple[int, ...]


class PurgeOp(NamedTuple):
    """Every ready message gone."""


class SyncedMessage(NamedTuple):
    """A message older than a target's join, with its state on the master: delivered
    before, and the channel that holds it unacknowledged (None: ready)."""

    seq: int
    delivered: bool
    owner: str | None
    message: Message


class SyncOp(NamedTuple):
    """A batch of a sync (`cluster.ha.sync`): the ``targets`` insert what they lack."""

    targets: tuple[Member, ...]
    messages: tuple[SyncedMessage, ...]


Op = PubOp | TakeOp | SettleOp | RequeueOp | PurgeOp | SyncOp


# -- metadata and membership -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Meta:
    """Metadata writes: a peer's snapshot when it comes up, its writes since, or
    (``relay``) writes it learnt from another peer and passes on."""

    updates: tuple[Update, ...]
    relay: bool = False


@dataclass(frozen=True, slots=True)
class Bye:
    """The sender's app is stopping gracefully (``ha-promote-on-shutdown`` applies)."""


@dataclass(frozen=True, slots=True)
class Forget:
    """``forget_cluster_node`` of ``node`` ran on the sender."""

    node: str


# -- publishes and confirms ------------------------------------------------------------


class Publish(NamedTuple):
    """A channel's publish (``sender``, ``pubid``) to one replica; ``want``: confirm it.
    A tuple, unlike its neighbours: ``q.pub`` carries a publish as its values in order,
    so the codec writes and reads it as it is, once per message replicated."""

    sender: str
    pubid: int
    want: bool
    message: Message


@dataclass(slots=True)  # not frozen: built per message
class PublishRun:
    """Consecutive publishes to one declaration (``uid``) of a queue."""

    queue: QueueRef
    uid: str
    publishes: tuple[Publish, ...]


@dataclass(slots=True)  # not frozen: built per message
class Publishes:
    """What one batch of input published to the replicas on the receiving node, in
    publish order."""

    runs: tuple[PublishRun, ...]


@dataclass(slots=True)  # not frozen: built per message
class ConfirmRun:
    """Publishes of channel ``sender`` that the replica of declaration ``uid`` holds."""

    sender: str
    uid: str
    pubids: tuple[int, ...]


@dataclass(slots=True)  # not frozen: built per message
class Confirms:
    """The replicas on ``node`` hold these publishes of the receiver's channels."""

    node: str
    runs: tuple[ConfirmRun, ...]


# -- a queue's GM group ----------------------------------------------------------------


@dataclass(slots=True)  # not frozen: built per message
class GroupMessage:
    """GM traffic from member ``sender`` to member ``to`` of declaration ``uid``'s
    group. Its `Activity`, while still in the outbox, takes the sender's later activity
    (`cluster.ha.outbox`)."""

    queue: QueueRef
    uid: str
    to: Member
    sender: Member
    message: GMMessage


@dataclass(frozen=True, slots=True)
class CatchUpAsk:
    """Member ``sender`` asks its left-hand neighbour ``to`` for a catch-up."""

    queue: QueueRef
    uid: str
    to: Member
    sender: Member


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """Start (or ``cancel``) the queue's sync: asked of a node that is not its master."""

    queue: QueueRef
    cancel: bool


# -- remote consumers: a channel's node and the queue's master -------------------------


@dataclass(frozen=True, slots=True)
class Consume:
    """A consumer (named ``key``, `consumer_key`) of channel ``owner`` subscribes."""

    queue: QueueRef
    key: str
    owner: str
    no_ack: bool
    exclusive: bool


@dataclass(frozen=True, slots=True)
class Cancel:
    queue: QueueRef
    key: str


@dataclass(slots=True)  # not frozen: built per message
class Credit:
    """The consumer may take ``more`` deliveries."""

    queue: QueueRef
    key: str
    more: int


@dataclass(slots=True)  # not frozen: built per message
class Settle:
    """Channel ``owner`` acked (or, ``requeue``, rejected) deliveries ``seqs``."""

    queue: QueueRef
    seqs: tuple[int, ...]
    owner: str | None
    requeue: bool


@dataclass(slots=True)  # not frozen: built per message
class Deliver:
    """The master took ``seq`` for the consumer ``key`` on the receiving node."""

    queue: QueueRef
    key: str
    seq: int
    redelivered: bool
    message: Message


@dataclass(frozen=True, slots=True)
class ConsumerGone:
    """The queue was deleted on its master: consumer ``key`` is cancelled."""

    key: str


# -- calls to a queue's master (`cluster.ha.calls`) ------------------------------------


@dataclass(frozen=True, slots=True)
class AskGet:
    no_ack: bool
    owner: str


@dataclass(frozen=True, slots=True)
class AskPurge:
    pass


@dataclass(frozen=True, slots=True)
class AskDelete:
    if_unused: bool
    if_empty: bool


@dataclass(frozen=True, slots=True)
class AskCounts:
    pass


@dataclass(frozen=True, slots=True)
class AskConsume:
    exclusive: bool


Ask = AskGet | AskPurge | AskDelete | AskCounts | AskConsume


@dataclass(frozen=True, slots=True)
class Call:
    queue: QueueRef
    call_id: int
    ask: Ask


@dataclass(frozen=True, slots=True)
class Count:
    """Messages purged, or deleted with the queue."""

    messages: int


@dataclass(frozen=True, slots=True)
class Refused:
    """Why the master did not answer: it holds no such queue (``not_found``), a
    condition of the delete failed (``precondition``, ``text`` says which), a consumer
    would share the queue with an exclusive one (``exclusive``), or the master's node
    went down before it answered (``down``, never on the wire)."""

    reason: Literal["not_found", "precondition", "exclusive", "down"]
    text: str = ""


CallResult = GetAnswer | Counts | Count | Refused


@dataclass(frozen=True, slots=True)
class Answer:
    call_id: int
    result: CallResult


PeerMessage = (Meta | Bye | Forget | Publishes | Confirms | GroupMessage | CatchUpAsk
               | SyncRequest | Consume | Cancel | Credit | Settle | Deliver | ConsumerGone
               | Call | Answer)
