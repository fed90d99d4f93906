"""GM messages and replicated queue operations as bytes for peer links.

A GM message is a JSON skeleton followed by the raw bytes of the messages it carries:

    u32 skeleton length | skeleton (JSON) | message bytes, one after the other

Queue operations (lists) hold `Message` objects; in the skeleton each is a reference
``{"$m": [offset, length]}`` into the bytes that follow, so message bodies are neither
base64-encoded nor escaped into JSON, and the JSON is only the small part. A GM message
is carried as an envelope's payload, so its size is not bounded by the envelope
header's. Malformed input raises `CodecError` saying what was wrong.
"""

from __future__ import annotations

import json
import struct
import threading
from typing import Any

from cluster.core.message import Message
from cluster.gm import Activity, CatchUp, Entry, GMMessage, Pub, SenderSnapshot
from cluster.peer.codec import CodecError

_SKELETON = struct.Struct(">I")
_REF = "$m"


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
        raise CodecError(f"gm message reference {ref!r} outside its "
                         f"{len(data) - blob_at} bytes of messages")
    start += blob_at
    return Message.decode(data[start:start + size])


_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_reference)
_DECODER = json.JSONDecoder(object_hook=_dereference)


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


def decode_gm(data: bytes) -> GMMessage:
    """The GM message in ``data``; `CodecError` if it is not one."""
    if len(data) < _SKELETON.size:
        raise CodecError(f"gm message of {len(data)} bytes is shorter than its header")
    (length,) = _SKELETON.unpack_from(data)
    blob_at = _SKELETON.size + length
    if blob_at > len(data):
        raise CodecError(f"gm skeleton of {length} bytes overruns a {len(data)}-byte message")
    _messages.data, _messages.blob_at = data, blob_at
    try:
        doc = _DECODER.decode(data[_SKELETON.size:blob_at].decode())
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
    except (ValueError, TypeError, KeyError, IndexError, AttributeError,
            struct.error) as error:
        raise CodecError(f"bad gm message: {error!r}") from error
    finally:
        _messages.data = b""
    raise CodecError(f"gm message is neither activity nor catch-up: keys {sorted(doc)}")


def _decode_pubs(pubs: list[Any]) -> list[Pub]:
    return [Pub(_int(seq), _int(view), payload) for seq, view, payload in pubs]


def _int(value: object) -> int:
    if type(value) is not int:
        raise CodecError(f"gm message has {value!r} where a number belongs")
    return value


def _member(value: object) -> str:
    if type(value) is not str:
        raise CodecError(f"gm message has {value!r} where a member belongs")
    return value
