"""Counting a fuzz run: inputs per class, endings per close code, tracebacks, the inputs
answered wrongly, the well-behaved client's messages, and the slowest input of each
class."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from harness.hostile.expect import HostileInput
from harness.hostile.judge import Answer

KEPT_FINDINGS = 50  # findings kept whole (all are counted)


def outcome(answer: Answer, closed: bool) -> str:
    """How a connection ended, for the counts: its close code, or what else happened."""
    close = answer.connection_close
    if close is not None:
        return f"connection.close {close.code}"
    channel = [c.code for c in answer.closes]
    if answer.header:
        return "protocol header"
    if channel:
        return "channel.close " + ",".join(map(str, channel))
    return "no close, hung up" if closed else "no close, left open"


@dataclass
class Finding:
    hostile: HostileInput
    problems: list[str]
    traceback: str = ""


@dataclass
class Tally:
    inputs: int = 0
    by_class: Counter[str] = field(default_factory=Counter)
    by_outcome: Counter[str] = field(default_factory=Counter)
    tracebacks: Counter[str] = field(default_factory=Counter)  # by exception line
    problems: int = 0  # inputs whose answer was wrong (tracebacks included)
    findings: list[Finding] = field(default_factory=list)  # the first of them
    polite_published: int = 0
    polite_confirmed: int = 0
    polite_delivered: int = 0
    polite_problems: list[str] = field(default_factory=list)
    slowest: dict[str, tuple[float, int]] = field(default_factory=dict)  # class: (s, index)

    def add(self, other: Tally) -> None:
        self.inputs += other.inputs
        self.by_class.update(other.by_class)
        self.by_outcome.update(other.by_outcome)
        self.tracebacks.update(other.tracebacks)
        self.problems += other.problems
        self.findings += other.findings[: max(0, KEPT_FINDINGS - len(self.findings))]
        self.polite_published += other.polite_published
        self.polite_confirmed += other.polite_confirmed
        self.polite_delivered += other.polite_delivered
        self.polite_problems += other.polite_problems
        for kind, slow in other.slowest.items():
            if slow > self.slowest.get(kind, (0.0, 0)):
                self.slowest[kind] = slow


def describe(findings: list[Finding], limit: int = 10) -> str:
    """Findings as a failure message: each input's class, seed and index (to replay it
    with scripts/fuzz-hostile --seed S --replay I), its problems and traceback."""
    parts = []
    for finding in findings[:limit]:
        hostile = finding.hostile
        parts.append(f"{hostile.label}: expected {hostile.expect.ending} "
                     f"{hostile.expect.code or ''} {hostile.expect.text!r}\n  "
                     + "\n  ".join(finding.problems)
                     + (f"\n{finding.traceback}" if finding.traceback else ""))
    return "\n".join(parts)


def exception_line(text: str) -> str:
    """A traceback's last line: the exception and its message."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else text


