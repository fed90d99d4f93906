"""GroupMember driven by hand: each scenario decides which message moves when."""

from __future__ import annotations

from collections import defaultdict, deque

import pytest

from cluster.gm import Activity, CatchUp, GMMessage, GroupMember, LostMembership, View


class Wire:
    """FIFO links between members that move only when the test says so."""

    def __init__(self) -> None:
        self.members: dict[str, GroupMember] = {}
        self.links: dict[tuple[str, str], deque[GMMessage]] = defaultdict(deque)
        self.got: dict[str, list[tuple[str, object]]] = defaultdict(list)
        self.view: View | None = None

    def create(self, name: str) -> GroupMember:
        self.view = View.first(name)
        gm = self.members[name] = GroupMember(name)
        gm.create(self.view)
        return gm

    def join(self, name: str, *, tell: bool = True) -> GroupMember:
        """Add ``name``; ``tell``: install the view on everyone else at once."""
        assert self.view is not None
        self.view = self.view.joined(name)
        gm = self.members[name] = GroupMember(name)
        gm.join(self.view)
        if tell:
            self.install(*(m for m in self.view.members if m != name))
        self.collect()
        return gm

    def kill(self, name: str) -> None:
        """Crash ``name``: it stops and what it sent but was not delivered is lost."""
        del self.members[name]
        for link in [link for link in self.links if link[0] == name]:
            del self.links[link]
        assert self.view is not None
        self.view = self.view.without(name)

    def install(self, *names: str) -> None:
        assert self.view is not None
        for name in names:
            self.members[name].install_view(self.view)
        self.collect()

    def collect(self) -> None:
        for name, gm in self.members.items():
            self.got[name].extend(gm.take_deliveries())
            for dest, message in gm.take_outbox():
                self.links[(name, dest)].append(message)

    def step(self, src: str, dest: str) -> GMMessage:
        self.collect()
        message = self.links[(src, dest)].popleft()
        if dest in self.members:
            self.members[dest].receive(src, message)
        self.collect()
        return message

    def pump(self) -> None:
        self.collect()
        while busy := sorted(link for link, queue in self.links.items() if queue):
            self.step(*busy[0])

    def payloads(self, name: str) -> list[object]:
        return [payload for _, payload in self.got[name]]


def three() -> Wire:
    wire = Wire()
    wire.create("a")
    wire.join("b")
    wire.join("c")
    wire.pump()
    return wire


def test_a_broadcast_goes_round_once_then_its_ack_clears_it() -> None:
    wire = three()
    a, b, c = (wire.members[m] for m in "abc")
    assert a.broadcast("x") == 0
    assert a.take_deliveries() == [("a", "x")]  # the sender delivers its own at once

    hops = [wire.step("a", "b"), wire.step("b", "c")]
    assert wire.payloads("b") == wire.payloads("c") == ["x"]
    assert (a.pending_acks, b.pending_acks, c.pending_acks) == (1, 1, 1)
    assert a.confirmed_upto == -1

    hops.append(wire.step("c", "a"))  # back at the sender: everyone has it
    assert a.confirmed_upto == 0
    assert a.pending_acks == 0
    assert (b.pending_acks, c.pending_acks) == (1, 1)

    hops += [wire.step("a", "b"), wire.step("b", "c"), wire.step("c", "a")]
    assert all(isinstance(hop, Activity) for hop in hops)
    assert [hop.entries[0].ack for hop in hops] == [-1, -1, -1, 0, 0, 0]  # type: ignore[union-attr]
    assert (a.pending_acks, b.pending_acks, c.pending_acks) == (0, 0, 0)
    assert not any(wire.links.values())  # the ack stops at the sender
    assert wire.payloads("b") == wire.payloads("c") == ["x"]


