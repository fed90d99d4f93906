"""What a power loss would undo: an I/O-free record, per file, of how to put it back as
it was at its last fsync (the rules are in the package docstring).

The file system shell tells the ledger what it is about to do and the ledger answers
which old bytes to save; `DurabilityLedger.lose` turns the record into the steps that
revert the backing directory. Paths are relative to the mount, ``/``-separated.
"""

from __future__ import annotations

import fnmatch
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class FileRecord:
    """A file changed since its last fsync."""

    entry_durable: bool  # its name survives a power loss
    synced_size: int
    # (offset, bytes there before) in the order saved; undone newest first.
    undo: list[tuple[int, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class Remove:
    """A file whose name never became durable: it vanishes."""

    path: str


@dataclass(frozen=True)
class Restore:
    """Write back the saved bytes, newest save first, then cut the file to its synced
    size (which also drops everything appended since)."""

    path: str
    undo: tuple[tuple[int, bytes], ...]
    size: int


Revert = Remove | Restore


class DurabilityLedger:
    """``keep``: glob patterns of file names whose writes are never lost (the harness's
    own logs kept beside the broker's state, not part of what is tested)."""

    def __init__(self, keep: Iterable[str] = ()) -> None:
        self._keep = tuple(keep)
        self._files: dict[str, FileRecord] = {}

    def tracked(self, path: str) -> bool:
        name = posixpath.basename(path)
        return not any(fnmatch.fnmatchcase(name, pattern) for pattern in self._keep)

    def record(self, path: str) -> FileRecord | None:
        return self._files.get(path)

    def created(self, path: str) -> None:
        """A new file: neither its name nor any of its bytes is durable yet."""
        if self.tracked(path):
            self._files[path] = FileRecord(entry_durable=False, synced_size=0)

    def to_save(self, path: str, size_now: int, start: int, end: int) -> tuple[int, int] | None:
        """Bytes [start, end) of a file now ``size_now`` long are about to change (a write,
        or a truncate from ``start``): the part of them the last fsync covered, which the
        caller must read and hand to `saved` before changing them; None when nothing."""
        if not self.tracked(path):
            return None
        record = self._files.setdefault(path, FileRecord(entry_durable=True,
                                                         synced_size=size_now))
        end = min(end, record.synced_size)
        return (start, end) if start < end else None

    def saved(self, path: str, offset: int, old: bytes) -> None:
        if old:
            self._files[path].undo.append((offset, old))

    def synced(self, path: str) -> None:
        """fsync or fdatasync of the file: its bytes, its size and its name are durable
        (as on ext4, where fsync of a new file commits its directory entry too)."""
        self._files.pop(path, None)

    def directory_synced(self, directory: str) -> None:
        """fsync of a directory: the names in it are durable, not their files' bytes."""
        for path, record in self._files.items():
            if posixpath.dirname(path) == directory:
                record.entry_durable = True

    def renamed(self, old: str, new: str) -> None:
        """A rename is durable at once and carries the records of what moved along; the
        renamed file's name becomes durable (a crash leaves the old or the new file at
        ``new``, never neither), its bytes only at its fsync. A file it replaced is gone,
        like an unlink."""
        moved = {path: record for path, record in self._files.items()
                 if path == old or path.startswith(old + "/")}
        for path in [p for p in self._files if p == new or p.startswith(new + "/")]:
            del self._files[path]
        for path, record in moved.items():
            del self._files[path]
            record.entry_durable |= path == old
            self._files[new + path[len(old):]] = record

    def unlinked(self, path: str) -> None:
        """An unlink is durable at once: a removed file never comes back."""
        self._files.pop(path, None)

    def lose(self) -> list[Revert]:
        """The steps that put every file back as of its last fsync; the ledger is clean
        afterwards (the caller carries them out before serving anything else)."""
        steps: list[Revert] = [
            Restore(path, tuple(reversed(record.undo)), record.synced_size)
            if record.entry_durable else Remove(path)
            for path, record in sorted(self._files.items())]
        self._files.clear()
        return steps
