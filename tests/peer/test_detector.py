"""Failure and partition detection, and the node-to-node frame codec, with no sockets."""

from __future__ import annotations

import pytest

from cluster.peer.codec import CodecError, Envelope, FrameBuffer, encode
from cluster.peer.detector import (
    Answer,
    AppStarted,
    AppStopped,
    Ask,
    FailureDetector,
    Heartbeat,
    PartialPartition,
    PeerDown,
    PeerLost,
    PeerUp,
    Probe,
)

ME = ["a"]  # a peer's report that it hears us, node "a"


def detector(*peers: str) -> FailureDetector:
    return FailureDetector("a", list(peers or ["b"]), tick=1.0, count=4)


def test_peer_goes_down_after_missed_ticks_and_a_return_without_restart_is_a_partition() -> None:
    d = detector()
    assert d.heard("b", "inc1", True, ME, now=0.0) == [
        Heartbeat("b"), PeerUp("b", "inc1", False, False)]
    assert d.running() == ["b"]
    assert d.heard("b", "inc1", True, ME, now=3.9) == []
    assert d.tick(now=7.8) == []
    # Nobody else to ask whether they still hear b: the loss is settled at once.
    assert d.tick(now=8.0) == [PeerDown("b", "no heartbeat for 4s"), PeerLost("b")]
    assert d.running() == [] and d.hears() == []
    assert d.heard("b", "inc1", True, ME, now=20.0) == [
        Heartbeat("b"), PeerUp("b", "inc1", False, True)]
    assert d.partitions == {"b"}


def test_a_peer_is_up_only_while_it_hears_us_too() -> None:
    d = detector()
    # b's link reaches us, but b has not heard from us yet: linked, not up. b is told
    # at once that we hear it.
    assert d.heard("b", "inc1", True, [], now=0.0) == [Heartbeat("b")]
    assert d.hears() == ["b"] and d.reachable() == []
    assert d.heard("b", "inc1", True, ME, now=0.5) == [
        Heartbeat("b"), PeerUp("b", "inc1", False, False)]
    # A cut from us to b: b's heartbeats still arrive, saying it lost us.
    assert d.heard("b", "inc1", True, [], now=1.0) == [
        PeerDown("b", "it no longer hears us"), PeerLost("b")]
    assert d.heard("b", "inc1", True, [], now=2.0) == []
    assert d.reachable() == [] and d.hears() == ["b"]
    assert d.heard("b", "inc1", True, ME, now=3.0) == [
        Heartbeat("b"), PeerUp("b", "inc1", False, True)]


def test_a_peer_coming_up_is_told_we_hear_it_before_the_node_hears_of_it() -> None:
    """The first we hear of b says it hears us: b comes up at once, and the node sends
    it its metadata then. b takes messages from us only once it knows we hear it (our
    hello reached it before we heard b), so the heartbeat must be on the link first."""
    d = detector()
    assert d.heard("b", "inc1", True, ME, now=0.0) == [
        Heartbeat("b"), PeerUp("b", "inc1", False, False)]
    # Taken down while still linked (a partial partition made full): its return too.
    d.disconnect("b", "partial partition", now=1.0)
    assert d.heard("b", "inc1", True, ME, now=1.5) == [
        Heartbeat("b"), PeerUp("b", "inc1", False, True)]
    assert d.heard("b", "inc1", True, ME, now=2.0) == []  # up and linked: no news


def test_a_new_incarnation_is_a_restart_and_heals_the_partition() -> None:
    d = detector()
    d.heard("b", "inc1", True, ME, now=0.0)
    d.link_closed("b", now=1.0)
    d.heard("b", "inc1", True, ME, now=1.0)
    assert d.partitions == {"b"}
    assert d.heard("b", "inc2", True, ME, now=2.0) == [
        PeerDown("b", "restarted"), PeerLost("b"), Heartbeat("b"),
        PeerUp("b", "inc2", True, False, healed=True)]
    assert d.partitions == set()
    # a restart with no partition standing heals nothing
    assert d.heard("b", "inc3", True, ME, now=3.0)[-1] == PeerUp("b", "inc3", True, False)


def test_a_peer_that_links_up_before_its_app_reports_the_app_start_and_stop() -> None:
    d = detector()
    assert d.heard("b", "inc1", False, ME, now=0.0) == [
        Heartbeat("b"), PeerUp("b", "inc1", False, False)]
    assert d.heard("b", "inc1", True, ME, now=0.5) == [AppStarted("b", "inc1")]
    assert d.running() == ["b"]
    assert d.heard("b", "inc1", True, ME, now=1.0) == []
    # A redialled link says hello again: the same incarnation is no event, but its
    # app state still counts.
    assert d.heard("b", "inc1", False, ME, now=1.5) == [AppStopped("b")]
    assert d.running() == [] and d.partitions == set()


