"""Writing a history as the run goes.

Each line is validated with the reader's own rules before it is written, so a harness
bug shows up where it happens rather than when the run is checked, and is flushed at
once so that a killed harness leaves at most one torn line behind.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from harness.history.errors import BadHistory
from harness.history.model import FORMAT, VERSION, Event, Header
from harness.history.parse import Parser

Clock = Callable[[], float]


def encode(obj: Mapping[str, Any]) -> str:
    """One history line (without the newline), in the form the writer produces."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


class HistoryWriter:
    """Appends events to a new history file, one flushed line each.

    Times come from ``clock`` (monotonic) and ``wall_clock`` at the moment of
    :meth:`append`, under a lock, so lines are in time order even when several threads
    record (pika's callbacks run on their own threads).
    """

    def __init__(self, path: str | Path, *, run_id: str, scenario: str, seed: int,
                 config: Mapping[str, Any], clock: Clock = time.monotonic,
                 wall_clock: Clock = time.time) -> None:
        self.path = Path(path)
        self._parser = Parser(str(self.path))
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.Lock()
        header_line = {"format": FORMAT, "version": VERSION, "run_id": run_id,
                       "scenario": scenario, "seed": seed, "time": clock(),
                       "wall": wall_clock(), "config": dict(config)}
        self.header: Header = self._parser.header(header_line)
        self._file = self.path.open("x", encoding="utf-8")
        self._line = 1
        self._write(header_line)

    def append(self, process: str, op: str, type: str, **fields: Any) -> Event:
        """Record one event now; ``fields`` are the line's other keys (``msg``,
        ``queue``, ``node``, ``redelivered``, ``fault``, ...). Returns the event as a
        reader would see it; raises :class:`BadHistory` if the line breaks the format."""
        with self._lock:
            line = {"time": self._clock(), "wall": self._wall(), "process": process,
                    "op": op, "type": type, **fields}
            self._line += 1
            try:
                ev = self._parser.event(line, self._line)
            except BadHistory:
                self._line -= 1
                raise
            self._write(line)
            return ev

    def _write(self, line: Mapping[str, Any]) -> None:
        self._file.write(encode(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Flush to disk and close; appending afterwards is an error."""
        with self._lock:
            if self._file.closed:
                return
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
