"""The node's durable metadata file (users, vhosts, permissions, durable exchanges,
queues and bindings, policies, each durable queue's succession), replaced atomically
on every save.

Each save is of a snapshot its caller took on the event loop, encoded there (so nothing
the broker holds can change under the writer) and numbered in the order taken.
`save_soon` hands the write and its fsyncs to a worker thread, so the loop never waits
on the disk: one write at a time, and while one is under way the next waits and then
writes only the newest snapshot handed over meanwhile (those in between are moot).
`save` writes at once, for a caller whose next effect relies on the file; it waits for a
write under way first. Every write holds one lock and is skipped when a newer snapshot
is on disk already, so a stale state never lands after a newer one.

`settled` is the newest snapshot whose save has finished, failed ones too (the next
change saves the whole state again): output that may tell of a change waits for it
(`cluster.node`), and `saved()` waits for every snapshot handed over so far.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cluster.amqp import tablejson


class DefinitionsError(ValueError):
    """The definitions file exists but cannot be used; names the file and the cause."""


class DefinitionsFile:
    def __init__(self, path: Path, *, on_saved: Callable[[], None] | None = None,
                 on_failure: Callable[[OSError], None] | None = None) -> None:
        """``on_saved`` runs on the loop after each of the worker's saves, ``on_failure``
        before it when that save failed."""
        self.path = path
        self._on_saved = on_saved
        self._on_failure = on_failure
        self._lock = threading.Lock()  # one write at a time, the loop's or the worker's
        self._on_disk = 0  # the newest snapshot written, under the lock
        self.taken = 0  # snapshots handed over so far
        self.settled = 0
        self._newest: tuple[int, str] | None = None  # for the worker, not yet begun
        self._worker: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []

    @property
    def pending(self) -> bool:
        """Some snapshot handed over has yet to be saved."""
        return self.settled < self.taken

    def load(self) -> dict[str, Any] | None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        try:
            data = tablejson.loads(text)
        except ValueError as error:
            raise DefinitionsError(f"{self.path}: not valid JSON: {error}") from error
        if not isinstance(data, dict):
            raise DefinitionsError(f"{self.path}: expected a JSON object")
        return data

    def save(self, definitions: dict[str, Any]) -> None:
        """Durable on return (after the worker's write under way, if any)."""
        seq = self._take()
        try:
            self._write(seq, tablejson.dumps(definitions))
        finally:
            self._settle(seq)

    def save_soon(self, definitions: dict[str, Any]) -> None:
        """Saved by the worker thread, once the save under way (if any) is done."""
        self._newest = (self._take(), tablejson.dumps(definitions))
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._work())

    async def saved(self) -> None:
        """Return once every snapshot handed over so far has been saved (or failed)."""
        if not self.pending:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append((self.taken, waiter))
        await waiter

    def _take(self) -> int:
        self.taken += 1
        return self.taken

    async def _work(self) -> None:
        try:
            while self._newest is not None:
                (seq, text), self._newest = self._newest, None
                try:
                    await asyncio.to_thread(self._write, seq, text)
                except OSError as error:
                    if self._on_failure is not None:
                        self._on_failure(error)
                self._settle(seq)
                if self._on_saved is not None:
                    self._on_saved()
        finally:
            self._worker = None

    def _settle(self, seq: int) -> None:
        self.settled = max(self.settled, seq)
        waiting = []
        for target, waiter in self._waiters:
            if target > self.settled:
                waiting.append((target, waiter))
            elif not waiter.done():
                waiter.set_result(None)
        self._waiters = waiting

    def _write(self, seq: int, text: str) -> None:
        """Write to a temporary file, fsync, rename, fsync the directory: a crash leaves
        either the old or the new file, never a torn one."""
        with self._lock:
            if seq <= self._on_disk:
                return  # a newer snapshot is there already
            tmp = self.path.with_suffix(".tmp")
            with tmp.open("w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
            directory = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
            self._on_disk = seq
