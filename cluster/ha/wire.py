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

(2) A blob: ``u32 skeleton length | skeleton (JSON) | message bytes, one after the
    other``. Each message in the skeleton is a reference ``{"$m": [offset, length]}``
    into the bytes after it, so bodies are neither base64-encoded nor escaped into JSON.
    The skeleton of ``q.pub`` is ``[[vhost, queue, uid, [[sender, pubid, want,
    message], ...]], ...]``. That of a GM message is ``{"a": view, "e": [[sender,
    [pub, ...], ack], ...]}`` (activity) or ``{"c": view, "s": {sender: [[pub, ...],
    last pub, last ack]}}`` (catch-up), where a pub is ``[seq, view, op]`` and an op:

        ["pub", seq, sender, pubid, want, message]     PubOp
        ["take", seq, no_ack, owner]                   TakeOp
        ["settle", [seq, ...]]                         SettleOp
        ["requeue", [seq, ...]]                        RequeueOp
        ["purge"]                                      PurgeOp
        ["sync", [target, ...], [[seq, delivered, owner | null, message], ...]]  SyncOp

(3) JSON ``{sender: {uid: [pubid, ...]}}``.

(4) ``op`` is ``"get"`` (with ``no_ack``, ``owner``), ``"purge"``, ``"delete"`` (with
    ``if_unused``, ``if_empty``) or ``"status"``.

(5) ``r`` is ``"get"`` (``left``: messages left; ``seq`` and ``rd``, redelivered, when
    a message was taken, which is the payload), ``"count"`` (``count``), ``"counts"``
    (``count``, ``consumers``) or ``"refused"`` (``error``: ``not_found`` or
    ``precondition``; ``text``).

`decode` checks every field's type: an envelope that is not one of these raises
`MalformedEnvelope`, naming its kind and what was wrong, before anything acts on it.
"""

from __future__ import annotations

import json
import struct
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from cluster.amqp import tablejson
from cluster.core.message import Message
from cluster.core.queue import Counts, Entry, GetAnswer
from cluster.gm import Activity, CatchUp, GMMessage, Pub, SenderSnapshot
from cluster.gm import Entry as GMEntry
from cluster.ha.messages import (
    Answer,
    Ask,
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
from cluster.peer.codec import CodecError, Envelope

T = TypeVar("T")
Fields = dict[str, Any]


class MalformedEnvelope(CodecError):
    """A peer's envelope that is framed right but is none of the protocol's: an unknown
    kind, a field missing or of the wrong type, a payload that does not parse. Nothing
    of it has been acted on; the node drops it."""


# -- blobs: a JSON skeleton with the messages' bytes after it ---------------------------

_SKELETON = struct.Struct(">I")
_REF = "$m"


class _Messages(threading.local):
    """The messages of the blob being encoded (``parts``, ``size`` bytes so far) or
    decoded (``data``, its messages from ``blob_at``): the module's one JSON encoder
    and decoder turn them into references and back, which saves building an encoder or
    decoder per blob."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.data = b""
        self.blob_at = 0


_messages = _Messages()


def _reference(message: Message) -> dict[str, list[int]]:
    data = message.encode()
    ref = {_REF: [_messages.size, len(data)]}
    _messages.parts.append(data)
    _messages.size += len(data)
    return ref


# What the skeleton's JSON makes of each value the encoder does not know by itself.
_JSON_OF: dict[type, Callable[[Any], object]] = {
    Message: _reference,
    PubOp: lambda op: ["pub", op.seq, op.sender, op.pubid, op.want, op.message],
    TakeOp: lambda op: ["take", op.seq, op.no_ack, op.owner],
    SettleOp: lambda op: ["settle", op.seqs],
    RequeueOp: lambda op: ["requeue", op.seqs],
    PurgeOp: lambda op: ["purge"],
    SyncOp: lambda op: ["sync", op.targets, op.messages],
    SyncedMessage: lambda m: [m.seq, m.delivered, m.owner, m.message],
    Activity: lambda a: {"a": a.view_version, "e": a.entries},
    CatchUp: lambda c: {"c": c.view_version, "s": c.senders},
    GMEntry: lambda e: [e.sender, e.pubs, e.ack],
    SenderSnapshot: lambda s: [s.pending, s.last_pub, s.last_ack],
    PublishRun: lambda run: [run.queue.vhost, run.queue.name, run.uid, run.publishes],
    Publish: lambda p: [p.sender, p.pubid, p.want, p.message],
}