def test_a_stopped_app_is_reachable_but_not_running() -> None:
    d = detector()
    d.heard("b", "inc1", False, ME, now=0.0)
    assert d.reachable() == ["b"] and d.running() == []


def test_a_lost_peer_that_another_still_hears_is_a_partial_partition() -> None:
    a = detector("b", "c")
    c = FailureDetector("c", ["a", "b"], tick=1.0, count=4)
    for peer in ("b", "c"):
        a.heard(peer, "inc-" + peer, True, ["a", "b", "c"], now=0.0)
    c.heard("a", "inc-a", True, ["b", "c"], now=0.0)
    c.heard("b", "inc-b", True, ["a", "c"], now=0.0)
    # a stops hearing b; it asks c, the only peer it still sees.
    a.heard("c", "inc-c", True, ["a", "b", "c"], now=4.0)
    assert a.tick(now=4.5) == [PeerDown("b", "no heartbeat for 4s"), Ask("c", "b")]
    assert c.asked("a", "b") == [Probe("b", 1)]
    # c answers once b replies to its probe, which proves b is alive now.
    assert c.heard("a", "inc-a", True, ["c"], now=5.2) == []
    assert c.replied("b", 1) == [Answer("a", "b", True)]
    assert c.replied("b", 1) == []  # once
    assert a.answered("c", "b", True) == [PartialPartition("b", "c")]
    # Once b is back to a, a late answer is no news.
    a.heard("b", "inc-b", True, ["a", "c"], now=6.0)
    assert a.answered("c", "b", True) == []


def test_a_peer_lost_after_its_app_stopped_is_no_partial_partition() -> None:
    """A graceful stop reports the app stopped, then closes the links: a peer that has
    not yet seen the link close still hears it, but there is nothing to ask about."""
    a = detector("b", "c")
    for peer in ("b", "c"):
        a.heard(peer, "inc-" + peer, True, ["a", "b", "c"], now=0.0)
    assert a.heard("b", "inc-b", False, ["a", "c"], now=1.0) == [AppStopped("b")]
    assert a.link_closed("b", now=1.1) == [PeerDown("b", "connection closed"), PeerLost("b")]
    assert a.answered("c", "b", True) == []


def test_a_peer_lost_by_everyone_is_settled_by_their_answers() -> None:
    a = detector("b", "c", "d")
    for peer in ("b", "c", "d"):
        a.heard(peer, "inc-" + peer, True, ["a", "b", "c", "d"], now=0.0)
    assert a.link_closed("b", now=1.0) == [PeerDown("b", "connection closed"), Ask("c", "b"),
                                  Ask("d", "b")]
    assert a.answered("c", "b", False) == []  # d has yet to say
    assert a.answered("c", "b", False) == []  # and c only counts once
    assert a.answered("d", "b", False) == [PeerLost("b")]
    # A peer we asked that goes down meanwhile cannot answer: it is not waited for.
    assert a.link_closed("c", now=1.0) == [PeerDown("c", "connection closed"), Ask("d", "c")]
    assert a.link_closed("d", now=1.0) == [PeerDown("d", "connection closed"), PeerLost("c"),
                                  PeerLost("d")]


def test_an_answer_that_does_not_come_settles_the_loss_after_a_window() -> None:
    a = detector("b", "c")
    for peer in ("b", "c"):
        a.heard(peer, "inc-" + peer, True, ["a", "b", "c"], now=0.0)
    a.link_closed("b", now=1.0)  # c is asked, and says nothing for a whole window
    a.heard("c", "inc-c", True, ["a", "c"], now=3.0)
    assert a.tick(now=4.9) == []
    assert a.tick(now=5.1) == [PeerLost("b")]


def test_what_a_lost_peer_sent_before_it_died_is_no_sign_of_life() -> None:
    """c reads b's last heartbeat and message late (it is busy): neither answers a's
    question, only b's reply to the probe sent after it would."""
    c = FailureDetector("c", ["a", "b"], tick=1.0, count=4)
    c.heard("a", "inc-a", True, ["b", "c"], now=0.0)
    c.heard("b", "inc-b", True, ["a", "c"], now=0.0)
    assert c.asked("a", "b") == [Probe("b", 1)]
    assert c.heard("b", "inc-b", True, ["a", "c"], now=0.6) == []
    c.message("b", now=0.7)
    assert c.link_closed("b", now=0.8) == [PeerDown("b", "connection closed"),
                                           Answer("a", "b", False), Ask("a", "b")]


