"""GM messages and confirms as bytes on peer links: raw message bodies, batches that
grow until sent, and clear errors for junk."""

from __future__ import annotations

import json
import struct

import pytest

from cluster.core.message import Message
from cluster.gm import Activity, CatchUp, Entry, Pub, SenderSnapshot
from cluster.ha.confirms import ConfirmBatch, decode_confirms
from cluster.ha.wire import OutgoingGM, PublishBatch, decode_gm, decode_publishes, encode_gm
from cluster.peer.codec import CodecError

BODY = bytes(range(256)) * 4  # every byte value, as a body may hold


def message(body: bytes = BODY, persistent: bool = True) -> Message:
    return Message("", "q", b"\x80\x00\x02", body, persistent)


def test_activity_round_trip_keeps_messages_and_other_ops() -> None:
    activity = Activity(7, [
        Entry("n1/a", [Pub(0, 7, ["pub", 0, "n1|1|1", 1, True, message()]),
                       Pub(1, 7, ["take", 0, False, "n2|3|1"]),
                       Pub(2, 7, ["sync", ["n3/b"], [[0, True, "o", message(b"")],
                                                     [1, False, None, message(b"z", False)]]])],
              -1),
        Entry("n2/b", [], 4),
    ])
    decoded = decode_gm(encode_gm(activity))
    assert decoded == activity


def test_catch_up_round_trip() -> None:
    catch_up = CatchUp(3, {
        "n1/a": SenderSnapshot((Pub(5, 2, ["pub", 9, "s", 3, False, message()]),), 5, 4),
        "n2/b": SenderSnapshot((), -1, -1),
    })
    assert decode_gm(encode_gm(catch_up)) == catch_up


def test_bodies_travel_raw_not_as_text() -> None:
    data = encode_gm(Activity(1, [Entry("n1/a", [Pub(0, 1, ["pub", 0, "s", 1, True,
                                                                 message()])], -1)]))
    assert BODY in data
    assert len(data) < len(BODY) + 200


def frame(skeleton: object, blob: bytes = b"") -> bytes:
    text = json.dumps(skeleton).encode()
    return struct.pack(">I", len(text)) + text + blob


@pytest.mark.parametrize(("data", "says"), [
    (b"\x00\x00", "shorter than its header"),
    (b"\x00\x00\x00\x09{}", "overruns"),
    (b"\x00\x00\x00\x02[x", "bad gm message"),
    (frame([1, 2]), "not an object"),
    (frame({"x": 1}), "neither activity nor catch-up"),
    (frame({"a": "1", "e": []}), "where a number belongs"),
    (frame({"a": 1, "e": [[5, [], -1]]}), "where a member belongs"),
    (frame({"a": 1, "e": [["n1/a", [[0, 1]], -1]]}), "bad gm message"),
    (frame({"a": 1, "e": "nope"}), "bad gm message"),
    (frame({"c": 1, "s": {"n1/a": [[], -1]}}), "bad gm message"),
    (frame({"a": 1, "e": [["n1/a", [[0, 1, {"$m": [0, 50]}]], -1]]}, b"short"),
     "outside its 5 bytes"),
    (frame({"a": 1, "e": [["n1/a", [[0, 1, {"$m": [-1, 2]}]], -1]]}, b"ab"), "outside"),
    (frame({"a": 1, "e": [["n1/a", [[0, 1, {"$m": ["0", 2]}]], -1]]}, b"ab"), "outside"),
    (frame({"a": 1, "e": [["n1/a", [[0, 1, {"$m": 3}]], -1]]}, b"ab"), "bad gm message"),
    # a message whose own header claims more bytes than it has
    (frame({"a": 1, "e": [["n1/a", [[0, 1, {"$m": [0, 8]}]], -1]]},
           b"\x05\x05\x00\x00\x00\x10\x01x"), "shorter than its header says"),
])
def test_malformed_gm_messages_are_codec_errors(data: bytes, says: str) -> None:
    with pytest.raises(CodecError, match=says):
        decode_gm(data)


