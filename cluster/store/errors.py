"""How the message store fails: refusing work, and finding damage in its files."""

from __future__ import annotations

from pathlib import Path


class StoreError(OSError):
    """The store cannot be used: locked directory, misuse, or an earlier failed commit.

    A subclass of OSError so that a caller handling I/O failures of ``commit`` also
    handles the store refusing work after one.
    """


class StoreCorrupted(StoreError):
    """A segment holds bytes that are not a valid record where a tail cannot be torn."""

    def __init__(self, path: Path, offset: int, reason: str) -> None:
        super().__init__(f"{path}: corrupt at offset {offset}: {reason}")
        self.path = path
        self.offset = offset
        self.reason = reason
