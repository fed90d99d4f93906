"""AMQP 0-9-1 framing: split a byte stream into frames and encode outgoing ones.

Incoming method arguments and field tables are read by `cluster.amqp.fields` (linear
in their size, nesting bounded); pamqp encodes what the broker sends. The frames that
carry every message (``basic.publish``, content header, ``basic.deliver``,
``basic.ack``) have hand-written fast paths because they dominate the broker's
per-message cost.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pamqp import commands, header
from pamqp.base import Frame as Method
from pamqp.common import FieldTable
from pamqp.frame import marshal as pamqp_marshal

from cluster.amqp import fields
from cluster.amqp.errors import (
    FRAME_ERROR,
    SYNTAX_ERROR,
    ConnectionError_,
)

FRAME_METHOD = 1
FRAME_HEADER = 2
FRAME_BODY = 3
FRAME_HEARTBEAT = 8
FRAME_END = 0xCE
FRAME_END_BYTE = b"\xce"
PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
# Frame header (type, channel, size) plus the frame-end octet.
FRAME_OVERHEAD = 8

_FRAME_HEAD = struct.Struct(">BHI")
_METHOD_ID = struct.Struct(">HH")
_CONTENT_HEAD = struct.Struct(">HHQH")
_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")

BASIC_PUBLISH = commands.Basic.Publish.index
BASIC_ACK = commands.Basic.Ack.index
BASIC_CLASS = 60

HEARTBEAT_FRAME = b"\x08\x00\x00\x00\x00\x00\x00\xce"


class FrameReader:
    """Buffers bytes and yields whole frames as ``(type, channel, payload)``.

    A frame that breaks the rules (over `frame_max`, a wrong end octet) is raised as a
    frame error only once it is the first frame left: the frames before it come out
    first and are acted on, as RabbitMQ reads frames one by one, and one of them
    (tune-ok) may change `frame_max` for the frames after it."""

    def __init__(self, frame_max: int) -> None:
        self.frame_max = frame_max
        self._buffer = bytearray()

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def frames(self) -> list[tuple[int, int, bytes]]:
        buffer = self._buffer
        out: list[tuple[int, int, bytes]] = []
        offset = 0
        end = len(buffer)
        while end - offset >= 7:
            frame_type, channel, size = _FRAME_HEAD.unpack_from(buffer, offset)
            stop = offset + 7 + size
            if size + FRAME_OVERHEAD > self.frame_max:
                if out:
                    break
                raise ConnectionError_(
                    FRAME_ERROR,
                    f"frame of {size + FRAME_OVERHEAD} bytes exceeds frame_max {self.frame_max}",
                )
            if stop >= end:
                break
            if buffer[stop] != FRAME_END:
                if out:
                    break
                raise ConnectionError_(
                    FRAME_ERROR, f"frame end octet is 0x{buffer[stop]:02x}, expected 0xce"
                )
            out.append((frame_type, channel, bytes(buffer[offset + 7 : stop])))
            offset = stop + 1
        if offset:
            del buffer[:offset]
        return out


@dataclass(slots=True)
class Publish:
    """``basic.publish`` decoded on the fast path."""

    exchange: str
    routing_key: str
    mandatory: bool
    immediate: bool


@dataclass(slots=True)
class Ack:
    """``basic.ack`` decoded on the fast path."""

    delivery_tag: int
    multiple: bool


def decode_field_table(data: bytes) -> tuple[int, FieldTable]:
    """The field table at the start of ``data`` (bytes consumed, table); a malformed one,
    or one nested deeper than `fields.MAX_DEPTH`, is a ValueError."""
    table, end = fields.read_table(data, 0, len(data))
    return end, table


def decode_method(payload: bytes) -> Method | Publish | Ack:
    """Decode a method frame's payload; a malformed one is a hard syntax error."""
    if len(payload) < 4:
        raise ConnectionError_(FRAME_ERROR, f"method frame of {len(payload)} bytes is too short")
    index = _U32.unpack_from(payload)[0]
    try:
        if index == BASIC_PUBLISH:
            exchange, offset = fields.short_string(payload, 6)
            routing_key, offset = fields.short_string(payload, offset)
            bits = payload[offset]
            return Publish(exchange, routing_key, bool(bits & 1), bool(bits & 2))
        if index == BASIC_ACK:
            return Ack(_U64.unpack_from(payload, 4)[0], bool(payload[12] & 1))
        method_class = commands.INDEX_MAPPING.get(index)
        if method_class is None:
            raise ConnectionError_(
                SYNTAX_ERROR, f"unknown method class {index >> 16} method {index & 0xFFFF}"
            )
        method = method_class()
        fields.read_arguments(method, payload, 4)
        return method
    except (IndexError, ValueError, struct.error) as error:
        # RabbitMQ calls arguments that do not decode a frame error.
        raise ConnectionError_(
            FRAME_ERROR,
            f"malformed method class {index >> 16} method {index & 0xFFFF}: "
            f"{error}",
            index >> 16,
            index & 0xFFFF,
        ) from error


