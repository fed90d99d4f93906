"""A publish's confirm when queues on other nodes hold it."""

from __future__ import annotations

import json

from cluster.peer.codec import CodecError

ReplicaRef = tuple[str, str]  # (queue declaration uid, node)


class ConfirmWait:
    """The replicas (queue declaration and node) that have yet to confirm one publish.

    A replica on the publishing channel's own node is covered by the store's LSN, as a
    single node's confirms are (``local``). A replica that dies stops being waited for;
    a publish that no replica ever confirmed and no local one holds is nacked.
    """

    __slots__ = ("any_one", "confirmed", "local", "outstanding")

    def __init__(self, *, any_one: bool = False) -> None:
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


class ConfirmBatch:
    """Confirms for one node's publishers, in one ``q.confirm`` envelope: its payload
    (a `Deferred`), encoded when the envelope is sent, maps each sender to the queue
    declarations (uids) that hold which of its publish ids."""

    __slots__ = ("senders",)

    def __init__(self) -> None:
        self.senders: dict[str, dict[str, list[int]]] = {}

    def add(self, sender: str, uid: str, pubid: int) -> None:
        self.senders.setdefault(sender, {}).setdefault(uid, []).append(pubid)

    def encode(self) -> bytes:
        return json.dumps(self.senders, separators=(",", ":")).encode()


def decode_confirms(data: bytes) -> list[tuple[str, str, list[int]]]:
    """(sender, uid, publish ids) from a ``q.confirm`` payload; `CodecError` if it is
    not one."""
    try:
        senders = json.loads(data)
    except ValueError as error:
        raise CodecError(f"bad q.confirm payload: {error!r}") from error
    if not isinstance(senders, dict):
        raise CodecError(f"q.confirm payload is {type(senders).__name__}, not an object")
    out = []
    for sender, uids in senders.items():
        if not isinstance(uids, dict):
            raise CodecError(f"q.confirm for {sender!r} is {uids!r}, not an object")
        for uid, pubids in uids.items():
            if not isinstance(pubids, list) or not all(type(i) is int for i in pubids):
                raise CodecError(f"q.confirm for {sender!r} in {uid!r} has {pubids!r}, "
                                 f"not publish ids")
            out.append((sender, uid, pubids))
    return out
