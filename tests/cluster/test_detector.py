"""Failure and partition detection, and the node-to-node frame codec, with no sockets."""

from __future__ import annotations

import pytest

from cluster.peer.codec import CodecError, Envelope, FrameBuffer, encode
from cluster.peer.detector import AppStarted, AppStopped, FailureDetector, PeerDown, PeerUp


def test_peer_goes_down_after_missed_ticks_and_a_return_without_restart_is_a_partition() -> None:
    detector = FailureDetector(["b"], tick=1.0, count=4)
    assert detector.hello("b", "inc1", True, now=0.0) == [PeerUp("b", "inc1", False, False)]
    assert detector.running() == ["b"]
    assert detector.heard("b", "inc1", True, now=3.9) == []
    assert detector.tick(now=7.8) == []
    assert detector.tick(now=8.0) == [PeerDown("b", "no heartbeat for 4s")]
    assert detector.running() == []
    assert detector.hello("b", "inc1", True, now=20.0) == [PeerUp("b", "inc1", False, True)]
    assert detector.partitions == {"b"}


def test_a_new_incarnation_is_a_restart_and_clears_the_partition() -> None:
    detector = FailureDetector(["b"], tick=1.0, count=4)
    detector.hello("b", "inc1", True, now=0.0)
    detector.link_closed("b")
    detector.hello("b", "inc1", True, now=1.0)
    assert detector.partitions == {"b"}
    assert detector.heard("b", "inc2", True, now=2.0) == [
        PeerDown("b", "restarted"), PeerUp("b", "inc2", True, False)
    ]
    assert detector.partitions == set()


def test_a_peer_that_links_up_before_its_app_reports_the_app_start_and_stop() -> None:
    detector = FailureDetector(["b"], tick=1.0, count=4)
    assert detector.hello("b", "inc1", False, now=0.0) == [PeerUp("b", "inc1", False, False)]
    assert detector.heard("b", "inc1", True, now=0.5) == [AppStarted("b", "inc1")]
    assert detector.running() == ["b"]
    assert detector.heard("b", "inc1", True, now=1.0) == []
    # A redialled link says hello again: the same incarnation is no event, but its
    # app state still counts.
    assert detector.hello("b", "inc1", False, now=1.5) == [AppStopped("b")]
    assert detector.running() == [] and detector.partitions == set()


def test_a_stopped_app_is_reachable_but_not_running() -> None:
    detector = FailureDetector(["b"], tick=1.0, count=4)
    detector.hello("b", "inc1", False, now=0.0)
    assert detector.reachable() == ["b"] and detector.running() == []


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


class Growing:
    """A deferred payload its sender keeps adding to."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def encode(self) -> bytes:
        return b"".join(self.parts)


def test_a_deferred_payload_is_encoded_when_the_envelope_is() -> None:
    growing = Growing()
    envelope = Envelope("batch", {"n": 1}, deferred=growing)
    growing.parts += [b"a", b"\x00b"]
    (got,) = FrameBuffer().feed(encode(envelope))
    assert got == Envelope("batch", {"n": 1}, b"a\x00b")


def test_codec_keeps_a_partial_frame_after_whole_ones_in_one_chunk() -> None:
    envelopes = [Envelope("x", {"i": i}, bytes([i]) * i) for i in range(5)]
    wire = b"".join(encode(e) for e in envelopes)
    cut = len(wire) - 3
    buffer = FrameBuffer()
    assert buffer.feed(wire[:cut]) == envelopes[:4]
    assert buffer.feed(wire[cut:]) == envelopes[4:]
    assert buffer.feed(wire) == envelopes  # nothing left over from before