# Property flag bits of basic properties, highest first, and how to skip each value.
_SHORTSTR, _TABLE, _OCTET, _U64_FIELD = 0, 1, 2, 3
_PROPERTY_LAYOUT = (
    (0x8000, _SHORTSTR),  # content_type
    (0x4000, _SHORTSTR),  # content_encoding
    (0x2000, _TABLE),  # headers
    (0x1000, _OCTET),  # delivery_mode
    (0x0800, _OCTET),  # priority
    (0x0400, _SHORTSTR),  # correlation_id
    (0x0200, _SHORTSTR),  # reply_to
    (0x0100, _SHORTSTR),  # expiration
    (0x0080, _SHORTSTR),  # message_id
    (0x0040, _U64_FIELD),  # timestamp
    (0x0020, _SHORTSTR),  # type
    (0x0010, _SHORTSTR),  # user_id
    (0x0008, _SHORTSTR),  # app_id
    (0x0004, _SHORTSTR),  # cluster_id
)


@dataclass(slots=True)
class ContentHead:
    """A content header: the body size, whether the message is persistent, and the raw
    payload, which is passed on to consumers unchanged."""

    class_id: int
    body_size: int
    persistent: bool
    raw: bytes


def decode_content_header(payload: bytes) -> ContentHead:
    """Check a content header's structure and read what the broker needs from it."""
    try:
        class_id, _weight, body_size, flags = _CONTENT_HEAD.unpack_from(payload)
        offset = 14
        persistent = False
        for bit, kind in _PROPERTY_LAYOUT:
            if not flags & bit:
                continue
            if kind == _SHORTSTR:
                offset += 1 + payload[offset]
            elif kind == _TABLE:
                _, offset = fields.read_table(payload, offset, len(payload))
            elif kind == _OCTET:
                if bit == 0x1000:
                    persistent = payload[offset] == 2
                offset += 1
            else:
                offset += 8
        if offset > len(payload):
            raise ValueError("properties run past the end of the frame")
    except (IndexError, ValueError, struct.error) as error:
        raise ConnectionError_(SYNTAX_ERROR, f"malformed content header: {error}") from error
    return ContentHead(class_id, body_size, persistent, payload)


def method_frame(channel: int, method: Method) -> bytes:
    return pamqp_marshal(method, channel)


def _frame(frame_type: int, channel: int, payload: bytes) -> bytes:
    return _FRAME_HEAD.pack(frame_type, channel, len(payload)) + payload + FRAME_END_BYTE


def content_frames(channel: int, header_raw: bytes, body: bytes, frame_max: int) -> list[bytes]:
    """The header frame and as many body frames as ``frame_max`` requires."""
    frames = [_frame(FRAME_HEADER, channel, header_raw)]
    chunk = frame_max - FRAME_OVERHEAD
    for start in range(0, len(body), chunk):
        frames.append(_frame(FRAME_BODY, channel, body[start : start + chunk]))
    return frames


