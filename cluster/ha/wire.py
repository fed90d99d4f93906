"""GM messages, replicated queue operations and batches of publishes as bytes for peer
links.

A GM message (and a ``q.pub`` batch) is a JSON skeleton followed by the raw bytes of
the messages it carries:

    u32 skeleton length | skeleton (JSON) | message bytes, one after the other

Queue operations (lists) hold `Message` objects; in the skeleton each is a reference
``{"$m": [offset, length]}`` into the bytes that follow, so message bodies are neither
base64-encoded nor escaped into JSON, and the JSON is only the small part. Both are
carried as an envelope's payload, so their size is not bounded by the envelope
header's. Malformed input raises `CodecError` saying what was wrong.
"""

from __future__ import annotations

import json
import struct
import threading
from typing import Any, TypeVar, cast

from cluster.core.message import Message
from cluster.gm import Activity, CatchUp, Entry, GMMessage, Pub, SenderSnapshot
from cluster.peer.codec import CodecError

_SKELETON = struct.Struct(">I")
_REF = "$m"
T = TypeVar("T")


class _Messages(threading.local):
    """The messages of the GM message being encoded (``parts``, ``size`` bytes so far)
    or decoded (``data``, its messages from ``blob_at``): the module's one JSON encoder
    and decoder turn them into references and back, which saves building an encoder or
    decoder per message."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.data = b""
        self.blob_at = 0


_messages = _Messages()


def _reference(value: object) -> dict[str, list[int]]:
    if not isinstance(value, Message):
        raise TypeError(f"a GM payload cannot carry {type(value).__name__}")
    data = value.encode()
    ref = {_REF: [_messages.size, len(data)]}
    _messages.parts.append(data)
    _messages.size += len(data)
    return ref


def _dereference(obj: dict[str, Any]) -> Any:
    ref = obj.get(_REF)
    if ref is None:
        return obj
    data, blob_at = _messages.data, _messages.blob_at
    start, size = ref
    if type(start) is not int or type(size) is not int or start < 0 or size < 0 \
            or blob_at + start + size > len(data):
        raise CodecError(f"message reference {ref!r} outside its "
                         f"{len(data) - blob_at} bytes of messages")
    start += blob_at
    return Message.decode(data[start:start + size])


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_reference)
_DECODER = json.JSONDecoder(object_hook=_dereference)
# What a skeleton of the wrong shape raises as it is taken apart.
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError, struct.error)


def _pubs(pubs: Any) -> list[list[Any]]:
    return [[p.seq, p.view, p.payload] for p in pubs]


def encode_gm(message: GMMessage) -> bytes:
    if isinstance(message, Activity):
        doc: dict[str, Any] = {"a": message.view_version, "e": [
            [e.sender, _pubs(e.pubs), e.ack] for e in message.entries]}
    else:
        doc = {"c": message.view_version, "s": {
            sender: [_pubs(snap.pending), snap.last_pub, snap.last_ack]
            for sender, snap in message.senders.items()}}
    return _encode(doc)


def _encode(doc: object) -> bytes:
    """``doc`` as a skeleton with the messages it holds after it."""
    _messages.parts, _messages.size = [], 0
    try:
        text = _ENCODER.encode(doc).encode()
        return b"".join((_SKELETON.pack(len(text)), text, *_messages.parts))
    finally:
        _messages.parts = []


class OutgoingGM:
    """A GM message in an envelope not sent yet (a `Deferred` payload): it is encoded
    when the envelope is, and until then later activity for the same member may join
    it (``absorb``), so that one envelope carries what a batch of input produced."""

    __slots__ = ("message",)

    def __init__(self, message: GMMessage) -> None:
        self.message = message

    def encode(self) -> bytes:
        return encode_gm(self.message)

    def absorb(self, later: GMMessage) -> bool:
        """Merge ``later``, the next message for the same member, into this one; False
        (nothing done) when one of them is not activity or their views differ."""
        mine = self.message
        if not (isinstance(mine, Activity) and isinstance(later, Activity)
                and mine.view_version == later.view_version):
            return False
        for entry in later.entries:
            mine.add(entry.sender, entry.pubs, entry.ack)
        return True


def _decode(data: bytes, what: str) -> Any:
    """The skeleton in ``data`` with its messages in place of their references."""
    if len(data) < _SKELETON.size:
        raise CodecError(f"{what} of {len(data)} bytes is shorter than its header")
    (length,) = _SKELETON.unpack_from(data)
    blob_at = _SKELETON.size + length
    if blob_at > len(data):
        raise CodecError(f"{what} skeleton of {length} bytes overruns a {len(data)}-byte "
                         f"payload")
    _messages.data, _messages.blob_at = data, blob_at
    try:
        return _DECODER.decode(data[_SKELETON.size:blob_at].decode())
    finally:
        _messages.data = b""


def decode_gm(data: bytes) -> GMMessage:
    """The GM message in ``data``; `CodecError` if it is not one."""
    try:
        doc = _decode(data, "gm message")
        if not isinstance(doc, dict):
            raise CodecError(f"gm skeleton is {type(doc).__name__}, not an object")
        if "a" in doc:
            return Activity(_int(doc["a"]), [
                Entry(_member(sender), _decode_pubs(pubs), _int(ack))
                for sender, pubs, ack in doc["e"]])
        if "c" in doc:
            return CatchUp(_int(doc["c"]), {
                _member(sender): SenderSnapshot(tuple(_decode_pubs(pending)), _int(last_pub),
                                                _int(last_ack))
                for sender, (pending, last_pub, last_ack) in doc["s"].items()})
    except CodecError:
        raise
    except _MALFORMED as error:
        raise CodecError(f"bad gm message: {error!r}") from error
    raise CodecError(f"gm message is neither activity nor catch-up: keys {sorted(doc)}")


class PublishBatch:
    """Publishes of this node's channels for one node, in one ``q.pub`` envelope (a
    `Deferred` payload that grows until the envelope is sent). They keep the order they
    were published in, each with its queue declaration (uid): the skeleton is a list of
    runs ``[vhost, queue, uid, [[sender, publish id, confirm wanted, message], ...]]``,
    a new run wherever the declaration changes."""

    __slots__ = ("runs",)

    def __init__(self) -> None:
        self.runs: list[list[Any]] = []

    def add(self, vhost: str, name: str, uid: str, sender: str, pubid: int, want: bool,
            message: Message) -> None:
        runs = self.runs
        if not runs or runs[-1][2] != uid or runs[-1][1] != name or runs[-1][0] != vhost:
            runs.append([vhost, name, uid, []])
        runs[-1][3].append([sender, pubid, want, message])

    def encode(self) -> bytes:
        return _encode(self.runs)


Publish = tuple[str, int, bool, Message]  # sender, publish id, confirm wanted, message


def decode_publishes(data: bytes) -> list[tuple[str, str, str, list[Publish]]]:
    """The runs of a ``q.pub`` payload as (vhost, queue, uid, publishes); `CodecError`
    if it is not one."""
    try:
        runs = _decode(data, "q.pub payload")
        return [(_expect(vhost, str, "a vhost"), _expect(name, str, "a queue"),
                 _expect(uid, str, "a uid"), [
                     (_expect(sender, str, "a sender"), _int(pubid),
                      _expect(want, bool, "true or false"), _expect(message, Message, "a message"))
                     for sender, pubid, want, message in publishes])
                for vhost, name, uid, publishes in runs]
    except CodecError:
        raise
    except _MALFORMED as error:
        raise CodecError(f"bad q.pub payload: {error!r}") from error


def _decode_pubs(pubs: list[Any]) -> list[Pub]:
    return [Pub(_int(seq), _int(view), payload) for seq, view, payload in pubs]


def _int(value: object) -> int:
    return _expect(value, int, "a number")


def _member(value: object) -> str:
    return _expect(value, str, "a member")


def _expect(value: object, kind: type[T], what: str) -> T:
    """``value`` if it is exactly a ``kind`` (True is no number here)."""
    if type(value) is not kind:
        raise CodecError(f"{value!r} where {what} belongs")
    return cast(T, value)
