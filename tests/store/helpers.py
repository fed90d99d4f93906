"""Shared helpers for the store tests."""

from __future__ import annotations

from pathlib import Path

from cluster.store import MessageStore, Recovery


def reopen(directory: Path, segment_bytes: int = 64 * 1024) -> tuple[MessageStore, Recovery]:
    store = MessageStore(directory, segment_bytes=segment_bytes)
    return store, store.recover()


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.seg"))