def _encode_short(value: str) -> bytes:
    raw = value.encode("utf-8")
    return bytes((len(raw),)) + raw


_DELIVER_ID = _METHOD_ID.pack(BASIC_CLASS, 60)
_ACK_ID = _METHOD_ID.pack(BASIC_CLASS, 80)
_NACK_ID = _METHOD_ID.pack(BASIC_CLASS, 120)


def deliver_frame(
    channel: int,
    consumer_tag: str,
    delivery_tag: int,
    redelivered: bool,
    exchange: str,
    routing_key: str,
) -> bytes:
    payload = b"".join(
        (
            _DELIVER_ID,
            _encode_short(consumer_tag),
            _U64.pack(delivery_tag),
            b"\x01" if redelivered else b"\x00",
            _encode_short(exchange),
            _encode_short(routing_key),
        )
    )
    return _frame(FRAME_METHOD, channel, payload)


# Replies that echo a queue or exchange name, encoded here: pamqp's constructors refuse
# names outside a narrow pattern (and exchange names over 127 octets) that RabbitMQ,
# and so this broker, accept from clients.
_DECLARE_OK_ID = _METHOD_ID.pack(50, 11)
_RETURN_ID = _METHOD_ID.pack(BASIC_CLASS, 50)
_GET_OK_ID = _METHOD_ID.pack(BASIC_CLASS, 71)
_U16 = struct.Struct(">H")


def declare_ok_frame(channel: int, queue: str, message_count: int,
                     consumer_count: int) -> bytes:
    payload = (_DECLARE_OK_ID + _encode_short(queue) + _U32.pack(message_count)
               + _U32.pack(consumer_count))
    return _frame(FRAME_METHOD, channel, payload)


def return_frame(channel: int, reply_code: int, reply_text: str, exchange: str,
                 routing_key: str) -> bytes:
    payload = (_RETURN_ID + _U16.pack(reply_code) + _encode_short(reply_text)
               + _encode_short(exchange) + _encode_short(routing_key))
    return _frame(FRAME_METHOD, channel, payload)


def get_ok_frame(channel: int, delivery_tag: int, redelivered: bool, exchange: str,
                 routing_key: str, message_count: int) -> bytes:
    payload = (_GET_OK_ID + _U64.pack(delivery_tag) + (b"\x01" if redelivered else b"\x00")
               + _encode_short(exchange) + _encode_short(routing_key)
               + _U32.pack(message_count))
    return _frame(FRAME_METHOD, channel, payload)


def confirm_frame(channel: int, delivery_tag: int, multiple: bool, ack: bool = True) -> bytes:
    """``basic.ack`` (or ``basic.nack`` with requeue) for publisher confirms."""
    if ack:
        payload = _ACK_ID + _U64.pack(delivery_tag) + (b"\x01" if multiple else b"\x00")
    else:
        payload = _NACK_ID + _U64.pack(delivery_tag) + (b"\x03" if multiple else b"\x02")
    return _frame(FRAME_METHOD, channel, payload)


# A basic.ack or basic.nack payload: class and method id, delivery tag, bits.
_CONFIRM = struct.Struct(">IQB")
_BASIC_NACK = commands.Basic.Nack.index


def decode_confirm(payload: bytes) -> tuple[int, bool, bool] | None:
    """A method payload that is a ``basic.ack`` or ``basic.nack`` as ``(delivery_tag,
    multiple, ack)``, read without building a method object (what `confirm_frame`
    encodes); None for any other method, or a confirm of another length, which
    `decode_method` then reads or refuses."""
    if len(payload) != _CONFIRM.size:
        return None
    index, delivery_tag, bits = _CONFIRM.unpack(payload)
    if index == BASIC_ACK:
        return delivery_tag, bool(bits & 1), True
    if index == _BASIC_NACK:
        return delivery_tag, bool(bits & 1), False
    return None


def properties_of(raw_header: bytes) -> commands.Basic.Properties:
    """Decode a stored content header's properties (for the management API)."""
    content = header.ContentHeader()
    content.unmarshal(raw_header)
    return content.properties