def test_what_piles_up_between_sends_goes_as_one_message() -> None:
    wire = three()
    a = wire.members["a"]
    for n in range(100):
        a.broadcast(n)
    wire.collect()
    assert len(wire.links[("a", "b")]) == 1
    batch = wire.step("a", "b")
    assert isinstance(batch, Activity)
    assert [len(entry.pubs) for entry in batch.entries] == [100]
    assert len(wire.links[("b", "c")]) == 1
    wire.pump()
    assert all(wire.payloads(m) == list(range(100)) for m in "abc")
    assert a.confirmed_upto == 99


def test_a_joiner_starts_from_its_left_and_gets_only_what_is_sent_after() -> None:
    wire = Wire()
    wire.create("a")
    wire.join("b")
    wire.pump()
    wire.members["a"].broadcast("before")
    wire.collect()
    wire.join("c")  # "before" is still on its way to b
    catch_up = wire.step("b", "c")
    assert isinstance(catch_up, CatchUp)
    wire.members["a"].broadcast("after")
    wire.pump()
    # "before" reaches c too, through b, but c only passes it on.
    assert wire.payloads("c") == ["after"]
    assert wire.payloads("b") == ["before", "after"]
    assert all(wire.members[m].pending_acks == 0 for m in "abc")
    assert wire.members["a"].confirmed_upto == 1


def test_a_joiner_delivers_nothing_and_sends_nothing_before_its_catch_up() -> None:
    wire = Wire()
    wire.create("a")
    b = wire.join("b", tell=False)
    assert not b.caught_up
    b.broadcast("early")
    wire.collect()
    assert not any(wire.links.values())
    assert wire.payloads("b") == ["early"]
    wire.install("a")
    wire.pump()
    assert b.caught_up
    assert wire.payloads("a") == ["early"]
    assert b.confirmed_upto == 0


def test_a_catch_up_sent_again_on_request_delivers_nothing_twice() -> None:
    """catch_up_right (a neighbour that started over as a joiner asked for it) sends
    the right-hand neighbour a catch-up again; c, a joiner that adopted b's first one,
    replays it as nothing new."""
    alone = Wire()
    alone.create("a").catch_up_right()
    assert alone.members["a"].take_outbox() == []  # no right-hand neighbour to send to
    wire = three()
    a, b, c = (wire.members[m] for m in "abc")
    a.broadcast("x")
    wire.step("a", "b")
    wire.step("b", "c")  # c has delivered x; b and c hold it until its ack
    b.catch_up_right()
    wire.collect()
    again = wire.step("b", "c")
    assert isinstance(again, CatchUp)
    assert [pub.payload for pub in again.senders["a"].pending] == ["x"]
    assert wire.payloads("c") == ["x"]
    assert len(wire.links[("c", "a")]) == 1  # x on its way back: nothing new to add
    wire.pump()
    assert all(wire.payloads(m) == ["x"] for m in "abc")
    assert (a.pending_acks, b.pending_acks, c.pending_acks) == (0, 0, 0)
    assert a.confirmed_upto == 0


def test_the_left_of_a_dead_member_resends_what_it_did_not_pass_on() -> None:
    wire = three()
    wire.members["a"].broadcast("x")
    wire.step("a", "b")
    assert wire.payloads("b") == ["x"]
    wire.kill("b")  # b dies before forwarding x to c
    wire.install("a", "c")
    catch_up = wire.step("a", "c")
    assert isinstance(catch_up, CatchUp)
    assert wire.payloads("c") == ["x"]
    wire.pump()
    assert wire.members["a"].confirmed_upto == 0
    assert wire.members["a"].pending_acks == wire.members["c"].pending_acks == 0


