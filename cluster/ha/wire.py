"""The peer protocol's one codec: every envelope of `cluster.ha.messages` as a peer
`Envelope` (`encode`) and back (`decode`), replicated ops and GM messages within.

Frames are `cluster.peer.codec`'s (a JSON header whose ``"t"`` is the kind, then a
binary payload). Per kind, the header's other fields and the payload:

    kind         class          header fields                        payload
    meta         Meta           r: 1 when a relay                    updates (1)
    bye          Bye
    forget       Forget         node
    q.pub        Publishes                                           blob (2) of runs
    q.confirm    Confirms       n: the replicas' node                confirms (3)
    gm           GroupMessage   q, u, to, fr                         blob (2), GM message
    gm.ask       CatchUpAsk     q, u, to, fr
    q.sync       SyncRequest    q, op: "sync" | "cancel"
    q.consume    Consume        q, k, o, na, x
    q.cancel     Cancel         q, k
    q.credit     Credit         q, k, n
    q.settle     Settle         q, seqs, o, r
    q.deliver    Deliver        q, k, seq, r                         the message
    q.cancelled  ConsumerGone   k
    q.call       Call           q, id, op (4)
    q.reply      Answer         id, r (5)                            the message got

``q`` is ``[vhost, queue]``; ``u`` the queue declaration's uid; ``to`` and ``fr`` GM
members (receiver, sender); ``k`` a consumer's key; ``o`` the channel that owns the
consumer or the deliveries (``null``: any); ``na`` no-ack, ``x`` exclusive; ``n``
credit; ``r`` redelivered (``q.deliver``) or requeue (``q.settle``). A message is its
`Message.encode` bytes.

(1) A JSON list (`tablejson`, so field tables keep their types) of writes
    ``{"key": [...], "value": {...} | null, "version": [clock, node]}``.

(2) A blob (`cluster.ha.blob`): ``u32 skeleton length | skeleton (JSON) | message
    bytes, one after the other``. Each message in the skeleton is a reference
    ``{"$m": [offset, length]}`` into the bytes after it, so bodies are neither
    base64-encoded nor escaped into JSON. The skeleton of ``q.pub`` is ``[[vhost, queue,
    uid, [[sender, pubid, want, message], ...]], ...]``. That of a GM message is
    ``{"a": view, "e": [[sender, [pub, ...], ack], ...]}`` (activity) or ``{"c": view,
    "s": {sender: [[pub, ...], last pub, last ack]}}`` (catch-up), where a pub is
    ``[seq, view, op]`` and an op:

        ["pub", seq, sender, pubid, want, message]     PubOp
        ["take", seq, no_ack, owner]                   TakeOp
        ["settle", [seq, ...]]                         SettleOp
        ["requeue", [seq, ...]]                        RequeueOp
        ["purge"]                                      PurgeOp
        ["sync", [target, ...], [[seq, delivered, owner | null, message], ...]]  SyncOp

(3) JSON ``{sender: {uid: [pubid, ...]}}``.

(4) ``op`` is ``"get"`` (with ``no_ack``, ``owner``), ``"purge"``, ``"delete"`` (with
    ``if_unused``, ``if_empty``), ``"consume"`` (with ``exclusive``) or ``"status"``.

(5) ``r`` is ``"get"`` (``left``: messages left; ``seq`` and ``rd``, redelivered, when
    a message was taken, which is the payload), ``"count"`` (``count``), ``"counts"``
    (``count``, ``consumers``) or ``"refused"`` (``error``: ``not_found``,
    ``precondition`` or ``exclusive``; ``text``).

`decode` checks every field's type (`cluster.ha.checks`): an envelope that is not one of
these raises `MalformedEnvelope`, naming its kind and what was wrong, before anything
acts on it.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import Any, cast

from cluster.amqp import tablejson
from cluster.core.message import Message
from cluster.core.queue import Counts, Entry, GetAnswer
from cluster.gm import Activity, CatchUp, GMMessage, Pub, SenderSnapshot
from cluster.gm import Entry as GMEntry
from cluster.ha import blob
from cluster.ha import checks as check
from cluster.ha.checks import Fields, MalformedEnvelope
from cluster.ha.messages import (
    Answer,
    Ask,
    AskConsume,
    AskCounts,
    AskDelete,
    AskGet,
    AskPurge,
    Bye,
    Call,
    CallResult,
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
    Op,
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
from cluster.meta.replica import Update, Version
from cluster.peer import compactjson
from cluster.peer.codec import Envelope

# What a skeleton or header of the wrong shape raises as it is taken apart.
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError, struct.error)


# -- replicated ops and GM messages ------------------------------------------------------


def _sync_op(targets: object, messages: object) -> SyncOp:
    return SyncOp(tuple(check.member(t) for t in check.items(targets)), tuple(
        SyncedMessage(check.number(seq), check.flag(delivered), check.owner(owner),
                      check.message(message))
        for seq, delivered, owner, message in check.items(messages)))


# Per op: its tag, the types of its values (the tag's first), and what makes the op of
# the values after the tag.
_OPS: dict[str, tuple[tuple[type, ...], Callable[..., Op]]] = {
    "pub": ((str, int, str, int, bool, Message), PubOp),
    "take": ((str, int, bool, str), TakeOp),
    "settle": ((str, list), lambda seqs: SettleOp(check.numbers(seqs))),
    "requeue": ((str, list), lambda seqs: RequeueOp(check.numbers(seqs))),
    "purge": ((str,), PurgeOp),
    "sync": ((str, list, list), _sync_op),
}

# An op goes as its tag then its values in order: every op is a named tuple whose
# values JSON (and the blob, for messages) takes as they are.
_TAGS: dict[type, str] = {PubOp: "pub", TakeOp: "take", SettleOp: "settle",
                          RequeueOp: "requeue", PurgeOp: "purge", SyncOp: "sync"}

_PUB = (int, int, list)  # seq, view, op


def _pubs_json(pubs: Iterable[Pub]) -> list[list[Any]]:
    tags = _TAGS
    return [[seq, view, [tags[type(op)], *op]  # type: ignore[misc]  # a tuple, by its tag
             if type(op) in tags else blob.cannot_carry(op)] for seq, view, op in pubs]


def _pubs(pubs: object) -> list[Pub]:
    decoded = []
    for pub in check.items(pubs):
        seq, view, op = check.record(pub, _PUB)
        kind = op[0] if op else None
        found = _OPS.get(kind) if type(kind) is str else None
        if found is None:
            raise MalformedEnvelope(f"{kind!r} is no replicated op")
        types, make = found
        decoded.append(Pub(seq, view, make(*check.record(op, types)[1:])))
    return decoded


_ENTRY = (str, list, int)  # sender, pubs, ack


def _gm_json(message: GMMessage) -> dict[str, Any]:
    if isinstance(message, Activity):
        return {"a": message.view_version,
                "e": [[e.sender, _pubs_json(e.pubs), e.ack] for e in message.entries]}
    return {"c": message.view_version,
            "s": {sender: [_pubs_json(s.pending), s.last_pub, s.last_ack]
                  for sender, s in message.senders.items()}}


def _gm(doc: Any) -> GMMessage:
    if not isinstance(doc, dict):
        raise MalformedEnvelope(f"GM skeleton is {type(doc).__name__}, not an object")
    if "a" in doc:
        return Activity(check.number(doc["a"]), [
            GMEntry(sender, _pubs(pubs), ack)
            for sender, pubs, ack in map(check.record, check.items(doc["e"]), repeat(_ENTRY))])
    if "c" in doc:
        return CatchUp(check.number(doc["c"]), {
            check.member(sender): SenderSnapshot(tuple(_pubs(pending)),
                                                 check.number(last_pub), check.number(last_ack))
            for sender, (pending, last_pub, last_ack) in doc["s"].items()})
    raise MalformedEnvelope(f"GM message is neither activity nor catch-up: keys {sorted(doc)}")


# -- envelopes ------------------------------------------------------------------------

Field = tuple[str, str, Callable[[Any], Any]]  # attribute, header key, its reader
Payload = tuple[str, Callable[[Any], bytes], Callable[[bytes], Any]]  # attribute, codec
_QUEUE: Field = ("queue", "q", check.queue)
_KEY: Field = ("key", "k", check.string)
_GROUP = (_QUEUE, ("uid", "u", check.string), ("to", "to", check.member),
          ("sender", "fr", check.member))

# The kinds whose fields are all in the header but one value, if any, in the payload.
_PLAIN: dict[type, tuple[str, tuple[Field, ...], Payload | None]] = {
    Bye: ("bye", (), None),
    Forget: ("forget", (("node", "node", check.string),), None),
    GroupMessage: ("gm", _GROUP, ("message", lambda message: blob.pack(_gm_json(message)),
                                  lambda data: _gm(blob.unpack(data)))),
    CatchUpAsk: ("gm.ask", _GROUP, None),
    Consume: ("q.consume", (_QUEUE, _KEY, ("owner", "o", check.string),
                            ("no_ack", "na", check.flag), ("exclusive", "x", check.flag)), None),
    Cancel: ("q.cancel", (_QUEUE, _KEY), None),
    Credit: ("q.credit", (_QUEUE, _KEY, ("more", "n", check.number)), None),
    Settle: ("q.settle", (_QUEUE, ("seqs", "seqs", check.numbers), ("owner", "o", check.owner),
                          ("requeue", "r", check.flag)), None),
    Deliver: ("q.deliver", (_QUEUE, _KEY, ("seq", "seq", check.number),
                            ("redelivered", "r", check.flag)),
              ("message", Message.encode, Message.decode)),
    ConsumerGone: ("q.cancelled", (_KEY,), None),
}


def _plain_encoder(kind: str, header: tuple[Field, ...],
                   payload: Payload | None) -> Callable[[Any], Envelope]:
    names = [name for name, _, _ in header]
    keys = [key for _, key, _ in header]

    def encode(message: Any) -> Envelope:
        fields = dict(zip(keys, map(getattr, repeat(message, len(names)), names), strict=True))
        data = b"" if payload is None else payload[1](getattr(message, payload[0]))
        return Envelope(kind, fields, data)

    return encode


# The type of value each reader of a header field takes. Decoding checks every field of
# an envelope against these in one pass; a list still goes through its reader, which
# checks what it holds. Anything else (a null owner, a value of the wrong type) goes
# through every field's reader, which takes it or names what is wrong.
_TAKES: dict[Callable[[Any], Any], type] = {
    check.string: str, check.member: str, check.owner: str, check.number: int,
    check.flag: bool, check.queue: list, check.numbers: list}


def _plain_decoder(cls: type, header: tuple[Field, ...],
                   payload: Payload | None) -> Callable[[Fields, bytes], PeerMessage]:
    names = [name for name, _, _ in header] + ([payload[0]] if payload is not None else [])
    if names != [f.name for f in dataclasses.fields(cls)]:
        raise TypeError(f"{cls.__name__}: the codec's fields {names} are not its own")
    keys = [key for _, key, _ in header]
    readers = [read for _, _, read in header]
    types = tuple(_TAKES[read] for read in readers)
    lists = [(i, read) for i, read in enumerate(readers) if _TAKES[read] is list]

    def decode(fields: Fields, data: bytes) -> PeerMessage:
        try:
            values = [fields[key] for key in keys]
        except KeyError as missing:
            raise MalformedEnvelope(f"no {missing.args[0]!r} field") from None
        if tuple(map(type, values)) == types:
            for i, read in lists:
                values[i] = read(values[i])
        else:
            values = [read(value) for read, value in zip(readers, values, strict=True)]
        if payload is not None:
            values.append(payload[2](data))
        return cast(PeerMessage, cls(*values))

    return decode


def _update(data: object) -> Update:
    data = check.expect(data, dict, "a metadata write")
    value = check.field(data, "value")
    clock, node = check.items(check.field(data, "version"))
    return Update(tuple(check.string(part) for part in check.items(check.field(data, "key"))),
                  None if value is None else check.expect(value, dict, "a record"),
                  Version(check.number(clock), check.string(node)))


def _encode_meta(meta: Meta) -> Envelope:
    payload = tablejson.dumps([u.to_json() for u in meta.updates]).encode()
    return Envelope("meta", {"r": 1} if meta.relay else {}, payload)


def _decode_meta(fields: Fields, payload: bytes) -> Meta:
    updates = tuple(_update(data) for data in check.items(tablejson.loads(payload)))
    return Meta(updates, relay=bool(check.expect(fields.get("r", 0), int, "1 or 0")))


def _encode_confirms(confirms: Confirms) -> Envelope:
    senders: dict[str, dict[str, tuple[int, ...]]] = {}
    for run in confirms.runs:
        senders.setdefault(run.sender, {})[run.uid] = run.pubids
    return Envelope("q.confirm", {"n": confirms.node}, compactjson.dumps(senders).encode())


def _decode_confirms(fields: Fields, payload: bytes) -> Confirms:
    senders = check.expect(compactjson.loads(payload.decode()), dict, "confirms by sender")
    return Confirms(check.string(check.field(fields, "n")), tuple(
        ConfirmRun(sender, uid, check.numbers(pubids))
        for sender, uids in senders.items()
        for uid, pubids in check.expect(uids, dict, "confirms by queue").items()))


_RUN = (str, str, str, list)  # vhost, queue, uid, publishes
_PUBLISH = (str, int, bool, Message)  # a `Publish`, field by field


def _decode_publishes(fields: Fields, payload: bytes) -> Publishes:
    return Publishes(tuple(
        PublishRun(QueueRef(vhost, name), uid, tuple(
            Publish._make(check.record(publish, _PUBLISH)) for publish in publishes))
        for vhost, name, uid, publishes in (check.record(run, _RUN)
                                            for run in check.items(blob.unpack(payload)))))


def _decode_sync_request(fields: Fields, payload: bytes) -> SyncRequest:
    op = check.field(fields, "op")
    if op not in ("sync", "cancel"):
        raise MalformedEnvelope(f"{op!r} where sync or cancel belongs")
    return SyncRequest(check.queue(check.field(fields, "q")), op == "cancel")


def _ask_fields(ask: Ask) -> Fields:
    if isinstance(ask, AskGet):
        return {"op": "get", "no_ack": ask.no_ack, "owner": ask.owner}
    if isinstance(ask, AskDelete):
        return {"op": "delete", "if_unused": ask.if_unused, "if_empty": ask.if_empty}
    if isinstance(ask, AskConsume):
        return {"op": "consume", "exclusive": ask.exclusive}
    return {"op": "purge" if isinstance(ask, AskPurge) else "status"}


_ASKS: dict[str, Callable[[Fields], Ask]] = {
    "get": lambda f: AskGet(check.flag(check.field(f, "no_ack")),
                            check.string(check.field(f, "owner"))),
    "purge": lambda f: AskPurge(),
    "delete": lambda f: AskDelete(check.flag(check.field(f, "if_unused")),
                                  check.flag(check.field(f, "if_empty"))),
    "consume": lambda f: AskConsume(check.flag(check.field(f, "exclusive"))),
    "status": lambda f: AskCounts(),
}


def _decode_call(fields: Fields, payload: bytes) -> Call:
    read = _ASKS.get(check.field(fields, "op"))
    if read is None:
        raise MalformedEnvelope(f"{fields['op']!r} is no call")
    return Call(check.queue(check.field(fields, "q")), check.number(check.field(fields, "id")),
                read(fields))


def _encode_answer(answer: Answer) -> Envelope:
    result, payload = answer.result, b""
    fields: Fields = {"id": answer.call_id}
    if isinstance(result, GetAnswer):
        fields.update(r="get", left=result.remaining)
        if result.entry is not None:
            fields.update(seq=result.entry.seq, rd=result.redelivered)
            payload = result.entry.message.encode()
    elif isinstance(result, Counts):
        fields.update(r="counts", count=result.messages, consumers=result.consumers)
    elif isinstance(result, Count):
        fields.update(r="count", count=result.messages)
    else:
        fields.update(r="refused", error=result.reason, text=result.text)
    return Envelope("q.reply", fields, payload)


def _decode_result(fields: Fields, payload: bytes) -> CallResult:
    kind = check.field(fields, "r")
    if kind == "get":
        entry = (Entry(check.number(fields["seq"]), Message.decode(payload)) if "seq" in fields
                 else None)
        return GetAnswer(entry, check.flag(fields.get("rd", False)),
                         check.number(check.field(fields, "left")))
    if kind == "counts":
        return Counts(check.number(check.field(fields, "count")),
                      check.number(check.field(fields, "consumers")))
    if kind == "count":
        return Count(check.number(check.field(fields, "count")))
    if kind != "refused":
        raise MalformedEnvelope(f"{kind!r} is no answer")
    reason = check.field(fields, "error")
    if reason not in ("not_found", "precondition", "exclusive"):
        raise MalformedEnvelope(f"{reason!r} is no refusal")
    return Refused(reason, check.string(fields.get("text", "")))


_ENCODERS: dict[type, Callable[[Any], Envelope]] = {
    **{cls: _plain_encoder(*spec) for cls, spec in _PLAIN.items()},
    Meta: _encode_meta,
    Publishes: lambda publishes: Envelope("q.pub", {}, blob.pack(
        [[*run.queue, run.uid, run.publishes] for run in publishes.runs])),
    Confirms: _encode_confirms,
    SyncRequest: lambda sync: Envelope("q.sync", {
        "q": sync.queue, "op": "cancel" if sync.cancel else "sync"}),
    Call: lambda call: Envelope("q.call", {
        "q": call.queue, "id": call.call_id, **_ask_fields(call.ask)}),
    Answer: _encode_answer,
}

_DECODERS: dict[str, Callable[[Fields, bytes], PeerMessage]] = {
    **{kind: _plain_decoder(cls, header, payload)
       for cls, (kind, header, payload) in _PLAIN.items()},
    "meta": _decode_meta,
    "q.pub": _decode_publishes,
    "q.confirm": _decode_confirms,
    "q.sync": _decode_sync_request,
    "q.call": _decode_call,
    "q.reply": lambda fields, payload: Answer(check.number(check.field(fields, "id")),
                                              _decode_result(fields, payload)),
}


def encode(message: PeerMessage) -> Envelope:
    return _ENCODERS[type(message)](message)


def decode(envelope: Envelope) -> PeerMessage:
    """The message ``envelope`` carries; `MalformedEnvelope` if it carries none."""
    read = _DECODERS.get(envelope.type)
    if read is None:
        raise MalformedEnvelope(f"unknown envelope kind {envelope.type!r}")
    try:
        return read(envelope.fields, envelope.payload)
    except MalformedEnvelope as error:
        raise MalformedEnvelope(f"{envelope.type}: {error}") from None
    except _MALFORMED as error:
        raise MalformedEnvelope(f"{envelope.type}: {error!r}") from error
