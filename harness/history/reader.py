"""Streaming reader of history files.

``read_history(path)`` reads and validates the header at once (so a wrong file fails
before any checking starts) and returns a re-iterable :class:`FileHistory` that yields
events one line at a time; memory does not depend on the file's length.

A crash of the writer can leave the last line cut short. Such a line (the last one, no
newline, not decodable) is skipped and reported as :attr:`FileHistory.torn`; anything
wrong anywhere else is a :class:`BadHistory` naming file, line, field and expectation.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TextIO

from harness.history.errors import BadHistory
from harness.history.fanout import copies
from harness.history.model import Event, Header
from harness.history.parse import Parser

# The decoder's scanner without JSONDecoder.raw_decode's Python wrapper: this runs once
# per line of multi-million-line files. Errors are re-derived by _decode_line. (The
# attribute is set by JSONDecoder.__init__; typeshed does not declare it.)
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


@dataclass(frozen=True)
class TornLine:
    """The cut-short last line of a history whose writer did not finish it."""

    line: int
    text: str  # what was there, shortened

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "text": self.text}


class History(Protocol):
    """What checkers read: a header and the events in time order.

    ``torn`` is known once the events have been iterated to the end.
    """

    header: Header
    source: str

    def __iter__(self) -> Iterator[Event]: ...

    @property
    def torn(self) -> TornLine | None: ...


class FileHistory:
    """A history file; each iteration reads it again from the start."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.source = str(path)
        self._parser = Parser(self.source)
        self._torn: TornLine | None = None
        self.header = self._read_header()

    @property
    def torn(self) -> TornLine | None:
        return self._torn

    def _open(self) -> TextIO:
        try:
            # surrogateescape: a multi-byte character cut by a crash must not fail the
            # whole read; bad bytes are found per line by _decode_line
            return self.path.open(encoding="utf-8", errors="surrogateescape", newline="\n")
        except OSError as err:
            raise BadHistory(self.source, 0, None, "a readable history file",
                             err.strerror or str(err)) from None

    def _read_header(self) -> Header:
        with self._open() as f:
            first = f.readline()
        if not first:
            raise BadHistory(self.source, 1, None, "a header line", "an empty file")
        if not first.endswith("\n"):
            raise BadHistory(self.source, 1, None, "a complete header line (ending in a newline)",
                             _shorten(first))
        return self._parser.header(self._decode_line(first, 1), 1)

    def _decode_line(self, text: str, line: int) -> object:
        if not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                raise BadHistory(self.source, line, None, "UTF-8 text",
                                 f"undecodable bytes at column {err.start + 1}") from None
        try:
            obj, end = _scan(text, 0)
        except StopIteration:
            raise BadHistory(self.source, line, None, "one JSON object per line",
                             "no JSON value at column 1") from None
        except json.JSONDecodeError as err:
            raise BadHistory(self.source, line, None, "one JSON object per line",
                             f"{err.msg} at column {err.colno}") from None
        if end != len(text) and not text[end:].isspace():
            raise BadHistory(self.source, line, None, "one JSON object per line",
                             f"more after column {end}")
        return obj

    def __iter__(self) -> Iterator[Event]:
        return copies(self._lines(), self.header.fanout)

    def _lines(self) -> Iterator[Event]:
        event = self._parser.event
        decode = self._decode_line
        scan = _scan
        self._torn = None
        last_time = float("-inf")
        with self._open() as f:
            f.readline()
            line = 1
            for text in f:
                line += 1
                if text[-1] != "\n":
                    try:
                        obj = decode(text, line)
                    except BadHistory:
                        self._torn = TornLine(line, _shorten(text))
                        return
                else:
                    # the common case, inline: a complete ASCII line ending in "}\n"
                    try:
                        obj, end = scan(text, 0)
                    except (StopIteration, json.JSONDecodeError):
                        obj = decode(text, line)  # raises the precise error
                    else:
                        if end != len(text) - 1 or not text.isascii():
                            obj = decode(text, line)
                ev = event(obj, line)
                if ev.time < last_time:
                    raise BadHistory(self.source, line, "time",
                                     f"at least {last_time} (lines are in time order)", ev.time)
                last_time = ev.time
                yield ev


def read_history(path: str | Path) -> FileHistory:
    """Open a history file: the header is validated now, events as they are iterated."""
    return FileHistory(Path(path))


def _shorten(text: str) -> str:
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace").rstrip("\n")
    return text if len(text) <= 80 else text[:77] + "..."
