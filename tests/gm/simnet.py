"""A simulated network for GM members, stepped by a seeded random clock.

Every directed link is FIFO, as a TCP connection is, with a random delay per message;
links interleave at random. A crash stops a member and loses everything it had sent
that was not yet delivered. The membership manager (the oracle GM relies on) removes a
crashed member from the view after a detection delay and installs each new view on
every live member after a further random delay of its own, so members see views late,
out of order, or not at all when a newer one overtakes them. A partition cuts every
link across it, and is healed by killing the given side.

Everything random comes from ``random.Random(seed)``: one seed, one run.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from cluster.gm import GMMessage, GroupMember, MemberId, View
from tests.gm.history import History

Link = tuple[MemberId, MemberId]


@dataclass(frozen=True)
class Deliver:
    link: Link


@dataclass(frozen=True)
class Install:
    member: MemberId
    view: View


@dataclass(frozen=True)
class Detect:
    member: MemberId


@dataclass(frozen=True)
class Kill:
    members: frozenset[MemberId]


Event = Deliver | Install | Detect | Kill


class Livelock(AssertionError):
    """The run did not go quiet within the event budget."""


class SimNet:
    def __init__(
        self,
        seed: int,
        members: int = 3,
        *,
        delay: tuple[float, float] = (0.1, 2.0),
        detect: tuple[float, float] = (1.0, 8.0),
        install: tuple[float, float] = (0.0, 4.0),
    ) -> None:
        self.rng = random.Random(seed)
        self.now = 0.0
        self.delay, self.detect, self.install = delay, detect, install
        self.history = History()
        self.members: dict[MemberId, GroupMember] = {}
        self.alive: set[MemberId] = set()
        self._events: list[tuple[float, int, Event]] = []
        self._tiebreak = itertools.count()
        self._links: dict[Link, deque[GMMessage]] = {}
        self._link_clock: dict[Link, float] = {}
        self._cut: set[frozenset[MemberId]] = set()
        self.doomed: set[MemberId] = set()  # partitioned off, to be killed
        self._names = (f"m{i}" for i in itertools.count())
        first = next(self._names)
        self.view = View.first(first)
        self._start(first, self.view, creator=True)
        for _ in range(members - 1):
            self.join()

    # -- what a test does -------------------------------------------------------------

    def join(self) -> MemberId:
        """The membership manager adds a fresh member at the end of the ring."""
        member = next(self._names)
        self.view = self.view.joined(member)
        self._start(member, self.view, creator=False)
        self._announce(self.view, exclude=member)
        return member

    def broadcast(self, member: MemberId) -> object:
        gm = self.members[member]
        payload = self.history.next_payload(member)
        self.history.sent(member, payload, frozenset(gm.view.members))
        gm.broadcast(payload)
        self._flush(member)
        return payload

    def crash(self, member: MemberId) -> None:
        """The member stops; what it sent and is still on the wire is lost."""
        self._stop(member)
        self._schedule(self._uniform(self.detect), Detect(member))

    def partition(self, side: Iterable[MemberId], kill_after: float) -> None:
        """Cut every link between ``side`` and the rest, then kill ``side``."""
        inside = frozenset(side)
        self.doomed |= inside
        for a in inside:
            for b in self.alive - inside:
                self._cut.add(frozenset((a, b)))
                self._links.pop((a, b), None)
                self._links.pop((b, a), None)
        self._schedule(kill_after, Kill(inside))

    def step(self) -> bool:
        """Run the next event; False when nothing is left to happen."""
        if not self._events:
            return False
        self.now, _, event = heapq.heappop(self._events)
        match event:
            case Deliver(link):
                self._deliver(link)
            case Install(member, view):
                if member in self.alive:
                    self.members[member].install_view(view)
                    self._flush(member)
            case Detect(member):
                if member in self.view:
                    self.view = self.view.without(member)
                    self._announce(self.view)
            case Kill(members):
                for member in sorted(members & self.alive):
                    self.crash(member)
        return True

    def run(self, events: int) -> None:
        for _ in range(events):
            if not self.step():
                return

    def quiesce(self, budget: int = 200_000) -> None:
        """Run until nothing is in flight and every view is installed."""
        for _ in range(budget):
            if not self.step():
                return
        raise Livelock(f"still busy after {budget} events")

    @property
    def survivors(self) -> list[MemberId]:
        return [m for m in self.view.members if m in self.alive]

    def check_settled(self) -> None:
        """Run to quiescence, then check GM's guarantees on the whole run and that the
        ack rounds finished: nothing pending, nothing waiting for a view, every own
        broadcast of a survivor confirmed."""
        self.quiesce()
        self.history.check_safety()
        self.history.check_complete(self.survivors)
        for member in self.survivors:
            gm = self.members[member]
            assert gm.caught_up, f"{member} never caught up"
            assert gm.pending_acks == 0, f"{member} still holds {gm.pending_acks} pending"
            assert gm.held == 0, f"{member} still holds {gm.held} messages for a newer view"
            assert gm.confirmed_upto == gm.last_seq, (
                f"{member} confirmed up to {gm.confirmed_upto} of {gm.last_seq}"
            )

    # -- machinery --------------------------------------------------------------------

    def _start(self, member: MemberId, view: View, *, creator: bool) -> None:
        gm = GroupMember(member)
        self.members[member] = gm
        self.alive.add(member)
        if creator:
            gm.create(view)
        else:
            gm.join(view)
        self._flush(member)

    def _stop(self, member: MemberId) -> None:
        self.alive.discard(member)
        for link in [link for link in self._links if link[0] == member]:
            del self._links[link]

    def _announce(self, view: View, exclude: MemberId | None = None) -> None:
        for member in view.members:
            if member != exclude and member in self.alive:
                self._schedule(self._uniform(self.install), Install(member, view))

    def _flush(self, member: MemberId) -> None:
        gm = self.members[member]
        for payload in gm.take_deliveries():
            self.history.delivered(member, payload)
        for dest, message in gm.take_outbox():
            link = (member, dest)
            if frozenset(link) in self._cut or dest not in self.alive:
                continue
            self._links.setdefault(link, deque()).append(message)
            # Never before the link's previous message: FIFO per link.
            at = max(self.now + self._uniform(self.delay), self._link_clock.get(link, 0.0))
            self._link_clock[link] = at
            self._schedule(at - self.now, Deliver(link))

    def _deliver(self, link: Link) -> None:
        queue = self._links.get(link)
        if not queue:
            return  # lost to a crash or a partition
        message = queue.popleft()
        src, dest = link
        if dest in self.alive:
            self.members[dest].receive(src, message)
            self._flush(dest)

    def _schedule(self, after: float, event: Event) -> None:
        heapq.heappush(self._events, (self.now + after, next(self._tiebreak), event))

    def _uniform(self, bounds: tuple[float, float]) -> float:
        return self.rng.uniform(*bounds)
