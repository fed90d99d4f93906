"""The client side as queues and the cluster layer see it.

A client's channel (`cluster.session`) publishes to queues and consumes from them; a
queue with replicas on other nodes (`cluster.ha`) numbers its publishes, waits for the
replicas to confirm them and calls the channel back when they have. Both sides meet
here, so neither imports the other: `ClientChannel` is the channel as that queue sees
it, `Publishing` one message on its way to the queues it was routed to, and
`ReplicaWait` what the channel reads of the replicas' confirms.

A channel's cluster-wide name (`channel_ref`) names the owner of its deliveries and
the sender of its publishes on the wire; the node it lives on is its first part.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cluster.core.message import Message


def channel_ref(node: str, connection_id: int, channel_id: int) -> str:
    return f"{node}|{connection_id}|{channel_id}"


def node_of_ref(ref: str) -> str:
    """The node of the channel named ``ref`` (`channel_ref`)."""
    return ref.partition("|")[0]


class ClientChannel(Protocol):
    """A channel of this node, as a queue with replicas elsewhere sees it."""

    @property
    def ref(self) -> str:
        """Its cluster-wide name (`channel_ref`)."""
        ...

    @property
    def closing(self) -> bool: ...

    def can_deliver(self) -> bool:
        """Whether it takes deliveries now (flow, output room, global prefetch)."""
        ...

    def next_pubid(self) -> int:
        """Numbers its publishes to queues with replicas, in publish order: a mirror
        holds a channel's publishes in this order until the master orders them."""
        ...

    def replicas_confirmed(self) -> None:
        """One of its publishes' `ReplicaWait` is done: its confirms may go out."""
        ...


class ReplicaWait(Protocol):
    """The replicas on other nodes that have yet to confirm one publish (kept by the
    cluster layer). Each queue the message was routed to adds its replicas."""

    # A replica on the publishing node holds it: its confirm is the store's.
    local: bool

    @property
    def done(self) -> bool:
        """No replica is left to confirm."""
        ...

    @property
    def failed(self) -> bool:
        """Done without any replica having kept it: the publish is nacked."""
        ...

    def expect(self, uid: str, node: str) -> None:
        """The replica on ``node`` of queue declaration ``uid`` will confirm it."""
        ...


@dataclass(slots=True)
class Publishing:
    """One message on its way to the queues it was routed to. ``confirm``: the channel
    confirms it only once every replica holds it, so the first queue with replicas
    elsewhere opens ``wait`` and the others add theirs to it."""

    message: Message
    channel: ClientChannel
    confirm: bool
    wait: ReplicaWait | None = None
