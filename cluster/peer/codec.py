"""Framing of node-to-node messages: a JSON header plus an opaque binary payload.

    u32 frame length (everything after it) | u16 header length | header | payload

The header is a JSON object whose ``"t"`` names the message type; the payload carries
message bodies without re-encoding them. What the types are, and what their headers and
payloads hold, is the business of the layer that sends them (the cluster layer's is
`cluster.ha.wire`; the links' own hellos and heartbeats, `cluster.peer.links`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from cluster.peer import compactjson

_LENGTHS = struct.Struct(">IH")
MAX_FRAME = 256 * 1024 * 1024


class CodecError(ValueError):
    """A peer sent bytes that are not a valid frame; the link is closed."""


@dataclass(slots=True)  # not frozen: a frozen dataclass is slower to build, per message
class Envelope:
    type: str
    fields: dict[str, Any] = field(default_factory=dict)
    payload: bytes = b""


def encode(envelope: Envelope) -> bytes:
    header = compactjson.dumps({"t": envelope.type, **envelope.fields}).encode()
    if len(header) > 0xFFFF:
        raise CodecError(f"{envelope.type} header of {len(header)} bytes is too large")
    return b"".join((_LENGTHS.pack(2 + len(header) + len(envelope.payload), len(header)),
                     header, envelope.payload))


class FrameBuffer:
    """Accumulates bytes from a link and yields whole envelopes."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[Envelope]:
        buffer = self._buffer
        if buffer:
            buffer += data
            source: bytes | bytearray = buffer
        else:
            source = data  # the common case: no partial frame waiting, no copy of it
        out = []
        offset = 0
        size = len(source)
        with memoryview(source) as view:
            while size - offset >= _LENGTHS.size:
                length, header_length = _LENGTHS.unpack_from(source, offset)
                if length > MAX_FRAME or header_length + 2 > length:
                    raise CodecError(f"frame of {length} bytes with a {header_length}-byte "
                                     f"header")
                end = offset + 4 + length
                if end > size:
                    break
                header_end = offset + _LENGTHS.size + header_length
                try:
                    header = compactjson.loads(str(view[offset + _LENGTHS.size:header_end],
                                                    "utf-8"))
                    kind = header.pop("t")
                except (ValueError, KeyError, AttributeError, TypeError) as error:
                    raise CodecError(f"bad frame header: {error!r}") from error
                if not isinstance(kind, str):
                    raise CodecError(f"frame type must be a string, got {kind!r}")
                out.append(Envelope(kind, header, bytes(view[header_end:end])))
                offset = end
        if source is buffer:
            if offset:
                del buffer[:offset]
        elif offset < size:
            buffer += data[offset:]
        return out
