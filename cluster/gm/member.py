"""One member of a GM group as an I/O-free state machine.

The shell feeds it views (from the membership manager), broadcasts (from the queue) and
messages (from its left-hand neighbour), and drains what it produced: messages to send
(``take_outbox``), broadcasts to hand to the queue in order (``take_deliveries``), and
how far its own broadcasts are known to have reached everyone (``confirmed_upto``).

Broadcasts travel the ring to the right. Each member delivers a sender's broadcast the
first time it sees it, keeps it as pending and forwards it. When it comes back to its
*owner* (the sender, or the heir of a dead sender) it has reached every member, so the
owner turns it into an ack that travels the ring once more, dropping it from every
member's pending list, and stops at the owner. When a member's right-hand neighbour
changes it sends the new one a catch-up: its whole pending state, from which the
neighbour works out the broadcasts and acks a dead member may not have passed on, or,
if the neighbour has just joined, starts from.
"""

from __future__ import annotations

from collections.abc import Mapping

from cluster.gm.messages import (
    BLANK,
    NO_ACK,
    Activity,
    CatchUp,
    Entry,
    GMMessage,
    Pub,
    SenderSnapshot,
)
from cluster.gm.state import SenderState
from cluster.gm.view import MemberId, View


class LostMembership(Exception):
    """The membership manager removed this member from the group; the shell must stop
    it. It will never learn the group's fate from here on."""


