"""Decoding what clients send: method arguments and field tables, by offset.

pamqp's decoder copies the rest of the frame for every table entry and nesting level,
so a table of many small entries costs time quadratic in its size (a frame_max-sized
one took the node's event loop half a second), and nesting is bounded only by Python's
recursion limit, which depends on how deep the stack already is. Here every value is
read where it lies, must end inside its table, array or frame, and nesting stops at
`MAX_DEPTH`. Values come out as pamqp gives them: its own decoders read each scalar.
"""

from __future__ import annotations

import struct
from typing import Any

from pamqp import decode
from pamqp.base import Frame as Method
from pamqp.common import FieldArray, FieldTable

# Tables and arrays inside a table, at most. Clients nest a few levels (capabilities in
# client properties); code that walks a decoded table recursively (JSON, comparison,
# pamqp's encoder) stays far from Python's recursion limit.
MAX_DEPTH = 100
TOO_DEEP = "field table nested too deeply"

_U32 = struct.Struct(">I")
# Field value types of a fixed size, and how many bytes each takes.
_FIXED_SIZE = {b"t": 1, b"b": 1, b"B": 1, b"s": 2, b"u": 2, b"I": 4, b"i": 4, b"f": 4,
               b"l": 8, b"L": 8, b"d": 8, b"T": 8, b"D": 5, b"V": 0, b"\x00": 0}
_SCALARS = decode.TABLE_MAPPING


def _length(data: bytes, offset: int, end: int) -> int:
    """A 32-bit length at ``offset`` whose content must end by ``end``."""
    if offset + 4 > end:
        raise ValueError("length runs past the end of its container")
    length: int = _U32.unpack_from(data, offset)[0]
    if offset + 4 + length > end:
        raise ValueError(f"length {length} runs past the end of its container")
    return length


def read_table(data: bytes, offset: int, end: int, depth: int = 0) -> tuple[FieldTable, int]:
    """The field table at ``offset`` (its 32-bit length first), which must end by
    ``end``; returns it and the offset after it."""
    if depth > MAX_DEPTH:
        raise ValueError(TOO_DEEP)
    stop = offset + 4 + _length(data, offset, end)
    offset += 4
    table: FieldTable = {}
    while offset < stop:
        key_end = offset + 1 + data[offset]
        if key_end >= stop:  # the key, or its value's type, runs past the table
            raise ValueError("field table entry runs past the end of the table")
        key = data[offset + 1 : key_end].decode("utf-8")
        table[key], offset = _read_value(data, key_end, stop, depth)
    return table, stop


def _read_array(data: bytes, offset: int, end: int, depth: int) -> tuple[FieldArray, int]:
    if depth > MAX_DEPTH:
        raise ValueError(TOO_DEEP)
    stop = offset + 4 + _length(data, offset, end)
    offset += 4
    items: FieldArray = []
    while offset < stop:
        value, offset = _read_value(data, offset, stop, depth)
        items.append(value)
    return items, stop


def _read_value(data: bytes, offset: int, end: int, depth: int) -> tuple[Any, int]:
    kind = data[offset : offset + 1]
    offset += 1
    size = _FIXED_SIZE.get(kind)
    if size == 0:  # void
        return None, offset
    if size is not None:
        if offset + size > end:
            raise ValueError(f"field value {kind!r} runs past the end of its container")
        return _SCALARS[kind](data[offset : offset + size])[1], offset + size
    if kind == b"F":
        return read_table(data, offset, end, depth + 1)
    if kind == b"A":
        return _read_array(data, offset, end, depth + 1)
    if kind in (b"S", b"x"):
        stop = offset + 4 + _length(data, offset, end)
        return _SCALARS[kind](data[offset:stop])[1], stop
    raise ValueError(f"unknown field value type {kind!r}")


def short_string(data: bytes, offset: int) -> tuple[str, int]:
    """The short string at ``offset`` and the offset after it."""
    stop = offset + 1 + data[offset]
    if stop > len(data):
        raise ValueError("short string runs past the end of the frame")
    return data[offset + 1 : stop].decode("utf-8"), stop


def _long_string(data: bytes, offset: int) -> tuple[str | bytes, int]:
    stop = offset + 4 + _length(data, offset, len(data))
    raw = data[offset + 4 : stop]
    try:
        return raw.decode("utf-8"), stop
    except UnicodeDecodeError:  # pamqp's long strings: text if UTF-8, else bytes
        return raw, stop


_INTEGERS = {"octet": struct.Struct(">B"), "short": struct.Struct(">H"),
             "long": struct.Struct(">I"), "longlong": struct.Struct(">q")}


def read_arguments(method: Method, data: bytes, offset: int) -> None:
    """Set ``method``'s arguments from ``data`` at ``offset``, as pamqp's
    ``Frame.unmarshal`` does (consecutive bits share an octet). Bytes after the last
    argument are ignored, as pamqp ignores them."""
    bit, octet = 8, 0  # 8: no octet of bits in use
    for name in method.__slots__:
        kind = method.amqp_type(name)
        value: Any
        if kind == "bit":
            if bit == 8:
                octet, bit = data[offset], 0
                offset += 1
            value = bool(octet >> bit & 1)
            bit += 1
        else:
            bit = 8
            if kind in _INTEGERS:
                integer = _INTEGERS[kind]
                value = integer.unpack_from(data, offset)[0]
                offset += integer.size
            elif kind == "shortstr":
                value, offset = short_string(data, offset)
            elif kind == "longstr":
                value, offset = _long_string(data, offset)
            elif kind == "table":
                value, offset = read_table(data, offset, len(data))
            else:
                raise ValueError(f"argument {name} has unknown type {kind}")
        setattr(method, name, value)
