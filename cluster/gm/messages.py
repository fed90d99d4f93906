"""What GM members send each other: activity batches and catch-ups.

Every message carries the sender's view version. A receiver holds a message until it
has installed at least that view, so it always interprets a message with a view at
least as new as the sender's (gm.erl's Lemma 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from cluster.gm.view import MemberId

NO_ACK = -1


class Pub(NamedTuple):
    """One broadcast. ``seq`` counts the sender's broadcasts from 0; ``view`` is the
    sender's view version when it broadcast, which tells a member that was caught up
    late whether the broadcast was meant for it."""

    seq: int
    view: int
    payload: object


@dataclass(slots=True)
class Entry:
    """A sender's broadcasts and acknowledgements moving one hop round the ring.

    ``ack`` acknowledges every broadcast of ``sender`` with ``seq <= ack`` (``NO_ACK``:
    none). Acks only ever cover the oldest pending broadcasts, so a watermark says as
    much as gm.erl's list of numbers, in O(1).
    """

    sender: MemberId
    pubs: list[Pub]
    ack: int


@dataclass(slots=True)
class Activity:
    """A batch of entries for the right-hand neighbour, possibly for many senders.

    A member keeps appending to its latest Activity until the shell takes the outbox,
    so one network message carries whatever piled up meanwhile; once taken it is never
    changed again.
    """

    view_version: int
    entries: list[Entry]

    def add(self, sender: MemberId, pubs: list[Pub], ack: int) -> None:
        """Append an entry. Acks are watermarks applied after the pubs, so two
        consecutive entries of one sender say the same as one with both pub lists and
        the higher ack: they are merged."""
        entries = self.entries
        if entries and entries[-1].sender == sender:
            last = entries[-1]
            last.pubs.extend(pubs)
            last.ack = max(last.ack, ack)
        else:
            entries.append(Entry(sender, list(pubs), ack))


@dataclass(frozen=True, slots=True)
class SenderSnapshot:
    """A member's knowledge of one sender, as a catch-up carries it."""

    pending: tuple[Pub, ...]  # delivered and forwarded, not yet known to be acked
    last_pub: int  # highest seq seen
    last_ack: int  # highest ack seen (the sender or its heir: highest ack come back)


BLANK = SenderSnapshot((), NO_ACK, NO_ACK)


@dataclass(frozen=True, slots=True)
class CatchUp:
    """Sent by a member to a new right-hand neighbour: everything it knows that is still
    in flight, from which the neighbour works out what it missed."""

    view_version: int
    senders: Mapping[MemberId, SenderSnapshot]


GMMessage = Activity | CatchUp
