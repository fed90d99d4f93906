"""GM group views: the ring of live members plus who inherited each dead one.

A view is a value the membership manager (the queue's metadata) owns and evolves with
``View.first``, ``joined`` and ``without``; every member is handed each view it should
act on. Ring order is join order, except that a joiner goes in right after the last
live member, so it never comes between a dead member and its heir.

Dead members stay in the view as *aliases* of their heir: the nearest live member to
their right at the moment they died (gm.erl keeps them as ``{dead, Id}`` entries for
the same reason). The heir finishes their in-flight broadcasts. Carrying the mapping in
the view, rather than having each member derive it from the views it saw, lets a
member skip views and lets a joiner know what its neighbours have inherited.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

MemberId = str


class ViewError(ValueError):
    """A view change that the membership manager must not make."""


@dataclass(frozen=True)
class View:
    version: int
    members: tuple[MemberId, ...]
    # (dead member, heir) pairs; the heir is always in ``members``.
    aliases: tuple[tuple[MemberId, MemberId], ...] = ()

    @classmethod
    def first(cls, member: MemberId) -> View:
        return cls(1, (member,))

    def joined(self, member: MemberId) -> View:
        if member in self._index or member in self.heirs:
            raise ViewError(f"{member!r} is or was already a member")
        return View(self.version + 1, (*self.members, member), self.aliases)

    def without(self, *dead: MemberId) -> View:
        gone = set(dead)
        unknown = gone - set(self.members)
        if unknown:
            raise ViewError(f"not live members: {sorted(unknown)}")
        alive = tuple(m for m in self.members if m not in gone)
        if not alive:
            raise ViewError("a view needs at least one live member")
        n = len(self.members)
        heir_of_gone: dict[MemberId, MemberId] = {}
        for i, member in enumerate(self.members):
            if member in gone:
                step = 1
                while self.members[(i + step) % n] in gone:
                    step += 1
                heir_of_gone[member] = self.members[(i + step) % n]
        inherited = tuple((dead, heir_of_gone.get(heir, heir)) for dead, heir in self.aliases)
        return View(self.version + 1, alive, inherited + tuple(heir_of_gone.items()))

    @cached_property
    def _index(self) -> Mapping[MemberId, int]:
        return {m: i for i, m in enumerate(self.members)}

    @cached_property
    def heirs(self) -> Mapping[MemberId, MemberId]:
        """Dead member -> the live member that inherited it."""
        return dict(self.aliases)

    def __contains__(self, member: object) -> bool:
        return member in self._index

    def left_of(self, member: MemberId) -> MemberId:
        return self.members[self._index[member] - 1]

    def right_of(self, member: MemberId) -> MemberId:
        return self.members[(self._index[member] + 1) % len(self.members)]

    def owner_of(self, sender: MemberId) -> MemberId:
        """Who absorbs ``sender``'s broadcasts when they come back round: the sender
        itself while alive, else its heir."""
        return sender if sender in self._index else self.heirs[sender]