def _to_json(value: object) -> object:
    to_json = _JSON_OF.get(type(value))
    if to_json is None:
        raise TypeError(f"a peer payload cannot carry {type(value).__name__}")
    return to_json(value)


def _dereference(obj: dict[str, Any]) -> Any:
    ref = obj.get(_REF)
    if ref is None:
        return obj
    data, blob_at = _messages.data, _messages.blob_at
    start, size = ref
    if type(start) is not int or type(size) is not int or start < 0 or size < 0 \
            or blob_at + start + size > len(data):
        raise MalformedEnvelope(f"message reference {ref!r} outside its "
                                f"{len(data) - blob_at} bytes of messages")
    start += blob_at
    return Message.decode(data[start:start + size])


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_to_json)
_DECODER = json.JSONDecoder(object_hook=_dereference)
_COMPACT = json.JSONEncoder(separators=(",", ":"))
# What a skeleton or header of the wrong shape raises as it is taken apart.
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError, struct.error)


def _blob(doc: object) -> bytes:
    """``doc`` as a skeleton with the messages it holds after it."""
    _messages.parts, _messages.size = [], 0
    try:
        text = _ENCODER.encode(doc).encode()
        return b"".join((_SKELETON.pack(len(text)), text, *_messages.parts))
    finally:
        _messages.parts = []


def _unblob(data: bytes) -> Any:
    """The skeleton in ``data`` with its messages in place of their references."""
    if len(data) < _SKELETON.size:
        raise MalformedEnvelope(f"payload of {len(data)} bytes is shorter than its header")
    (length,) = _SKELETON.unpack_from(data)
    blob_at = _SKELETON.size + length
    if blob_at > len(data):
        raise MalformedEnvelope(f"skeleton of {length} bytes overruns a {len(data)}-byte "
                                f"payload")
    _messages.data, _messages.blob_at = data, blob_at
    try:
        return _DECODER.decode(data[_SKELETON.size:blob_at].decode())
    finally:
        _messages.data = b""


# -- checking what was decoded ---------------------------------------------------------


def _expect(value: object, kind: type[T], what: str) -> T:
    """``value`` if it is exactly a ``kind`` (True is no number here)."""
    if type(value) is not kind:
        raise MalformedEnvelope(f"{value!r} where {what} belongs")
    return cast(T, value)


def _int(value: object) -> int:
    return _expect(value, int, "a number")


def _str(value: object) -> str:
    return _expect(value, str, "a string")


def _bool(value: object) -> bool:
    return _expect(value, bool, "true or false")


def _member(value: object) -> str:
    return _expect(value, str, "a member")


def _message(value: object) -> Message:
    return _expect(value, Message, "a message")


def _owner(value: object) -> str | None:
    return None if value is None else _expect(value, str, "a channel or null")


def _list(value: object) -> list[Any]:
    return _expect(value, list, "a list")


def _ints(value: object) -> tuple[int, ...]:
    return tuple(_int(i) for i in _list(value))


def _queue(value: object) -> QueueRef:
    vhost, name = _list(value)
    return QueueRef(_str(vhost), _str(name))


def _get(fields: Fields, key: str) -> Any:
    if key not in fields:
        raise MalformedEnvelope(f"no {key!r} field")
    return fields[key]


# -- replicated ops and GM messages ------------------------------------------------------


def _sync_op(targets: object, messages: object) -> SyncOp:
    return SyncOp(tuple(_member(t) for t in _list(targets)), tuple(
        SyncedMessage(_int(seq), _bool(delivered), _owner(owner), _message(message))
        for seq, delivered, owner, message in _list(messages)))


# Per op's tag: how many values follow it, and what makes the op of them.
_OPS: dict[str, tuple[int, Callable[..., Op]]] = {
    "pub": (5, lambda seq, sender, pubid, want, message: PubOp(
        _int(seq), _str(sender), _int(pubid), _bool(want), _message(message))),
    "take": (3, lambda seq, no_ack, owner: TakeOp(_int(seq), _bool(no_ack), _str(owner))),
    "settle": (1, lambda seqs: SettleOp(_ints(seqs))),
    "requeue": (1, lambda seqs: RequeueOp(_ints(seqs))),
    "purge": (0, lambda: PurgeOp()),
    "sync": (2, _sync_op),
}


