"""Blobs: a JSON skeleton with the bytes of the messages it holds after it, so that
bodies are neither base64-encoded nor escaped into JSON (the payload of ``q.pub`` and
``gm`` envelopes, `cluster.ha.wire`).

    u32 skeleton length | skeleton (JSON) | message bytes, one after the other

Each message in the skeleton is a reference ``{"$m": [offset, length]}`` into the bytes
after it, and each message's bytes are its `Message.encode`.
"""

from __future__ import annotations

import struct
import threading
from typing import Any, NoReturn

from cluster.core.message import Message
from cluster.ha.checks import MalformedEnvelope
from cluster.peer.compactjson import make_decoder, make_encoder

_SKELETON = struct.Struct(">I")
_REF = "$m"


class _Messages(threading.local):
    """The messages of the blob being packed (``parts``, ``size`` bytes so far) or
    unpacked (``data``, its messages from ``blob_at``): the module's one JSON encoder
    and decoder turn them into references and back, which saves building an encoder or
    decoder per blob."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.data = b""
        self.blob_at = 0


_messages = _Messages()


def cannot_carry(value: object) -> NoReturn:
    raise TypeError(f"a peer payload cannot carry {type(value).__name__}")


def _reference(message: object) -> dict[str, list[int]]:
    """What the skeleton's JSON makes of a message: the only value in a skeleton that
    the encoder does not know by itself (the rest is built as lists beforehand)."""
    if type(message) is not Message:
        cannot_carry(message)
    data = message.encode()
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
        raise MalformedEnvelope(f"message reference {ref!r} outside its "
                                f"{len(data) - blob_at} bytes of messages")
    start += blob_at
    return Message.decode(data[start:start + size])


_ENCODER = make_encoder(_reference)
_DECODER = make_decoder(_dereference)


def pack(doc: object) -> bytes:
    """``doc`` (JSON values and messages) as a skeleton with its messages after it."""
    _messages.parts, _messages.size = [], 0
    try:
        text = _ENCODER(doc).encode()
        return b"".join((_SKELETON.pack(len(text)), text, *_messages.parts))
    finally:
        _messages.parts = []


def unpack(data: bytes) -> Any:
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
        return _DECODER(data[_SKELETON.size:blob_at].decode())
    finally:
        _messages.data = b""