def test_a_reply_answers_only_the_questions_probed_before_it() -> None:
    c = FailureDetector("c", ["a", "b", "d"], tick=1.0, count=4)
    for peer in ("a", "b", "d"):
        c.heard(peer, "inc-" + peer, True, ["a", "b", "c", "d"], now=0.0)
    assert c.asked("a", "b") == [Probe("b", 1)]
    assert c.asked("d", "b") == [Probe("b", 2)]
    assert c.replied("b", 1) == [Answer("a", "b", True)]  # sent before d asked
    assert c.replied("b", 2) == [Answer("d", "b", True)]


def test_the_asked_peer_answers_no_when_it_has_lost_that_peer_too() -> None:
    c = FailureDetector("c", ["a", "b"], tick=1.0, count=4)
    c.heard("a", "inc-a", True, ["b", "c"], now=0.0)
    c.heard("b", "inc-b", True, ["a", "c"], now=0.0)
    # b is still up to c: answered when b replies to c's probe or c loses b.
    assert c.asked("a", "b") == [Probe("b", 1)]
    assert c.link_closed("b", now=1.0) == [PeerDown("b", "connection closed"),
                                  Answer("a", "b", False), Ask("a", "b")]
    assert c.replied("b", 1) == []  # too late: b is down to c
    assert c.asked("a", "b") == [Answer("a", "b", False)]  # already lost: at once


def test_codec_round_trip_across_arbitrary_chunking() -> None:
    envelopes = [Envelope("hb", {"incarnation": "x", "app": True}),
                 Envelope("publish", {"queue": "q"}, b"\x00\xffbody" * 100)]
    wire = b"".join(encode(e) for e in envelopes)
    buffer = FrameBuffer()
    got = []
    for start in range(0, len(wire), 7):
        got += buffer.feed(wire[start:start + 7])
    assert got == envelopes


@pytest.mark.parametrize("garbage", [
    b"\xff\xff\xff\xff\x00\x01x",  # length beyond the limit
    b"\x00\x00\x00\x05\x00\x03abc",  # header is not JSON
    b"\x00\x00\x00\x04\x00\x02[]",  # header is not an object
    b"\x00\x00\x00\x0a\x00\x08{\"t\": 5}",  # type is not a string
])
def test_codec_rejects_garbage(garbage: bytes) -> None:
    with pytest.raises(CodecError):
        FrameBuffer().feed(garbage)


def test_codec_keeps_a_partial_frame_after_whole_ones_in_one_chunk() -> None:
    envelopes = [Envelope("x", {"i": i}, bytes([i]) * i) for i in range(5)]
    wire = b"".join(encode(e) for e in envelopes)
    cut = len(wire) - 3
    buffer = FrameBuffer()
    assert buffer.feed(wire[:cut]) == envelopes[:4]
    assert buffer.feed(wire[cut:]) == envelopes[4:]
    assert buffer.feed(wire) == envelopes  # nothing left over from before


def test_a_peer_back_before_its_loss_is_settled_comes_up_unsettled() -> None:
    a = detector("b", "c")
    for peer in ("b", "c"):
        a.heard(peer, "inc-" + peer, True, ["a", "b", "c"], now=0.0)
    assert a.link_closed("b", now=1.0) == [PeerDown("b", "connection closed"), Ask("c", "b")]
    # b redials before c answers: whatever the two sent meanwhile may be lost.
    assert a.heard("b", "inc-b", True, ["a", "c"], now=1.2) == [
        Heartbeat("b"), PeerUp("b", "inc-b", False, True, unsettled=True)]
    assert a.answered("c", "b", False) == []  # too late: nothing left to settle
    # Once c has said it lost b too, the loss is settled and the return is a plain one.
    a.link_closed("b", now=2.0)
    assert a.answered("c", "b", False) == [PeerLost("b")]
    assert a.heard("b", "inc-b", True, ["a", "c"], now=2.5) == [
        Heartbeat("b"), PeerUp("b", "inc-b", False, True, unsettled=False)]


def test_a_peer_back_restarted_before_its_loss_is_settled_settles_the_old_one() -> None:
    a = detector("b", "c")
    for peer in ("b", "c"):
        a.heard(peer, "inc-" + peer, True, ["a", "b", "c"], now=0.0)
    a.link_closed("b", now=1.0)
    assert a.heard("b", "inc-b2", True, ["a", "c"], now=1.5) == [
        Heartbeat("b"), PeerLost("b"), PeerUp("b", "inc-b2", True, False)]