def _op(value: object) -> Op:
    kind, *args = _list(value)
    found = _OPS.get(kind) if type(kind) is str else None
    if found is None:
        raise MalformedEnvelope(f"{kind!r} is no replicated op")
    arity, make = found
    if len(args) != arity:
        raise MalformedEnvelope(f"{kind} op with {len(args)} values, not {arity}")
    return make(*args)


def _pubs(pubs: object) -> list[Pub]:
    return [Pub(_int(seq), _int(view), _op(op)) for seq, view, op in _list(pubs)]


def _gm(doc: Any) -> GMMessage:
    if not isinstance(doc, dict):
        raise MalformedEnvelope(f"GM skeleton is {type(doc).__name__}, not an object")
    if "a" in doc:
        return Activity(_int(doc["a"]), [GMEntry(_member(sender), _pubs(pubs), _int(ack))
                                         for sender, pubs, ack in _list(doc["e"])])
    if "c" in doc:
        return CatchUp(_int(doc["c"]), {
            _member(sender): SenderSnapshot(tuple(_pubs(pending)), _int(last_pub),
                                            _int(last_ack))
            for sender, (pending, last_pub, last_ack) in doc["s"].items()})
    raise MalformedEnvelope(f"GM message is neither activity nor catch-up: keys {sorted(doc)}")


# -- envelopes ------------------------------------------------------------------------

Field = tuple[str, str, Callable[[Any], Any]]  # attribute, header key, its reader
Payload = tuple[str, Callable[[Any], bytes], Callable[[bytes], Any]]  # attribute, codec
_QUEUE: Field = ("queue", "q", _queue)
_KEY: Field = ("key", "k", _str)
_GROUP = (_QUEUE, ("uid", "u", _str), ("to", "to", _member), ("sender", "fr", _member))

# The kinds whose fields are all in the header but one value, if any, in the payload.
_PLAIN: dict[type, tuple[str, tuple[Field, ...], Payload | None]] = {
    Bye: ("bye", (), None),
    Forget: ("forget", (("node", "node", _str),), None),
    GroupMessage: ("gm", _GROUP, ("message", _blob, lambda data: _gm(_unblob(data)))),
    CatchUpAsk: ("gm.ask", _GROUP, None),
    Consume: ("q.consume", (_QUEUE, _KEY, ("owner", "o", _str), ("no_ack", "na", _bool),
                            ("exclusive", "x", _bool)), None),
    Cancel: ("q.cancel", (_QUEUE, _KEY), None),
    Credit: ("q.credit", (_QUEUE, _KEY, ("more", "n", _int)), None),
    Settle: ("q.settle", (_QUEUE, ("seqs", "seqs", _ints), ("owner", "o", _owner),
                          ("requeue", "r", _bool)), None),
    Deliver: ("q.deliver", (_QUEUE, _KEY, ("seq", "seq", _int), ("redelivered", "r", _bool)),
              ("message", Message.encode, Message.decode)),
    ConsumerGone: ("q.cancelled", (_KEY,), None),
}


def _plain_encoder(kind: str, header: tuple[Field, ...],
                   payload: Payload | None) -> Callable[[Any], Envelope]:
    def encode(message: Any) -> Envelope:
        fields = {key: getattr(message, name) for name, key, _ in header}
        data = b"" if payload is None else payload[1](getattr(message, payload[0]))
        return Envelope(kind, fields, data)

    return encode


def _plain_decoder(cls: type, header: tuple[Field, ...],
                   payload: Payload | None) -> Callable[[Fields, bytes], PeerMessage]:
    def decode(fields: Fields, data: bytes) -> PeerMessage:
        values = {name: read(_get(fields, key)) for name, key, read in header}
        if payload is not None:
            values[payload[0]] = payload[2](data)
        return cast(PeerMessage, cls(**values))

    return decode


def _update(data: object) -> Update:
    data = _expect(data, dict, "a metadata write")
    value = _get(data, "value")
    clock, node = _list(_get(data, "version"))
    return Update(tuple(_str(part) for part in _list(_get(data, "key"))),
                  None if value is None else _expect(value, dict, "a record"),
                  Version(_int(clock), _str(node)))