def test_a_payload_that_is_not_json_or_a_message_cannot_be_sent() -> None:
    with pytest.raises(TypeError, match="cannot carry"):
        encode_gm(Activity(1, [Entry("n1/a", [Pub(0, 1, object())], -1)]))


def test_later_activity_joins_an_outgoing_message_of_the_same_view() -> None:
    first = Activity(2, [Entry("n1/a", [Pub(0, 2, "x")], -1)])
    out = OutgoingGM(first)
    assert out.absorb(Activity(2, [Entry("n1/a", [Pub(1, 2, "y")], 0),
                                   Entry("n2/b", [], 3)]))
    assert out.message == Activity(2, [Entry("n1/a", [Pub(0, 2, "x"), Pub(1, 2, "y")], 0),
                                       Entry("n2/b", [], 3)])
    assert decode_gm(out.encode()) == out.message
    assert not out.absorb(Activity(3, [Entry("n1/a", [Pub(2, 3, "z")], -1)]))
    assert not out.absorb(CatchUp(2, {}))
    assert not OutgoingGM(CatchUp(2, {})).absorb(Activity(2, []))


def test_confirm_batch_round_trip() -> None:
    batch = ConfirmBatch()
    for sender, uid, pubid in [("n1|1|1", "u1", 1), ("n1|1|1", "u1", 2), ("n1|2|1", "u1", 7),
                               ("n1|1|1", "u2", 3)]:
        batch.add(sender, uid, pubid)
    assert decode_confirms(batch.encode()) == [
        ("n1|1|1", "u1", [1, 2]), ("n1|1|1", "u2", [3]), ("n1|2|1", "u1", [7])]


@pytest.mark.parametrize(("data", "says"), [
    (b"{", "bad q.confirm payload"),
    (b"[1]", "not an object"),
    (b'{"s": 5}', "not an object"),
    (b'{"s": {"u": 5}}', "not publish ids"),
    (b'{"s": {"u": [1, "2"]}}', "not publish ids"),
])
def test_malformed_confirms_are_codec_errors(data: bytes, says: str) -> None:
    with pytest.raises(CodecError, match=says):
        decode_confirms(data)


def test_a_publish_batch_keeps_the_order_and_the_queue_declaration_of_each_publish() -> None:
    batch = PublishBatch()
    publishes = [("/", "a", "u1", "n2|1|1", 1, True, message()),
                 ("/", "a", "u1", "n2|1|1", 2, False, message(b"")),
                 ("/", "a", "u2", "n2|2|1", 1, True, message()),  # "a" declared again
                 ("/", "b", "u3", "n2|1|1", 3, True, message(b"x", False)),
                 ("v", "b", "u3", "n2|1|1", 4, True, message())]
    for publish in publishes:
        batch.add(*publish)
    data = batch.encode()
    assert BODY in data
    assert [(vhost, name, uid, *publish)
            for vhost, name, uid, run in decode_publishes(data) for publish in run] == publishes
    assert len(decode_publishes(data)) == 4  # a run per declaration in a row


EMPTY = message(b"").encode()


@pytest.mark.parametrize(("data", "says"), [
    (b"\x00", "q.pub payload of 1 bytes is shorter"),
    (frame({"a": 1}), "bad q.pub payload"),
    (frame([["/", "a", "u", "nope"]]), "bad q.pub payload"),
    (frame([["/", 5, "u", []]]), "5 where a queue belongs"),
    (frame([["/", "a", "u", [["s", "1", True, {"$m": [0, len(EMPTY)]}]]]], EMPTY),
     "'1' where a number belongs"),
    (frame([["/", "a", "u", [["s", 1, 1, {"$m": [0, len(EMPTY)]}]]]], EMPTY),
     "1 where true or false belongs"),
    (frame([["/", "a", "u", [["s", 1, True, "m"]]]]), "'m' where a message belongs"),
    (frame([["/", "a", "u", [["s", 1, True, {"$m": [0, 9]}]]]], b"ab"), "outside its 2 bytes"),
])
def test_malformed_publish_batches_are_codec_errors(data: bytes, says: str) -> None:
    with pytest.raises(CodecError, match=says):
        decode_publishes(data)
