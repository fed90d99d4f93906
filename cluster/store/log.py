"""A log-structured, fsync'd store for durable queues' persistent messages.

The log is a directory of segment files ``NNNNNNNN.seg`` (numbered from 1, contiguous).
Each starts with a 12-byte header, ``b"MCSTORE\\x00"`` + u32 format version, then records:

    u32 body length | u32 CRC32 of body | body
    body = u8 kind | u16 key length | queue key (UTF-8) | rest
    APPEND (1): rest = i64 seq | payload
    REMOVE (2): rest = u32 count | count x i64 seq
    DROP   (3): rest = (nothing)

All integers are little-endian. A record is position-independent, so compaction copies
one verbatim. Replaying the records in log order gives the live messages: an APPEND
makes (queue, seq) live (replacing a live one with the same key), a REMOVE kills the
listed seqs that are live at that point, a DROP kills every message of the queue live
at that point, so a queue redeclared after a DROP starts afresh whatever its seqs.
`cluster.store.records` writes and reads these bytes; this module keeps which records
are live, where, and what is durable.

Threading: ``stage_*`` run on the event-loop thread while ``commit`` runs in one worker
thread; every shared structure is guarded by one lock, held only for in-memory work.
File I/O (write, fsync, compaction reads, unlinks) happens outside it in ``commit``.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from pathlib import Path

from cluster.store import records
from cluster.store.errors import StoreCorrupted, StoreError
from cluster.store.records import HEADER, Append, Record, Remove

# Compaction copies at most this much per commit, bounding both the extra commit
# latency and how long the event loop waits for the lock.
_COMPACT_BATCH_BYTES = 1 << 20
_LOCK_NAME = "LOCK"


@dataclass(frozen=True, slots=True)
class TruncatedTail:
    """A torn tail cut from the newest segment at recovery."""

    file: Path
    offset: int
    bytes_cut: int
    reason: str


@dataclass(frozen=True, slots=True)
class Recovery:
    queues: dict[str, list[tuple[int, bytes]]]  # queue key -> live [(seq, payload)] by seq
    truncated: list[TruncatedTail]


class _Segment:
    __slots__ = ("last_lsn", "live", "live_bytes", "needed_until", "on_disk", "path",
                 "sealed", "size")

    def __init__(self, path: Path, size: int, on_disk: bool) -> None:
        self.path = path
        self.size = size  # bytes including those staged but not yet written
        self.on_disk = on_disk
        self.sealed = False  # no record will be placed in it any more
        self.live: dict[tuple[str, int], tuple[int, int]] = {}  # key -> (offset, length)
        self.live_bytes = 0
        self.last_lsn = 0  # once sealed: no record in it has a higher LSN
        # The LSN that must be durable before deleting it: its own records and the
        # records that killed its messages.
        self.needed_until = 0

    @property
    def number(self) -> int:
        return int(self.path.stem)


class MessageStore:
    def __init__(self, directory: Path, *, segment_bytes: int = 64 * 1024 * 1024,
                 fsync: bool = True) -> None:
        if segment_bytes <= len(HEADER):
            raise ValueError(f"segment_bytes must exceed the {len(HEADER)}-byte header")
        self._dir = Path(directory)
        self._segment_bytes = segment_bytes
        # False only for the planted bug ``--break no-fsync``: commits are not durable.
        self._fsync = fsync
        try:
            self._dir.mkdir(parents=True)
        except FileExistsError:
            pass
        else:
            _fsync_directory(self._dir.parent)  # or a crash could lose the new directory
        self._lockfd = _lock_directory(self._dir)
        self._lock = threading.Lock()
        self._ready = False
        self._refusal = "recover() has not been called"
        self._recovered = False
        self._segments: list[_Segment] = []
        self._head = _Segment(self._segment_path(1), len(HEADER), on_disk=False)
        self._buf = bytearray()
        self._chunks: list[tuple[_Segment, bytearray]] = []  # staged bytes per segment
        self._queues: dict[str, dict[int, _Segment]] = {}  # live messages' segments
        self._append_heads: dict[str, tuple[bytes, int]] = {}  # records.append_head's
        self._lsn = 0
        self._durable = 0
        # Owned by the committing thread.
        self._fd = -1
        self._fd_segment: _Segment | None = None

    # -- recovery --------------------------------------------------------------------------

    def recover(self) -> Recovery:
        """Replay every segment oldest-first and return the live messages.

        A torn or corrupt record in the newest segment is where a crash interrupted a
        write: the file is cut there and the cut reported. Anywhere else it is damage
        the store must not paper over, so StoreCorrupted is raised (close() the store
        then; the files are left as they are).
        """
        if self._recovered:
            raise StoreError("recover() may be called only once")
        self._recovered = True
        numbers = self._segment_numbers()
        truncated: list[TruncatedTail] = []
        for i, number in enumerate(numbers):
            path = self._segment_path(number)
            newest = i == len(numbers) - 1
            data = path.read_bytes()
            segment = _Segment(path, len(data), on_disk=True)
            end, problem = records.scan(path, data, partial(self._replay, segment))
            if problem is not None:
                if not newest:
                    raise StoreCorrupted(path, end, problem)
                self._cut(path, end)
                truncated.append(TruncatedTail(path, end, len(data) - end, problem))
                segment.size = max(end, len(HEADER))
            segment.sealed = not newest
            self._segments.append(segment)
        queues = self._read_live()
        if self._segments:
            self._head = self._segments[-1]
            self._buf = bytearray()
        else:
            self._segments.append(self._head)
            self._buf = bytearray(HEADER)
        self._chunks = [(self._head, self._buf)]
        self._reclaim(0)  # everything read is durable
        self._ready = True
        return Recovery(queues, truncated)

    def _segment_numbers(self) -> list[int]:
        numbers = sorted(
            int(p.stem) for p in self._dir.iterdir() if p.suffix == ".seg" and p.stem.isdigit()
        )
        for before, after in pairwise(numbers):
            if after != before + 1:
                # Segments are deleted oldest-first only, so a gap is outside damage.
                raise StoreCorrupted(self._segment_path(before + 1), 0,
                                     f"segment missing between {before} and {after}")
        return numbers

    def _replay(self, segment: _Segment, offset: int, length: int, record: Record) -> None:
        """A record read back at recovery, where all is durable: LSN 0."""
        if isinstance(record, Append):
            self._add(record.queue, record.seq, segment, offset, length, 0)
        elif isinstance(record, Remove):
            self._kill(record.queue, record.seqs, 0)
        else:
            self._kill_queue(record.queue, 0)

    def _cut(self, path: Path, end: int) -> None:
        with open(path, "r+b") as f:
            if end < len(HEADER):
                f.truncate(0)
                f.write(HEADER)
            else:
                f.truncate(end)
            f.flush()
            os.fsync(f.fileno())

    def _read_live(self) -> dict[str, list[tuple[int, bytes]]]:
        queues: dict[str, list[tuple[int, bytes]]] = {}
        for segment in self._segments:
            if not segment.live:
                continue
            data = segment.path.read_bytes()
            for (queue, seq), (offset, length) in segment.live.items():
                queues.setdefault(queue, []).append(
                    (seq, records.append_payload(data, offset, length)))
        for entries in queues.values():
            entries.sort(key=lambda entry: entry[0])
        return queues

    # -- staging (event-loop thread) --------------------------------------------------------

    @property
    def staged_lsn(self) -> int:
        """The highest LSN handed out."""
        return self._lsn

    @property
    def durable_lsn(self) -> int:
        """The highest LSN known durable (as last returned by commit)."""
        return self._durable

    def stage_append(self, queue: str, seq: int, payload: bytes) -> int:
        head = self._append_heads.get(queue)
        if head is None:
            head = self._append_heads[queue] = records.append_head(queue)
        record = records.append_record(head, seq, payload)
        length = len(record) + len(payload)
        with self._lock:
            if not self._ready:
                raise StoreError(self._refusal)
            lsn = self._lsn = self._lsn + 1
            segment, offset = self._reserve(length)
            buf = self._buf
            buf += record
            buf += payload
            self._add(queue, seq, segment, offset, length, lsn)
        return lsn

    def stage_remove(self, queue: str, seqs: Iterable[int]) -> int:
        with self._lock:
            if not self._ready:
                raise StoreError(self._refusal)
            lsn = self._lsn = self._lsn + 1
            # Seqs that are not live need no record: replay would find them dead too.
            dead = self._kill(queue, seqs, lsn)
            if dead:
                self._put(records.remove_record(queue, dead))
        return lsn

    def stage_drop_queue(self, queue: str) -> int:
        with self._lock:
            if not self._ready:
                raise StoreError(self._refusal)
            lsn = self._lsn = self._lsn + 1
            self._append_heads.pop(queue, None)
            if self._kill_queue(queue, lsn):
                self._put(records.drop_record(queue))
        return lsn

    # The helpers below run with the lock held (or before any concurrency, in recover).

    def _reserve(self, length: int) -> tuple[_Segment, int]:
        """Place a record of ``length`` bytes in the head segment; the caller appends its
        bytes to ``self._buf``."""
        head = self._head
        if head.size >= self._segment_bytes:
            head = self._roll()
        offset = head.size
        head.size = offset + length
        return head, offset

    def _put(self, record: bytes) -> tuple[_Segment, int]:
        placed = self._reserve(len(record))
        self._buf += record
        return placed

    def _roll(self) -> _Segment:
        old = self._head
        old.sealed = True
        old.last_lsn = old.needed_until = self._lsn
        head = self._head = _Segment(self._segment_path(old.number + 1), len(HEADER),
                                     on_disk=False)
        self._segments.append(head)
        self._buf = bytearray(HEADER)
        self._chunks.append((head, self._buf))
        return head

    def _add(self, queue: str, seq: int, segment: _Segment, offset: int, length: int,
             lsn: int) -> None:
        messages = self._queues.get(queue)
        if messages is None:
            messages = self._queues[queue] = {}
        else:
            previous = messages.get(seq)
            if previous is not None:
                _forget(previous, (queue, seq), lsn)
        messages[seq] = segment
        segment.live[(queue, seq)] = (offset, length)
        segment.live_bytes += length

    def _kill(self, queue: str, seqs: Iterable[int], lsn: int) -> list[int]:
        messages = self._queues.get(queue)
        if not messages:
            return []
        dead = []
        for seq in seqs:
            segment = messages.pop(seq, None)
            if segment is not None:
                _forget(segment, (queue, seq), lsn)
                dead.append(seq)
        if not messages:
            del self._queues[queue]
        return dead

    def _kill_queue(self, queue: str, lsn: int) -> bool:
        messages = self._queues.pop(queue, None)
        if not messages:
            return False
        for seq, segment in messages.items():
            _forget(segment, (queue, seq), lsn)
        return True

    # -- committing (one worker thread) -----------------------------------------------------

    def commit(self) -> int:
        """Write and fsync everything staged so far; return the highest durable LSN.

        Also deletes segments that hold nothing live and, when the log is more garbage
        than live data, copies a batch of the oldest segment's live records to the head
        and commits again, so that the oldest segment can go.
        """
        durable = self._flush()
        self._reclaim(durable)
        if self._stage_compaction():
            durable = self._flush()
            self._reclaim(durable)
        return durable

    def _flush(self) -> int:
        with self._lock:
            if not self._ready:
                raise StoreError(self._refusal)
            lsn = self._lsn
            if lsn == self._durable:
                return lsn
            chunks = self._chunks
            self._buf = bytearray()
            self._chunks = [(self._head, self._buf)]
        segment = chunks[0][0]
        try:
            for segment, buf in chunks:
                if buf:
                    self._write(segment, buf)
        except OSError as error:
            raise self._fail(f"commit failed writing {segment.path}", error) from error
        self._durable = lsn
        return lsn

    def _write(self, segment: _Segment, buf: bytearray) -> None:
        # Each segment is fsync'd before the next is created, so after a crash only the
        # newest segment can have a torn tail.
        if self._fd_segment is not segment:
            self._close_fd()
            flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
            if not segment.on_disk:
                flags |= os.O_CREAT | os.O_EXCL
            self._fd = os.open(segment.path, flags, 0o644)
            self._fd_segment = segment
        view = memoryview(buf)
        while view:
            view = view[os.write(self._fd, view):]
        if self._fsync:
            os.fdatasync(self._fd)  # covers the file size, which is all an append changes
        if not segment.on_disk:
            _fsync_directory(self._dir)
            segment.on_disk = True

    def _reclaim(self, durable: int) -> None:
        # Only the oldest segment may go. Its REMOVE and DROP records can only concern
        # messages in itself or in older segments, and those are gone, so replay never
        # needs them again. Deleting a younger segment first could lose a REMOVE for a
        # message in an older one, resurrecting an acked message at the next recovery.
        doomed = []
        with self._lock:
            segments = self._segments
            while (segments[0].sealed and not segments[0].live
                   and segments[0].needed_until <= durable):
                doomed.append(segments.pop(0))
        try:
            for segment in doomed:
                if self._fd_segment is segment:
                    self._close_fd()
                segment.path.unlink()
                # One directory fsync per unlink keeps deletions in order on disk too.
                _fsync_directory(self._dir)
        except OSError as error:
            raise self._fail("deleting a dead segment failed", error) from error

    def _stage_compaction(self) -> bool:
        with self._lock:
            segments = self._segments
            oldest = segments[0]
            if not oldest.sealed or not oldest.live or oldest.last_lsn > self._durable:
                return False
            live = sum(s.live_bytes for s in segments)
            garbage = sum(s.size for s in segments) - live
            # Compacting whenever garbage exceeds live data (plus the head and one
            # segment of slack) bounds disk use at about twice the live data.
            if garbage <= live + 2 * self._segment_bytes:
                return False
            batch = []
            size = 0
            for key, location in oldest.live.items():
                batch.append((key, location))
                size += location[1]
                if size >= _COMPACT_BATCH_BYTES:
                    break
        # Read outside the lock: a sealed, fully written segment never changes, and only
        # this thread deletes segments.
        try:
            copies = records.read_records(oldest.path, [location for _, location in batch])
        except OSError as error:
            raise self._fail(f"compaction failed reading {oldest.path}", error) from error
        with self._lock:
            if not self._ready:
                return False
            lsn = self._lsn = self._lsn + 1
            for ((queue, seq), location), record in zip(batch, copies, strict=True):
                if oldest.live.get((queue, seq)) != location:
                    continue  # removed or dropped meanwhile
                segment, offset = self._put(record)
                self._add(queue, seq, segment, offset, len(record), lsn)
        return True

    def _fail(self, what: str, error: OSError) -> StoreError:
        with self._lock:
            self._ready = False
            self._refusal = f"{what}: {error}; the store must be reopened and recovered"
            return StoreError(self._refusal)

    def _close_fd(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1
        self._fd_segment = None

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Release the directory. Records staged since the last commit are discarded.
        Must not run concurrently with commit."""
        with self._lock:
            self._ready = False
            self._refusal = "the store is closed"
        self._close_fd()
        if self._lockfd >= 0:
            os.close(self._lockfd)
            self._lockfd = -1

    def _segment_path(self, number: int) -> Path:
        return self._dir / f"{number:08d}.seg"


def _forget(segment: _Segment, key: tuple[str, int], lsn: int) -> None:
    _, length = segment.live.pop(key)
    segment.live_bytes -= length
    segment.needed_until = lsn


def _lock_directory(directory: Path) -> int:
    fd = os.open(directory / _LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreError(f"{directory} is in use by another MessageStore") from None
    return fd


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