def _encode_meta(meta: Meta) -> Envelope:
    payload = tablejson.dumps([u.to_json() for u in meta.updates]).encode()
    return Envelope("meta", {"r": 1} if meta.relay else {}, payload)


def _decode_meta(fields: Fields, payload: bytes) -> Meta:
    updates = tuple(_update(data) for data in _list(tablejson.loads(payload)))
    return Meta(updates, relay=bool(_expect(fields.get("r", 0), int, "1 or 0")))


def _encode_confirms(confirms: Confirms) -> Envelope:
    senders: dict[str, dict[str, tuple[int, ...]]] = {}
    for run in confirms.runs:
        senders.setdefault(run.sender, {})[run.uid] = run.pubids
    return Envelope("q.confirm", {"n": confirms.node}, _COMPACT.encode(senders).encode())


def _decode_confirms(fields: Fields, payload: bytes) -> Confirms:
    senders = _expect(json.loads(payload), dict, "confirms by sender")
    return Confirms(_str(_get(fields, "n")), tuple(
        ConfirmRun(sender, uid, _ints(pubids))
        for sender, uids in senders.items()
        for uid, pubids in _expect(uids, dict, "confirms by queue").items()))


def _decode_publishes(fields: Fields, payload: bytes) -> Publishes:
    return Publishes(tuple(
        PublishRun(QueueRef(_str(vhost), _str(name)), _str(uid), tuple(
            Publish(_str(sender), _int(pubid), _bool(want), _message(message))
            for sender, pubid, want, message in _list(publishes)))
        for vhost, name, uid, publishes in _list(_unblob(payload))))


def _decode_sync_request(fields: Fields, payload: bytes) -> SyncRequest:
    op = _get(fields, "op")
    if op not in ("sync", "cancel"):
        raise MalformedEnvelope(f"{op!r} where sync or cancel belongs")
    return SyncRequest(_queue(_get(fields, "q")), op == "cancel")


def _ask_fields(ask: Ask) -> Fields:
    if isinstance(ask, AskGet):
        return {"op": "get", "no_ack": ask.no_ack, "owner": ask.owner}
    if isinstance(ask, AskDelete):
        return {"op": "delete", "if_unused": ask.if_unused, "if_empty": ask.if_empty}
    return {"op": "purge" if isinstance(ask, AskPurge) else "status"}


_ASKS: dict[str, Callable[[Fields], Ask]] = {
    "get": lambda f: AskGet(_bool(_get(f, "no_ack")), _str(_get(f, "owner"))),
    "purge": lambda f: AskPurge(),
    "delete": lambda f: AskDelete(_bool(_get(f, "if_unused")), _bool(_get(f, "if_empty"))),
    "status": lambda f: AskCounts(),
}


def _decode_call(fields: Fields, payload: bytes) -> Call:
    read = _ASKS.get(_get(fields, "op"))
    if read is None:
        raise MalformedEnvelope(f"{fields['op']!r} is no call")
    return Call(_queue(_get(fields, "q")), _int(_get(fields, "id")), read(fields))


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
    kind = _get(fields, "r")
    if kind == "get":
        entry = (Entry(_int(fields["seq"]), Message.decode(payload)) if "seq" in fields
                 else None)
        return GetAnswer(entry, _bool(fields.get("rd", False)), _int(_get(fields, "left")))
    if kind == "counts":
        return Counts(_int(_get(fields, "count")), _int(_get(fields, "consumers")))
    if kind == "count":
        return Count(_int(_get(fields, "count")))
    if kind != "refused":
        raise MalformedEnvelope(f"{kind!r} is no answer")
    reason = _get(fields, "error")
    if reason not in ("not_found", "precondition"):
        raise MalformedEnvelope(f"{reason!r} is no refusal")
    return Refused(reason, _str(fields.get("text", "")))


_ENCODERS: dict[type, Callable[[Any], Envelope]] = {
    **{cls: _plain_encoder(*spec) for cls, spec in _PLAIN.items()},
    Meta: _encode_meta,
    Publishes: lambda publishes: Envelope("q.pub", {}, _blob(publishes.runs)),
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
    "q.reply": lambda fields, payload: Answer(_int(_get(fields, "id")),
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