class GroupMember:
    def __init__(self, me: MemberId, *, takeover: bool = True) -> None:
        self.me = me
        # False only for the planted bug ``--break no-gm-takeover``: a member whose
        # right-hand neighbour died does not catch up the next one.
        self._takeover = takeover
        self._view: View | None = None
        self._left = me
        self._right = me
        # None until caught up: a joiner knows nothing until its left-hand neighbour
        # sends it a catch-up.
        self._senders: dict[MemberId, SenderState] | None = None
        self._join_version = 0
        self._last_seq = NO_ACK
        self._confirmed = NO_ACK
        self._unsent: list[Pub] = []  # own broadcasts made before being caught up
        self._held: list[tuple[MemberId, GMMessage]] = []  # sent under a newer view
        # Members we dropped a message from since their last catch-up to us.
        self._unheard: set[MemberId] = set()
        self._outbox: list[tuple[MemberId, GMMessage]] = []
        self._open: Activity | None = None  # last Activity in the outbox, still growing
        self._deliveries: list[tuple[MemberId, object]] = []

    # -- inputs ---------------------------------------------------------------------

    def create(self, view: View) -> None:
        """Start a new group whose only member is ``me``."""
        if view.members != (self.me,):
            raise ValueError(f"a new group's view holds only its creator, not {view}")
        self._start(view)

    def join(self, view: View) -> None:
        """Start as a member the membership manager has just added in ``view``. Nothing
        is delivered before the left-hand neighbour's catch-up arrives."""
        if self.me not in view:
            raise ValueError(f"{self.me!r} is not in {view}")
        self._start(view)

    def install_view(self, view: View) -> None:
        """Act on a membership change. Views older than the current one are ignored, so
        views may arrive late or out of order and some may be skipped."""
        current = self._current_view()
        if view.version <= current.version:
            return
        if self.me not in view:
            raise LostMembership(f"{self.me!r} is not in {view}")
        old_right = self._right
        # Our right-hand neighbour may have had someone else as its left in a view we
        # skipped, and dropped what we sent it meanwhile.
        skipped = view.version > current.version + 1
        self._enter(view)
        self._unheard &= set(view.members)
        if self._senders is None:
            if view.members[0] == self.me:
                # Every older member is dead and none caught us up. State flows from the
                # eldest member rightwards, so no live member holds any: start afresh.
                self._adopt({})
        elif (self._right != self.me and (skipped or self._right != old_right)
              and (self._takeover or self._right not in current)):
            self._send_catch_up()
        held, self._held = self._held, []
        for sender, message in held:
            self.receive(sender, message)

    def broadcast(self, payload: object) -> int:
        """Send ``payload`` to the group; it is delivered here at once. Returns its
        seq, which ``confirmed_upto`` reaches once every member has it."""
        view = self._current_view()
        self._last_seq += 1
        pub = Pub(self._last_seq, view.version, payload)
        self._deliveries.append((self.me, payload))
        if self._senders is None:
            self._unsent.append(pub)
        elif self._right == self.me:
            state = self._senders.setdefault(self.me, SenderState())
            state.last_pub = state.last_ack = self._confirmed = pub.seq
        else:
            self._publish([pub])
        return pub.seq

    def receive(self, sender: MemberId, message: GMMessage) -> None:
        """A message ``sender`` sent to us. Only the left-hand neighbour's count."""
        if message.view_version > self._current_view().version:
            self._held.append((sender, message))
            return
        if sender != self._left:
            # Not our left-hand neighbour (any more, or yet). Should it become ours
            # again, it will send a catch-up covering this; its activity until then
            # lacks this as context, so it must wait for that catch-up too.
            self._unheard.add(sender)
            return
        if isinstance(message, CatchUp):
            self._unheard.discard(sender)
            if self._senders is None:
                self._adopt(message.senders)
            else:
                self._catch_up(message.senders)
        elif self._senders is not None and sender not in self._unheard:
            self._apply(message.entries)

    def catch_up_right(self) -> None:
        """Send the right-hand neighbour a catch-up again: it asked, having started over
        as a joiner that may have lost the one sent before. A catch-up carries only what
        this member holds, and one already seen replays as nothing new, so an extra one
        is harmless."""
        if self._senders is not None and self._right != self.me:
            self._send_catch_up()

    # -- outputs --------------------------------------------------------------------

    def take_outbox(self) -> list[tuple[MemberId, GMMessage]]:
        """Messages to send, each to the member named, in this order."""
        out, self._outbox, self._open = self._outbox, [], None
        return out

    def take_deliveries(self) -> list[tuple[MemberId, object]]:
        """(original sender, payload) for each broadcast delivered, in delivery order."""
        out, self._deliveries = self._deliveries, []
        return out

    @property
    def view(self) -> View:
        return self._current_view()

    @property
    def left(self) -> MemberId:
        return self._left

    @property
    def right(self) -> MemberId:
        return self._right

    @property
    def caught_up(self) -> bool:
        return self._senders is not None

    @property
    def last_seq(self) -> int:
        """Seq of this member's latest broadcast (-1 before the first)."""
        return self._last_seq

    @property
    def confirmed_upto(self) -> int:
        """Every own broadcast with seq up to this has reached every member."""
        return self._confirmed

    @property
    def pending_acks(self) -> int:
        """Broadcasts (of any sender) this member holds until their ack passes by."""
        senders = self._senders or {}
        return sum(len(state.pending) for state in senders.values())

    @property
    def held(self) -> int:
        """Messages waiting for the shell to install a newer view."""
        return len(self._held)

    # -- view changes ---------------------------------------------------------------

    def _current_view(self) -> View:
        if self._view is None:
            raise RuntimeError("create() or join() the group first")
        return self._view

    def _start(self, view: View) -> None:
        if self._view is not None:
            raise RuntimeError(f"{self.me!r} has already started")
        self._join_version = view.version
        self._enter(view)

    def _enter(self, view: View) -> None:
        self._view = view
        self._left = view.left_of(self.me)
        self._right = view.right_of(self.me)
        self._open = None  # an Activity is tagged with one view and goes to one member
        if self._right == self.me:
            self._alone()

    def _alone(self) -> None:
        # Everyone else is dead: whatever was in flight has reached every member there
        # is, and every own broadcast is confirmed (gm.erl purges its confirms too).
        if self._senders is None:
            self._senders = {}
        for state in self._senders.values():
            state.pending.clear()
            state.last_ack = state.last_pub
        if self._unsent:
            state = self._senders.setdefault(self.me, SenderState())
            state.last_pub = state.last_ack = self._unsent[-1].seq
            self._unsent = []
        self._confirmed = self._last_seq

    def _send_catch_up(self) -> None:
        assert self._senders is not None
        senders = {sender: state.snapshot() for sender, state in self._senders.items()}
        self._send(CatchUp(self._current_view().version, senders))

    # -- catch-ups ------------------------------------------------------------------

    def _adopt(self, senders: Mapping[MemberId, SenderSnapshot]) -> None:
        """First catch-up of a joiner: start from the left-hand neighbour's state."""
        self._senders = {sender: SenderState.restore(snap) for sender, snap in senders.items()}
        # Broadcasts sent under a view that already held us are ours to deliver; they
        # are here rather than in activity only if the member that should have caught
        # us up died before it could.
        for sender, state in self._senders.items():
            for pub in state.pending:
                if pub.view >= self._join_version:
                    self._deliveries.append((sender, pub.payload))
        if self._right != self.me:
            self._send(CatchUp(self._current_view().version, dict(senders)))
        # Dead members we inherited before being caught up: what the left-hand neighbour
        # holds of theirs has been all the way round.
        view = self._current_view()
        self._apply([
            Entry(sender, list(state.pending), NO_ACK)
            for sender, state in self._senders.items()
            if view.owner_of(sender) == self.me
        ])
        if self._unsent:
            unsent, self._unsent = self._unsent, []
            self._publish(unsent)

    def _catch_up(self, senders: Mapping[MemberId, SenderSnapshot]) -> None:
        """A catch-up from a new left-hand neighbour, replayed as if it were activity:
        every broadcast it holds (those we have seen are skipped, those we own are
        absorbed) and an ack for whatever it saw and no longer holds (gm.erl's
        find_prefix_common_suffix, done on seqs). That is sound because, for every
        sender, broadcasts and acks reach our left-hand neighbour before us, and it
        drops a broadcast only on its ack."""
        assert self._senders is not None
        entries = []
        for sender in {**senders, **self._senders}:
            theirs = senders.get(sender, BLANK)
            acked = theirs.pending[0].seq - 1 if theirs.pending else theirs.last_pub
            entries.append(Entry(sender, list(theirs.pending), acked))
        self._apply(entries)

    # -- activity -------------------------------------------------------------------

    def _apply(self, entries: list[Entry]) -> None:
        assert self._senders is not None
        view = self._current_view()
        for entry in entries:
            state = self._senders.get(entry.sender)
            if state is None:
                state = self._senders[entry.sender] = SenderState()
            if view.owner_of(entry.sender) == self.me:
                self._absorb(entry, state)
            else:
                self._pass_on(entry, state)

    def _pass_on(self, entry: Entry, state: SenderState) -> None:
        pubs = entry.pubs
        if pubs and pubs[0].seq <= state.last_pub:
            # Seen already (a catch-up replays all its sender holds): never twice.
            pubs = [pub for pub in pubs if pub.seq > state.last_pub]
        if pubs:
            state.pending.extend(pubs)
            state.last_pub = pubs[-1].seq
            # Broadcasts sent before the sender knew of us are passed on, not delivered:
            # we deliver exactly those sent under a view that held us.
            sender, joined = entry.sender, self._join_version
            self._deliveries.extend((sender, pub.payload) for pub in pubs if pub.view >= joined)
        ack = entry.ack if state.ack(entry.ack) else NO_ACK
        if pubs or ack != NO_ACK:
            self._emit(entry.sender, pubs, ack)

    def _absorb(self, entry: Entry, state: SenderState) -> None:
        """Our own broadcasts (or a dead sender's we inherited) coming back round: they
        have reached everyone, so ack them; acks coming back end their round."""
        state.ack(entry.ack)
        if not entry.pubs:
            return
        top = entry.pubs[-1].seq
        if top <= state.acked_below():
            return  # already acked: a catch-up re-sent it
        state.drop_upto(top)
        # A dead sender's broadcasts may be news to its heir (they were sent before it
        # joined). Record them as seen: should this ack die with our right-hand
        # neighbour, our next catch-up must still say they are over.
        state.last_pub = max(state.last_pub, top)
        if entry.sender == self.me:
            self._confirmed = top
        self._emit(entry.sender, [], top)

    def _publish(self, pubs: list[Pub]) -> None:
        assert self._senders is not None
        state = self._senders.setdefault(self.me, SenderState())
        state.pending.extend(pubs)
        state.last_pub = pubs[-1].seq
        self._emit(self.me, pubs, NO_ACK)

    # -- output assembly ------------------------------------------------------------

    def _emit(self, sender: MemberId, pubs: list[Pub], ack: int) -> None:
        """Queue an entry for the right-hand neighbour, merged into the Activity the
        shell has not taken yet: batching without a timer."""
        if self._open is None:
            self._open = Activity(self._current_view().version, [])
            self._outbox.append((self._right, self._open))
        self._open.add(sender, pubs, ack)

    def _send(self, message: GMMessage) -> None:
        self._open = None  # later activity must follow this message, not precede it
        self._outbox.append((self._right, message))
