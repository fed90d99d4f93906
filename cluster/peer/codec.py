"""Framing of node-to-node messages: a JSON header plus an opaque binary payload.

    u32 frame length (everything after it) | u16 header length | header | payload

The header is a JSON object whose ``"t"`` names the message type; the payload carries
message bodies without re-encoding them.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

_LENGTHS = struct.Struct(">IH")
MAX_FRAME = 256 * 1024 * 1024


class CodecError(ValueError):
    """A peer sent bytes that are not a valid frame; the link is closed."""


@dataclass(frozen=True, slots=True)
class Envelope:
    type: str
    fields: dict[str, Any] = field(default_factory=dict)
    payload: bytes = b""


def encode(envelope: Envelope) -> bytes:
    header = json.dumps({"t": envelope.type, **envelope.fields},
                        separators=(",", ":")).encode()
    if len(header) > 0xFFFF:
        raise CodecError(f"{envelope.type} header of {len(header)} bytes is too large")
    return (_LENGTHS.pack(2 + len(header) + len(envelope.payload), len(header)) + header
            + envelope.payload)


class FrameBuffer:
    """Accumulates bytes from a link and yields whole envelopes."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Envelope]:
        buffer = self._buffer
        buffer += data
        out = []
        offset = 0
        while len(buffer) - offset >= _LENGTHS.size:
            length, header_length = _LENGTHS.unpack_from(buffer, offset)
            if length > MAX_FRAME or header_length + 2 > length:
                raise CodecError(f"frame of {length} bytes with a {header_length}-byte header")
            end = offset + 4 + length
            if end > len(buffer):
                break
            header_end = offset + _LENGTHS.size + header_length
            try:
                header = json.loads(bytes(buffer[offset + _LENGTHS.size:header_end]))
                kind = header.pop("t")
            except (ValueError, KeyError, AttributeError, TypeError) as error:
                raise CodecError(f"bad frame header: {error!r}") from error
            if not isinstance(kind, str):
                raise CodecError(f"frame type must be a string, got {kind!r}")
            out.append(Envelope(kind, header, bytes(buffer[header_end:end])))
            offset = end
        if offset:
            del buffer[:offset]
        return out
