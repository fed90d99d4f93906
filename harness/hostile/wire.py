"""AMQP 0-9-1 bytes built by hand, so that any length, type or octet can lie."""

from __future__ import annotations

import struct
from functools import lru_cache

from pamqp import commands, encode, frame
from pamqp.base import Frame as Method
from pamqp.common import FieldTable

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_END = 0xCE
METHOD, HEADER, BODY, HEARTBEAT = 1, 2, 3, 8
BASIC_CLASS = 60
# A client properties table that asks for connection.close on a refused login (403
# instead of a hung-up socket).
CAPABILITIES: FieldTable = {"authentication_failure_close": True, "connection.blocked": True,
                "consumer_cancel_notify": True}


def raw_frame(kind: int, channel: int, payload: bytes, end: int = FRAME_END) -> bytes:
    return struct.pack(">BHI", kind, channel, len(payload)) + payload + bytes((end,))


def method(channel: int, value: Method) -> bytes:
    return frame.marshal(value, channel)


def method_raw(channel: int, class_id: int, method_id: int, arguments: bytes) -> bytes:
    return raw_frame(METHOD, channel, struct.pack(">HH", class_id, method_id) + arguments)


def short(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return bytes((len(raw),)) + raw


def long(raw: bytes) -> bytes:
    return struct.pack(">I", len(raw)) + raw


def entry(key: str | bytes, kind: bytes, value: bytes) -> bytes:
    """One field-table entry: key, type octet, encoded value."""
    return short(key) + kind + value


def table(entries: list[bytes]) -> bytes:
    return long(b"".join(entries))


# What opens a container inside its parent, by (parent, container) kind: in a table an
# entry's key ("k") and type octet, in an array the type octet.
_OPENING = {b"FF": b"\x01kF", b"FA": b"\x01kA", b"AF": b"F", b"AA": b"A"}


def content_sizes(kinds: bytes, leaf: bytes) -> list[int]:
    """The content size of each level of `nested` (0: the outer table)."""
    levels = b"F" + kinds
    sizes = [0] * len(levels)
    size = len(leaf)
    for level in range(len(levels) - 1, 0, -1):
        sizes[level] = size
        size += len(_OPENING[levels[level - 1 : level + 1]]) + 4
    sizes[0] = size
    return sizes


_U32 = struct.Struct(">I")


def nested(kinds: bytes, leaf: bytes, lie: tuple[int, int] | None = None) -> bytes:
    """A field table holding containers nested ``len(kinds)`` deep: ``kinds[0]`` (b"F"
    table or b"A" array) is the outermost one inside it, ``leaf`` (encoded entries of a
    table, or values of an array) the innermost content. ``lie=(level, delta)`` adds
    ``delta`` to the length prefix at ``level`` (0: the outer table). Built in one
    pass: copied level by level, a deep one would cost time quadratic in its depth."""
    levels = b"F" + kinds
    sizes = content_sizes(kinds, leaf)
    if lie is not None:
        sizes[lie[0]] = min(sizes[lie[0]] + lie[1], 0xFFFFFFFF)
    pieces = [_U32.pack(sizes[0])]
    for level in range(1, len(levels)):
        pieces.append(_OPENING[levels[level - 1 : level + 1]])
        pieces.append(_U32.pack(sizes[level]))
    pieces.append(leaf)
    return b"".join(pieces)


def frame_sizes(data: bytes) -> list[int]:
    """The payload size of each frame in ``data`` (well-formed frames only)."""
    sizes = []
    offset = 0
    while offset + 7 <= len(data):
        size = struct.unpack_from(">I", data, offset + 3)[0]
        sizes.append(size)
        offset += 8 + size
    return sizes


def start_ok_raw(properties: bytes, mechanism: str | bytes = "PLAIN",
                 response: bytes = b"\x00guest\x00guest", locale: str = "en_US") -> bytes:
    """connection.start-ok with its client properties and response as given bytes."""
    return method_raw(0, 10, 11, properties + short(mechanism) + long(response) + short(locale))


@lru_cache(maxsize=64)
def start_ok(capabilities: bool = True, mechanism: str = "PLAIN",
             response: bytes = b"\x00guest\x00guest") -> bytes:
    properties: FieldTable = {"product": "mirrorchaos-hostile"}
    if capabilities:
        properties["capabilities"] = CAPABILITIES
    return start_ok_raw(encode.field_table(properties), mechanism, response)


@lru_cache(maxsize=64)
def tune_ok(frame_max: int, channel_max: int = 0, heartbeat: int = 0) -> bytes:
    return method(0, commands.Connection.TuneOk(channel_max=channel_max, frame_max=frame_max,
                                                heartbeat=heartbeat))


def connection_open(vhost: str = "/") -> bytes:
    return method(0, commands.Connection.Open(virtual_host=vhost))


def channel_open(channel: int) -> bytes:
    return method(channel, commands.Channel.Open())


def content_header(channel: int, body_size: int, properties: bytes = b"\x00\x00",
                   class_id: int = BASIC_CLASS) -> bytes:
    """A content header frame; ``properties`` is the flags word and the property values."""
    return raw_frame(HEADER, channel, struct.pack(">HHQ", class_id, 0, body_size) + properties)


def publish(channel: int, routing_key: str = "hostile-nowhere", exchange: str = "") -> bytes:
    return method(channel, commands.Basic.Publish(exchange=exchange, routing_key=routing_key))


def body(channel: int, data: bytes) -> bytes:
    return raw_frame(BODY, channel, data)


CONNECTION_CLOSE_OK = method(0, commands.Connection.CloseOk())
