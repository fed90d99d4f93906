"""What was broadcast and delivered in a run, and GM's guarantees checked against it.

A payload is ``(sender, n)`` for the sender's n-th broadcast, so every delivery names
its broadcast. "Member before m was sent" is taken from the sender's own view when it
broadcast m: that is the only membership a sender can act on.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from cluster.gm import MemberId

Payload = tuple[MemberId, int]


@dataclass
class History:
    # sender -> for each of its broadcasts, in order, the members of its view then
    audience: dict[MemberId, list[frozenset[MemberId]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    deliveries: dict[MemberId, list[tuple[MemberId, object]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    def next_payload(self, sender: MemberId) -> Payload:
        return (sender, len(self.audience[sender]))

    def sent(self, sender: MemberId, payload: object, audience: frozenset[MemberId]) -> None:
        assert payload == self.next_payload(sender)
        self.audience[sender].append(audience)

    def delivered(self, member: MemberId, delivery: tuple[MemberId, object]) -> None:
        self.deliveries[member].append(delivery)

    # -- checks -------------------------------------------------------------------------

    def delivered_seqs(self, member: MemberId) -> dict[MemberId, list[int]]:
        """Per sender, the seqs of its broadcasts ``member`` delivered, in order."""
        seqs: dict[MemberId, list[int]] = defaultdict(list)
        for sender, payload in self.deliveries[member]:
            assert isinstance(payload, tuple), payload
            origin, n = payload
            assert origin == sender, f"{member} got {payload} attributed to {sender}"
            assert n < len(self.audience[sender]), f"{member} got {payload}, never sent"
            seqs[sender].append(n)
        return seqs

    def check_safety(self) -> None:
        """No duplicates; per-sender FIFO; nothing sent before the sender knew of the
        member; and the GM guarantee: if P sent m then m' and P' was in P's view when m
        was sent and P' delivered m', then P' delivered m. Holds for every member, dead
        or alive, at any moment."""
        for member, delivered in self.deliveries.items():
            dups = [d for d, count in Counter(delivered).items() if count > 1]
            assert not dups, f"{member} delivered {dups} more than once"
            for sender, seqs in self.delivered_seqs(member).items():
                assert seqs == sorted(seqs), f"{member} got {sender}'s out of order: {seqs}"
                early = [n for n in seqs if member not in self.audience[sender][n]]
                assert not early, f"{member} got {sender}#{early}, sent before it joined"
                got = set(seqs)
                missing = [
                    n for n in range(seqs[-1])
                    if n not in got and member in self.audience[sender][n]
                ]
                assert not missing, (
                    f"{member} delivered {sender}#{seqs[-1]} but not {sender}#{missing}"
                )

    def check_complete(self, survivors: Iterable[MemberId]) -> None:
        """After quiescence: a broadcast that any survivor delivered (a live sender
        delivers its own at once) reached every survivor that was in its audience."""
        alive = set(survivors)
        got = {
            m: {sender: set(seqs) for sender, seqs in self.delivered_seqs(m).items()}
            for m in alive
        }
        nothing: set[int] = set()
        for sender, audiences in self.audience.items():
            reached = set().union(*(got[m].get(sender, nothing) for m in alive))
            for n in sorted(reached):
                lacking = sorted(
                    m for m in alive & audiences[n] if n not in got[m].get(sender, nothing)
                )
                assert not lacking, f"{sender}#{n} never reached {lacking}"