def test_an_heirs_catch_up_still_acks_what_it_absorbed_if_that_ack_is_lost() -> None:
    # d's "p" (sent before h joined) reaches h, d's heir, only after h was caught up
    # without it; h acks it towards z, which dies with the ack. h's catch-up to its
    # next right must still tell a and b that "p" is over.
    wire = Wire()
    wire.create("a")
    wire.join("b")
    wire.join("d")
    wire.pump()
    wire.members["d"].broadcast("p")
    wire.step("d", "a")
    wire.join("h", tell=False)
    wire.kill("d")
    wire.install("a", "b", "h")
    wire.step("b", "h")  # h's first catch-up: no "p" yet
    wire.join("z")
    wire.step("a", "b")
    wire.step("b", "h")  # "p" comes back round to its owner, h
    wire.kill("z")
    wire.install("a", "b", "h")
    wire.pump()
    assert wire.payloads("b") == ["p"]
    assert all(wire.members[m].pending_acks == 0 for m in "abh")


def test_a_catch_up_does_not_deliver_again_what_the_new_right_has() -> None:
    wire = three()
    wire.members["a"].broadcast("x")
    wire.step("a", "b")
    wire.step("b", "c")
    wire.kill("b")  # x reached c; a's catch-up to c still holds it
    wire.install("a", "c")
    catch_up = wire.step("a", "c")
    assert isinstance(catch_up, CatchUp) and catch_up.senders["a"].pending
    wire.pump()
    assert wire.payloads("c") == ["x"]
    assert wire.members["a"].confirmed_upto == 0
    assert wire.members["a"].pending_acks == wire.members["c"].pending_acks == 0


def test_the_left_of_a_dead_member_resends_acks_it_did_not_pass_on() -> None:
    wire = three()
    wire.members["a"].broadcast("x")
    for hop in ["ab", "bc", "ca", "ab"]:
        wire.step(*hop)
    wire.kill("b")  # b dies holding the ack for c
    wire.install("a", "c")
    assert wire.members["c"].pending_acks == 1
    wire.pump()
    assert wire.members["c"].pending_acks == 0
    assert wire.payloads("c") == ["x"]


def test_the_heir_of_a_dead_sender_completes_its_broadcast() -> None:
    wire = three()
    wire.members["a"].broadcast("x")
    wire.step("a", "b")
    wire.step("b", "c")
    wire.kill("a")  # x was on its way back to a
    assert wire.view is not None and wire.view.owner_of("a") == "b"
    wire.install("b", "c")
    wire.pump()
    assert wire.payloads("b") == wire.payloads("c") == ["x"]
    assert wire.members["b"].pending_acks == wire.members["c"].pending_acks == 0


def test_a_dead_senders_broadcast_that_reached_one_member_reaches_the_rest() -> None:
    wire = Wire()
    for name in "abcd":
        wire.create(name) if name == "a" else wire.join(name)
    wire.pump()
    wire.members["a"].broadcast("x")
    wire.step("a", "b")
    wire.kill("a")
    wire.install("b", "c", "d")
    wire.pump()
    assert [wire.payloads(m) for m in "bcd"] == [["x"]] * 3
    assert all(wire.members[m].pending_acks == 0 for m in "bcd")


def test_a_joiner_whose_left_died_first_is_caught_up_by_the_next_one() -> None:
    # c joins right of b; b dies before its catch-up to c leaves, with a's broadcast
    # (sent once a knew of c) in hand. a, c's new left, holds it: c must deliver it.
    wire = Wire()
    wire.create("a")
    wire.join("b")
    wire.pump()
    wire.join("c", tell=False)
    wire.install("a")
    wire.members["a"].broadcast("meant for c")
    wire.step("a", "b")
    wire.install("b")
    wire.kill("b")
    wire.install("a", "c")
    wire.pump()
    assert wire.payloads("c") == ["meant for c"]
    assert wire.members["a"].confirmed_upto == 0
    assert wire.members["a"].pending_acks == wire.members["c"].pending_acks == 0


def test_when_no_caught_up_member_survives_the_eldest_starts_afresh() -> None:
    wire = Wire()
    wire.create("a")
    wire.join("b", tell=False)
    wire.join("c", tell=False)
    wire.install("b")
    wire.members["b"].broadcast("from b")
    wire.kill("a")  # before it caught anyone up
    wire.install("b", "c")
    wire.pump()
    b, c = wire.members["b"], wire.members["c"]
    assert b.caught_up and c.caught_up
    assert wire.payloads("c") == ["from b"]
    assert b.confirmed_upto == 0


