"""A publish's confirm when queues on other nodes hold it."""

from __future__ import annotations

ReplicaRef = tuple[str, str]  # (queue declaration uid, node)


class ConfirmWait:
    """The replicas (queue declaration and node) that have yet to confirm one publish.

    A replica on the publishing channel's own node is covered by the store's LSN, as a
    single node's confirms are (``local``). A replica that dies stops being waited for;
    a publish that no replica ever confirmed and no local one holds is nacked.
    """

    __slots__ = ("confirmed", "local", "outstanding")

    def __init__(self) -> None:
        self.outstanding: set[ReplicaRef] = set()
        self.confirmed = 0
        self.local = False

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

    def lost(self, node: str) -> None:
        self.outstanding = {r for r in self.outstanding if r[1] != node}

    def deleted(self, uid: str) -> None:
        """The queue was deleted: what it had is gone with it, and counts as confirmed
        (RabbitMQ confirms publishes to a queue that is deleted)."""
        gone = {r for r in self.outstanding if r[0] == uid}
        if gone:
            self.outstanding -= gone
            self.confirmed += 1
