"""The bytes of a segment file, as laid out at the top of `cluster.store.log`: encoding
its header and records, and reading them back, checked, up to where they stop being
valid. Which records are live, and where, is the log's business.
"""

from __future__ import annotations

import os
import struct
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from cluster.store.errors import StoreCorrupted

MAGIC = b"MCSTORE\x00"
VERSION = 1
_HEADER = struct.Struct("<8sI")
HEADER = _HEADER.pack(MAGIC, VERSION)
_FRAME = struct.Struct("<II")  # body length, CRC32 of body
_BODY_HEAD = struct.Struct("<BH")  # kind, key length
_SEQ = struct.Struct("<q")
_COUNT = struct.Struct("<I")

APPEND, REMOVE, DROP = 1, 2, 3
_MIN_BODY = _BODY_HEAD.size


# Not frozen: a frozen dataclass is several times slower to make, and recovery makes
# one a record.
@dataclass(slots=True)
class Append:
    queue: str
    seq: int


@dataclass(slots=True)
class Remove:
    queue: str
    seqs: tuple[int, ...]


@dataclass(slots=True)
class Drop:
    queue: str


Record = Append | Remove | Drop


# -- writing ------------------------------------------------------------------------------


def append_head(queue: str) -> tuple[bytes, int]:
    """The start of the body of every APPEND record of ``queue``, and its CRC32: made
    once a queue, so that each append only checksums its seq and payload."""
    head = _body_head(APPEND, queue)
    return head, zlib.crc32(head)


def append_record(head: tuple[bytes, int], seq: int, payload: bytes) -> bytes:
    """An APPEND record up to its payload, which follows it (and is not copied here);
    ``head`` is `append_head`'s for the queue."""
    head_bytes, head_crc = head
    seq_bytes = _SEQ.pack(seq)
    length = len(head_bytes) + _SEQ.size + len(payload)
    crc = zlib.crc32(payload, zlib.crc32(seq_bytes, head_crc))
    return _FRAME.pack(length, crc) + head_bytes + seq_bytes


def remove_record(queue: str, seqs: list[int]) -> bytes:
    return _framed(_body_head(REMOVE, queue) + _COUNT.pack(len(seqs))
                   + struct.pack(f"<{len(seqs)}q", *seqs))


def drop_record(queue: str) -> bytes:
    return _framed(_body_head(DROP, queue))


def _framed(body: bytes) -> bytes:
    return _FRAME.pack(len(body), zlib.crc32(body)) + body


def _body_head(kind: int, queue: str) -> bytes:
    key = queue.encode("utf-8", "surrogatepass")
    if len(key) > 0xFFFF:
        raise ValueError(f"queue key of {len(key)} bytes exceeds 65535")
    return _BODY_HEAD.pack(kind, len(key)) + key


# -- reading ------------------------------------------------------------------------------


def scan(path: Path, data: bytes,
         found: Callable[[int, int, Record], None]) -> tuple[int, str | None]:
    """Hand ``found`` each record of the segment ``data`` (read from ``path``) in order,
    with its offset and length; return where valid records end and, if they end before
    the file does, why: what a torn write leaves. Damage a torn write cannot leave
    raises StoreCorrupted."""
    if len(data) < len(HEADER):
        if HEADER.startswith(data):
            return 0, "torn segment header"
        raise StoreCorrupted(path, 0, "not a mirrorchaos store segment")
    magic, version = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise StoreCorrupted(path, 0, "not a mirrorchaos store segment")
    if version != VERSION:
        raise StoreCorrupted(path, 0, f"segment format version {version}, "
                                      f"this store reads version {VERSION}")
    view = memoryview(data)
    size = len(data)
    offset = len(HEADER)
    while offset < size:
        if size - offset < _FRAME.size:
            return offset, "incomplete record frame"
        length, crc = _FRAME.unpack_from(data, offset)
        start = offset + _FRAME.size
        end = start + length
        if length < _MIN_BODY:
            return offset, f"invalid record length {length}"
        if end > size:
            return offset, f"record of {length} bytes runs past the end of the file"
        body = view[start:end]
        if zlib.crc32(body) != crc:
            return offset, "CRC mismatch"
        record = _decode(body)
        if isinstance(record, str):
            # The CRC matched, so these bytes were written as they are: not a torn
            # write but a bug or a foreign format. Cutting would destroy data.
            raise StoreCorrupted(path, offset, record)
        found(offset, _FRAME.size + length, record)
        offset = end
    return offset, None


def _decode(body: memoryview) -> Record | str:
    """The record in ``body``, or why it is not one."""
    kind, key_length = _BODY_HEAD.unpack_from(body)
    rest = _BODY_HEAD.size + key_length
    if rest > len(body):
        return "queue key runs past the record"
    try:
        queue = str(body[_BODY_HEAD.size:rest], "utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return "queue key is not UTF-8"
    if kind == APPEND:
        if len(body) < rest + _SEQ.size:
            return "APPEND record too short"
        (seq,) = _SEQ.unpack_from(body, rest)
        return Append(queue, seq)
    if kind == REMOVE:
        if len(body) < rest + _COUNT.size:
            return "REMOVE record too short"
        (count,) = _COUNT.unpack_from(body, rest)
        if len(body) != rest + _COUNT.size + count * _SEQ.size:
            return f"REMOVE record length does not match its {count} seqs"
        return Remove(queue, struct.unpack_from(f"<{count}q", body, rest + _COUNT.size))
    if kind == DROP:
        if len(body) != rest:
            return "DROP record has trailing bytes"
        return Drop(queue)
    return f"unknown record kind {kind}"


def append_payload(data: bytes, offset: int, length: int) -> bytes:
    """The payload of the APPEND record of ``length`` bytes at ``offset`` in ``data``."""
    key_start = offset + _FRAME.size + _BODY_HEAD.size
    key_length = int.from_bytes(data[key_start - 2:key_start], "little")
    return data[key_start + key_length + _SEQ.size:offset + length]


def read_records(path: Path, locations: Iterable[tuple[int, int]]) -> list[bytes]:
    """Read whole records back, checking them again: a bad sector must not be copied."""
    records = []
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        for offset, length in locations:
            record = os.pread(fd, length, offset)
            if len(record) != length:
                raise StoreCorrupted(path, offset, "record shorter than when it was written")
            body_length, crc = _FRAME.unpack_from(record)
            if body_length != length - _FRAME.size or zlib.crc32(record[_FRAME.size:]) != crc:
                raise StoreCorrupted(path, offset, "record changed since it was written")
            records.append(record)
    finally:
        os.close(fd)
    return records