def test_a_message_waits_for_the_view_it_was_sent_under() -> None:
    wire = three()
    wire.kill("b")
    wire.install("a")  # c has not heard of b's death yet
    catch_up = wire.step("a", "c")
    assert isinstance(catch_up, CatchUp)
    assert wire.members["c"].held == 1
    wire.install("c")
    assert wire.members["c"].held == 0
    assert wire.members["c"].left == "a"


def test_a_member_alone_confirms_at_once_and_a_shrinking_group_purges() -> None:
    wire = Wire()
    a = wire.create("a")
    a.broadcast("solo")
    assert a.confirmed_upto == 0
    assert wire.payloads("a") == []  # not collected yet
    wire.collect()
    assert wire.payloads("a") == ["solo"]
    wire.join("b")
    wire.pump()
    a.broadcast("pair")
    wire.collect()
    wire.kill("b")
    wire.install("a")
    assert a.confirmed_upto == 1
    assert a.pending_acks == 0


def test_a_member_dropped_from_the_view_learns_it_lost_membership() -> None:
    wire = three()
    stale = wire.view
    b = wire.members["b"]
    wire.kill("b")
    with pytest.raises(LostMembership):
        assert wire.view is not None
        b.install_view(wire.view)
    assert stale is not None
    wire.members["a"].install_view(stale)  # an older view is ignored
    assert wire.members["a"].view.version == 3


def test_a_skipped_view_still_gets_the_right_neighbour_a_catch_up() -> None:
    # a's left goes c -> d (joins) -> c (d dies) while c never sees d: a dropped what
    # c sent meanwhile, so c must catch a up though its right looks unchanged.
    wire = three()
    wire.join("d", tell=False)
    wire.install("a")
    wire.members["c"].broadcast("y")
    wire.step("c", "a")  # dropped: a's left is d now
    assert wire.payloads("a") == []
    wire.kill("d")
    wire.install("a", "b", "c")
    wire.pump()
    assert wire.payloads("a") == wire.payloads("b") == ["y"]
    assert wire.members["c"].confirmed_upto == 0


def test_after_dropping_a_neighbours_catch_up_its_activity_waits_for_the_next() -> None:
    # e dies before passing c's "p" on to a, so c's catch-up to a carries it; but a
    # has moved on to d as its left and drops that catch-up. When d dies and c is a's
    # left again, c's "q" must not be delivered ahead of the catch-up bringing "p".
    wire = Wire()
    wire.create("a")
    for name in "bce":
        wire.join(name)
    wire.pump()
    wire.members["c"].broadcast("p")
    wire.step("c", "e")
    wire.kill("e")
    wire.install("a", "b", "c")
    wire.join("d", tell=False)
    wire.install("a")
    assert isinstance(wire.step("c", "a"), CatchUp)  # dropped: a's left is d
    wire.members["c"].broadcast("q")
    wire.kill("d")
    wire.install("a")
    assert isinstance(wire.step("c", "a"), Activity)  # from its left, yet must wait
    assert wire.payloads("a") == []
    wire.install("b", "c")
    wire.pump()
    assert wire.payloads("a") == ["p", "q"]
    assert wire.members["c"].confirmed_upto == 1


def test_starting_twice_or_from_a_foreign_view_is_refused() -> None:
    gm = GroupMember("a")
    with pytest.raises(ValueError):
        gm.create(View.first("b"))
    with pytest.raises(ValueError):
        gm.join(View.first("b"))
    with pytest.raises(RuntimeError):
        gm.broadcast("too soon")
    gm.create(View.first("a"))
    with pytest.raises(RuntimeError):
        gm.create(View.first("a"))
