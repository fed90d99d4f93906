"""A published message as the broker holds it, and its encoding for the store."""

from __future__ import annotations

import struct
from dataclasses import dataclass

_LENGTHS = struct.Struct(">BBI")


@dataclass(slots=True, frozen=True)
class Message:
    """``header`` is the raw content-header payload: it reaches consumers unchanged."""

    exchange: str
    routing_key: str
    header: bytes
    body: bytes
    persistent: bool

    def encode(self) -> bytes:
        exchange = self.exchange.encode()
        routing_key = self.routing_key.encode()
        return b"".join(
            (
                _LENGTHS.pack(len(exchange), len(routing_key), len(self.header)),
                b"\x01" if self.persistent else b"\x00",
                exchange,
                routing_key,
                self.header,
                self.body,
            )
        )

    @classmethod
    def decode(cls, data: bytes) -> Message:
        exchange_len, key_len, header_len = _LENGTHS.unpack_from(data)
        offset = _LENGTHS.size + 1
        if offset + exchange_len + key_len + header_len > len(data):
            raise ValueError(f"a {len(data)}-byte message is shorter than its header says")
        exchange = data[offset : offset + exchange_len].decode()
        offset += exchange_len
        routing_key = data[offset : offset + key_len].decode()
        offset += key_len
        header = data[offset : offset + header_len]
        return cls(exchange, routing_key, header, data[offset + header_len :], data[6] == 1)
