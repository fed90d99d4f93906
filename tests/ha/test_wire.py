"""The peer protocol on the wire: every envelope and replicated op through its one
codec and back, raw message bodies, clear typed errors for junk, and the outbox that
batches what one batch of input sends each peer."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import get_args

import pytest
from pamqp import commands

from cluster.core.message import Message
from cluster.core.queue import Counts, Entry, GetAnswer
from cluster.gm import Activity, CatchUp, Pub, SenderSnapshot
from cluster.gm import Entry as GMEntry
from cluster.ha.checks import MalformedEnvelope
from cluster.ha.messages import (
    Answer,
    AskConsume,
    AskCounts,
    AskDelete,
    AskGet,
    AskPurge,
    Bye,
    Call,
    Cancel,
    CatchUpAsk,
    ConfirmRun,
    Confirms,
    Consume,
    ConsumerGone,
    Count,
    Credit,
    Deliver,
    Forget,
    GroupMessage,
    Meta,
    PeerMessage,
    Publish,
    Publishes,
    PublishRun,
    PubOp,
    PurgeOp,
    QueueRef,
    Refused,
    RequeueOp,
    Settle,
    SettleOp,
    SyncedMessage,
    SyncOp,
    SyncRequest,
    TakeOp,
)
from cluster.ha.outbox import Outbox
from cluster.ha.wire import decode, encode
from cluster.meta.replica import Update, Version
from cluster.peer.codec import CodecError, Envelope, FrameBuffer
from cluster.peer.codec import encode as frame
from tests.cluster.simcluster import SimCluster
from tests.cluster.standalone import three_node

BODY = bytes(range(256)) * 4  # every byte value, as a body may hold
Q = QueueRef("/", "ha.q")


def message(body: bytes = BODY, persistent: bool = True) -> Message:
    return Message("", "q", b"\x80\x00\x02", body, persistent)


def read_back(envelope: Envelope) -> PeerMessage:
    """``envelope`` framed as a link sends it, read back as a link reads it, decoded."""
    (received,) = FrameBuffer().feed(frame(envelope))
    return decode(received)


def through_the_wire(sent: PeerMessage) -> PeerMessage:
    return read_back(encode(sent))


OPS = [PubOp(0, "n1|1|1", 1, True, message()), TakeOp(0, False, "n2|3|1"),
       SettleOp((0, 3)), RequeueOp((1,)), PurgeOp(),
       SyncOp(("n3/b",), (SyncedMessage(0, True, "o", message(b"")),
                          SyncedMessage(1, False, None, message(b"z", False))))]

EXAMPLES: list[PeerMessage] = [
    Meta((Update(("queue", "/", "q"), {"durable": True}, Version(3, "n1")),
          Update(("exchange", "/", "x"), None, Version(4, "n2")))),
    Meta((), relay=True),
    Bye(),
    Forget("n3"),
    Publishes((PublishRun(Q, "u1", (Publish("n2|1|1", 1, True, message()),
                                    Publish("n2|1|1", 2, False, message(b"")))),
               PublishRun(QueueRef("v", "b"), "u3", (Publish("n2|2|1", 1, True, message()),)))),
    Confirms("n2", (ConfirmRun("n1|1|1", "u1", (1, 2)), ConfirmRun("n1|2|1", "u1", (7,)))),
    GroupMessage(Q, "u1", "n2/i", "n1/i", Activity(7, [
        GMEntry("n1/i", [Pub(i, 7, op) for i, op in enumerate(OPS)], -1),
        GMEntry("n2/i", [], 4)])),
    GroupMessage(Q, "u1", "n2/i", "n1/i", CatchUp(3, {
        "n1/i": SenderSnapshot((Pub(5, 2, OPS[0]),), 5, 4),
        "n2/i": SenderSnapshot((), -1, -1)})),
    CatchUpAsk(Q, "u1", "n1/i", "n2/i"),
    SyncRequest(Q, cancel=False),
    SyncRequest(Q, cancel=True),
    Consume(Q, "n2|1|1|c", "n2|1|1", no_ack=False, exclusive=True),
    Cancel(Q, "n2|1|1|c"),
    Credit(Q, "n2|1|1|c", 128),
    Settle(Q, (1, 2), "n2|1|1", requeue=True),
    Settle(Q, (), None, requeue=False),
    Deliver(Q, "n2|1|1|c", 9, True, message()),
    ConsumerGone("n2|1|1|c"),
    Call(Q, 1, AskGet(no_ack=True, owner="n2|1|1")),
    Call(Q, 2, AskPurge()),
    Call(Q, 3, AskDelete(if_unused=True, if_empty=False)),
    Call(Q, 4, AskCounts()),
    Call(Q, 5, AskConsume(exclusive=True)),
    Answer(1, GetAnswer(Entry(4, message()), True, 10)),
    Answer(1, GetAnswer(None, False, 0)),
    Answer(2, Count(3)),
    Answer(4, Counts(5, 2)),
    Answer(3, Refused("precondition", "queue 'q' in vhost '/' in use")),
    Answer(3, Refused("not_found")),
]


def test_every_envelope_kind_has_an_example() -> None:
    assert {type(example) for example in EXAMPLES} == set(get_args(PeerMessage))


@pytest.mark.parametrize("sent", EXAMPLES, ids=lambda m: type(m).__name__)
def test_every_envelope_round_trips(sent: PeerMessage) -> None:
    assert through_the_wire(sent) == sent


def test_bodies_travel_raw_not_as_text() -> None:
    for sent in (GroupMessage(Q, "u", "n2/i", "n1/i", Activity(1, [GMEntry("n1/i", [
                     Pub(0, 1, OPS[0])], -1)])),
                 Publishes((PublishRun(Q, "u", (Publish("s", 1, True, message()),)),)),
                 Deliver(Q, "k", 1, False, message())):
        envelope = encode(sent)
        assert BODY in envelope.payload
        assert len(envelope.payload) < len(BODY) + 200


def test_a_payload_that_is_no_op_cannot_be_sent() -> None:
    with pytest.raises(TypeError, match="cannot carry"):
        encode(GroupMessage(Q, "u", "n2/i", "n1/i",
                            Activity(1, [GMEntry("n1/i", [Pub(0, 1, object())], -1)])))


def blob(skeleton: object, data: bytes = b"") -> bytes:
    text = json.dumps(skeleton).encode()
    return struct.pack(">I", len(text)) + text + data


def gm(payload: bytes) -> Envelope:
    return Envelope("gm", {"q": ["/", "ha.q"], "u": "u1", "to": "n2/i", "fr": "n1/i"}, payload)


def activity(*pubs: object) -> dict[str, object]:
    return {"a": 1, "e": [["n1/a", list(pubs), -1]]}


EMPTY = message(b"").encode()
Q_FIELDS = {"q": ["/", "ha.q"]}


@pytest.mark.parametrize(("envelope", "says"), [
    (Envelope("q.nope"), "unknown envelope kind 'q.nope'"),
    (Envelope("forget"), "forget: no 'node' field"),
    (Envelope("forget", {"node": 5}), "5 where a string belongs"),
    (Envelope("q.credit", {**Q_FIELDS, "k": "c", "n": "1"}), "'1' where a number belongs"),
    (Envelope("q.credit", {"q": ["/"], "k": "c", "n": 1}), "q.credit: 1 values where 2 belong"),
    (Envelope("q.credit", {"q": "ha.q", "k": "c", "n": 1}), "'ha.q' where a list belongs"),
    (Envelope("q.consume", {**Q_FIELDS, "k": "c", "o": "n2|1|1", "na": 0, "x": False}),
     "0 where true or false belongs"),
    (Envelope("q.settle", {**Q_FIELDS, "seqs": [1, "2"], "o": None, "r": False}),
     "'2' where a number belongs"),
    (Envelope("q.sync", {**Q_FIELDS, "op": "go"}), "'go' where sync or cancel belongs"),
    (Envelope("q.deliver", {**Q_FIELDS, "k": "c", "seq": 1, "r": False}, b"\x00"),
     "q.deliver: error"),
    (Envelope("q.call", {**Q_FIELDS, "id": 1, "op": "drop"}), "'drop' is no call"),
    (Envelope("q.call", {**Q_FIELDS, "id": 1, "op": "get", "no_ack": True}),
     "no 'owner' field"),
    (Envelope("q.reply", {"id": 1, "r": "maybe"}), "'maybe' is no answer"),
    (Envelope("q.reply", {"id": 1, "r": "refused", "error": "down"}), "'down' is no refusal"),
    (Envelope("q.reply", {"id": 1, "r": "count"}), "no 'count' field"),
    (Envelope("meta", {}, b"{"), "meta: JSONDecodeError"),
    (Envelope("meta", {}, b'[{"key": ["q"], "value": 5, "version": [1, "n1"]}]'),
     "5 where a record belongs"),
    (Envelope("meta", {}, b'[{"key": ["q"], "value": null, "version": ["1", "n1"]}]'),
     "'1' where a number belongs"),
    (Envelope("meta", {"r": "yes"}, b"[]"), "'yes' where 1 or 0 belongs"),
    (Envelope("q.confirm", {"n": "n2"}, b"{"), "q.confirm: JSONDecodeError"),
    (Envelope("q.confirm", {"n": "n2"}, b"[1]"), "where confirms by sender belongs"),
    (Envelope("q.confirm", {"n": "n2"}, b'{"s": 5}'), "where confirms by queue belongs"),
    (Envelope("q.confirm", {"n": "n2"}, b'{"s": {"u": [1, "2"]}}'), "'2' where a number"),
    (Envelope("q.confirm", {}, b"{}"), "no 'n' field"),
    (Envelope("q.pub", {}, b"\x00"), "q.pub: payload of 1 bytes is shorter"),
    (Envelope("q.pub", {}, blob({"a": 1})), "q.pub: {'a': 1} where a list belongs"),
    (Envelope("q.pub", {}, blob([["/", "a", "u", "nope"]])), "'nope' where a list belongs"),
    (Envelope("q.pub", {}, blob([["/", 5, "u", []]])), "5 where a string belongs"),
    (Envelope("q.pub", {}, blob([["/", "a", "u", [["s", 1, True, "m"]]]])),
     "'m' where a message belongs"),
    (Envelope("q.pub", {}, blob([["/", "a", "u", [["s", 1, True, {"$m": [0, 9]}]]]], b"ab")),
     "outside its 2 bytes"),
    (gm(b"\x00\x00"), "gm: payload of 2 bytes is shorter than its header"),
    (gm(b"\x00\x00\x00\x09{}"), "overruns"),
    (gm(b"\x00\x00\x00\x02[x"), "gm: JSONDecodeError"),
    (gm(blob([1, 2])), "not an object"),
    (gm(blob({"x": 1})), "neither activity nor catch-up"),
    (gm(blob({"a": "1", "e": []})), "where a number belongs"),
    (gm(blob({"a": 1, "e": [[5, [], -1]]})), "5 where a string belongs"),
    (gm(blob({"a": 1, "e": "nope"})), "where a list belongs"),
    (gm(blob({"c": 1, "s": {"n1/a": [[], -1]}})), "gm: ValueError"),
    (gm(blob(activity([0, 1, ["pub", 0, "s", 1, True]]))), "5 values where 6 belong"),
    (gm(blob(activity([0, 1, ["shove", 0]]))), "'shove' is no replicated op"),
    (gm(blob(activity([0, 1, "x"]))), "'x' where a list belongs"),
    (gm(blob(activity([0, 1, ["take", 0, False, None]]))), "None where a string belongs"),
    (gm(blob(activity([0, 1, ["sync", ["n3/b"], [[0, True, 5, {"$m": [0, len(EMPTY)]}]]]]),
             EMPTY)), "5 where a channel or null belongs"),
    (gm(blob(activity([0, 1, ["pub", 0, "s", 1, True, {"$m": [0, 50]}]]), b"short")),
     "outside its 5 bytes"),
    (gm(blob(activity([0, 1, ["pub", 0, "s", 1, True, {"$m": [-1, 2]}]]), b"ab")), "outside"),
    (gm(blob(activity([0, 1, ["pub", 0, "s", 1, True, {"$m": 3}]]), b"ab")), "gm: TypeError"),
    # a message whose own header claims more bytes than it has
    (gm(blob(activity([0, 1, ["pub", 0, "s", 1, True, {"$m": [0, 8]}]]),
             b"\x05\x05\x00\x00\x00\x10\x01x")), "shorter than its header says"),
    (Envelope("gm", {"q": ["/", "ha.q"], "u": "u1", "to": "n2/i"}, blob(activity())),
     "no 'fr' field"),
])
def test_malformed_envelopes_are_typed_errors_that_say_what_was_wrong(
    envelope: Envelope, says: str,
) -> None:
    with pytest.raises(MalformedEnvelope, match=says) as raised:
        decode(envelope)
    assert isinstance(raised.value, CodecError)


def test_a_malformed_envelope_from_a_peer_changes_nothing_and_the_node_goes_on() -> None:
    """The coordinator raises the typed error before acting on any of it (the node
    shell logs it and drops the envelope); the cluster carries on as before."""
    sim = SimCluster(["n1", "n2"], seed=1)
    sim.set_policy("n1", "^ha", {"ha-mode": "all"})
    client = sim.client("n1")
    client.send(1, commands.Queue.Declare(queue="ha.q", durable=True))
    sim.pump()
    coordinator = sim.coordinators["n2"]
    before = coordinator.meta.snapshot()
    publishes = blob([["/", "ha.q", "u", [["n1|1|1", 1, True, {"$m": [0, len(EMPTY)]}],
                                          ["n1|1|1", 2, "yes", {"$m": [0, len(EMPTY)]}]]]],
                     EMPTY)
    with pytest.raises(MalformedEnvelope, match="'yes' where true or false belongs"):
        coordinator.received("n1", Envelope("q.pub", {}, publishes))
    with pytest.raises(MalformedEnvelope, match="unknown envelope kind"):
        coordinator.received("n1", Envelope("q.shove", {"q": ["/", "ha.q"]}))
    coordinator.received("n3", Envelope("q.shove"))  # not a running peer: not even read
    assert coordinator.meta.snapshot() == before
    assert coordinator.take_outbox() == []
    assert sim.brokers["n2"].vhosts["/"].queues["ha.q"].ready_count == 0
    client.publish(1, b"after", "ha.q")
    sim.pump()
    assert sim.brokers["n2"].vhosts["/"].queues["ha.q"].ready_count == 1


def test_the_dispatch_table_handles_every_envelope_kind() -> None:
    sim = SimCluster(["n1", "n2"], seed=1)
    assert set(sim.coordinators["n1"]._handlers) == set(get_args(PeerMessage))


# -- the outbox ---------------------------------------------------------------------------


def publish(pubid: int) -> Publish:
    return Publish("n1|1|1", pubid, True, message(b"%d" % pubid))


def taken(outbox: Outbox) -> list[tuple[str, PeerMessage]]:
    return [(peer, read_back(envelope)) for peer, envelope in outbox.take()]


def test_publishes_to_a_node_join_one_envelope_until_something_else_is_queued_for_it() -> None:
    outbox = Outbox("n1")
    outbox.publish("n2", Q, "u1", publish(1))
    outbox.publish("n3", Q, "u1", publish(1))  # another node's: no matter
    outbox.publish("n2", Q, "u1", publish(2))
    outbox.publish("n2", QueueRef("/", "other"), "u2", publish(3))
    outbox.send("n2", Credit(Q, "k", 1))
    outbox.publish("n2", Q, "u1", publish(4))  # must not overtake the credit
    assert taken(outbox) == [
        ("n2", Publishes((PublishRun(Q, "u1", (publish(1), publish(2))),
                          PublishRun(QueueRef("/", "other"), "u2", (publish(3),))))),
        ("n3", Publishes((PublishRun(Q, "u1", (publish(1),)),))),
        ("n2", Credit(Q, "k", 1)),
        ("n2", Publishes((PublishRun(Q, "u1", (publish(4),)),))),
    ]
    assert outbox.take() == []


def test_confirms_for_a_node_join_one_envelope_and_a_take_ends_the_batch() -> None:
    outbox = Outbox("n2")
    outbox.confirm("n1", "n1|1|1", "u1", 1)
    outbox.confirm("n1", "n1|1|1", "u1", 2)
    outbox.confirm("n1", "n1|2|1", "u1", 1)
    outbox.confirm("n1", "n1|1|1", "u2", 3)
    assert taken(outbox) == [("n1", Confirms("n2", (
        ConfirmRun("n1|1|1", "u1", (1, 2)), ConfirmRun("n1|1|1", "u2", (3,)),
        ConfirmRun("n1|2|1", "u1", (1,)))))]
    outbox.confirm("n1", "n1|1|1", "u1", 4)
    assert taken(outbox) == [("n1", Confirms("n2", (ConfirmRun("n1|1|1", "u1", (4,)),)))]


def group(to: str, version: int, *entries: GMEntry) -> GroupMessage:
    return GroupMessage(Q, "u1", to, "n1/i", Activity(version, list(entries)))


def queue_gm(outbox: Outbox, peer: str, message: GroupMessage) -> None:
    outbox.gm(peer, message.queue, message.uid, message.to, message.sender, message.message)


def test_a_members_later_activity_for_the_same_neighbour_joins_its_message() -> None:
    outbox = Outbox("n1")
    queue_gm(outbox, "n2", group("n2/i", 2, GMEntry("n1/i", [Pub(0, 2, OPS[1])], -1)))
    outbox.send("n2", Credit(Q, "k", 1))
    queue_gm(outbox, "n2", group("n2/i", 2, GMEntry("n1/i", [Pub(1, 2, OPS[2])], 0),
                          GMEntry("n3/i", [], 3)))
    queue_gm(outbox, "n2", group("n2/i", 3, GMEntry("n1/i", [Pub(2, 3, OPS[3])], -1)))  # new view
    queue_gm(outbox, "n3", group("n3/i", 3, GMEntry("n1/i", [Pub(3, 3, OPS[4])], -1)))  # another
    queue_gm(outbox, "n3", GroupMessage(Q, "u1", "n3/i", "n1/i", CatchUp(3, {})))  # no activity
    assert taken(outbox) == [
        ("n2", group("n2/i", 2, GMEntry("n1/i", [Pub(0, 2, OPS[1]), Pub(1, 2, OPS[2])], 0),
                     GMEntry("n3/i", [], 3))),
        ("n2", Credit(Q, "k", 1)),
        ("n2", group("n2/i", 3, GMEntry("n1/i", [Pub(2, 3, OPS[3])], -1))),
        ("n3", group("n3/i", 3, GMEntry("n1/i", [Pub(3, 3, OPS[4])], -1))),
        ("n3", GroupMessage(Q, "u1", "n3/i", "n1/i", CatchUp(3, {}))),
    ]


async def test_a_node_logs_a_malformed_envelope_and_takes_the_next(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """The node shell's path for a peer's envelope: the typed error is logged as the
    peer's protocol error, the envelope dropped, and the link's next envelope handled."""
    node = three_node(tmp_path, "n1", "ignore")
    await node.start_app()
    assert node.coordinator is not None and node.broker is not None
    node.coordinator.peer_up("n2", "i-n2")
    node._peer_message("n2", Envelope("q.credit", {"q": ["/", "q"], "k": "c", "n": "many"}))
    (logged,) = [record.getMessage() for record in caplog.records
                 if "protocol error" in record.getMessage()]
    assert logged == "peer protocol error from n2: q.credit: 'many' where a number belongs"
    exchange = {"key": ["exchange", "/", "x.next"], "version": [1, "n2"],
                "value": {"type": "direct", "durable": True, "auto_delete": False,
                          "internal": False, "arguments": {}}}
    node._peer_message("n2", Envelope("meta", {}, json.dumps([exchange]).encode()))
    assert "x.next" in node.broker.vhosts["/"].exchanges
    await node.stop_app()
