"""Errors of history files, typed by who is at fault.

A ``BadHistory`` is the fault of whatever produced the file (the harness, another tool,
a hand edit): the CLI turns it into exit code 254. Each error names the file, the line,
the field and what was expected, so the producer can be fixed without guessing.
"""

from __future__ import annotations


class BadHistory(Exception):
    """The history cannot be read as the documented format (the producer's fault)."""

    def __init__(self, path: str, line: int, field: str | None, expected: str,
                 got: object = None) -> None:
        where = f"{path}:{line}" if line else path
        what = f"field {field!r}: " if field else ""
        seen = "" if got is None else f"; got {_show(got)}"
        super().__init__(f"{where}: {what}expected {expected}{seen}")
        self.path = path
        self.line = line
        self.field = field
        self.expected = expected
        self.got = got


class InconsistentHistory(BadHistory):
    """Every line is well formed but the lines contradict each other (e.g. a confirm of a
    message that was never published, a fault ended that never started): the producer
    recorded something that cannot have happened."""


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
