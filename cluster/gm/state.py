"""A member's running record of one sender's broadcasts (gm.erl's ``#member``)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from cluster.gm.messages import NO_ACK, Pub, SenderSnapshot


@dataclass(slots=True)
class SenderState:
    # Seqs strictly increase from left to right, every pending seq is above last_ack,
    # and last_pub >= last_ack: an ack for a broadcast means it has been seen.
    pending: deque[Pub] = field(default_factory=deque)
    last_pub: int = NO_ACK
    last_ack: int = NO_ACK

    @classmethod
    def restore(cls, snapshot: SenderSnapshot) -> SenderState:
        return cls(deque(snapshot.pending), snapshot.last_pub, snapshot.last_ack)

    def snapshot(self) -> SenderSnapshot:
        return SenderSnapshot(tuple(self.pending), self.last_pub, self.last_ack)

    def ack(self, seq: int) -> bool:
        """Apply an ack for every broadcast up to ``seq``; False if it was no news."""
        if seq <= self.last_ack:
            return False
        self.last_ack = seq
        self.last_pub = max(self.last_pub, seq)
        self.drop_upto(seq)
        return True

    def drop_upto(self, seq: int) -> None:
        pending = self.pending
        while pending and pending[0].seq <= seq:
            pending.popleft()

    def acked_below(self) -> int:
        """Seqs up to this one have been acknowledged by this member (or, at the
        sender or its heir, turned into acks)."""
        return self.pending[0].seq - 1 if self.pending else self.last_pub
