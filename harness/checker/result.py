"""What a checker returns: a verdict, counts, and anomalies with their fault context."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Validity = bool | Literal["unknown"]

EXIT_VALID = 0
EXIT_INVALID = 1
EXIT_UNKNOWN = 2
EXIT_BAD_INPUT = 254


@dataclass(frozen=True)
class Fault:
    """A fault from the harness's record, as an anomaly's context."""

    id: str
    kind: str
    targets: tuple[str, ...]
    start: float
    end: float | None  # None: never healed
    applied: bool  # False when the nemesis reported it definitely did not take effect
    heal_failed: bool = False
    detail: Mapping[str, Any] = field(default_factory=dict)

    def overlaps(self, begin: float, until: float) -> bool:
        """In force at some moment after ``begin`` and not after ``until``."""
        return self.start <= until and (self.end is None or self.end > begin)

    def to_json(self, t0: float) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind, "targets": list(self.targets),
                               "start": round(self.start - t0, 6),
                               "end": None if self.end is None else round(self.end - t0, 6)}
        if not self.applied:
            out["applied"] = False
        if self.heal_failed:
            out["heal_failed"] = True
        out.update(self.detail)
        return out


@dataclass
class Anomaly:
    """One kind of misbehaviour seen for ``messages`` in the same circumstances.

    ``caveat`` names the documented design rule that explains it; ``None`` makes it a
    violation.
    """

    kind: str  # lost | unexpected | duplicate | reordered
    messages: list[str]
    explanation: str
    faults: tuple[Fault, ...] = ()
    queue: str | None = None
    caveat: str | None = None

    def to_json(self, t0: float) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.caveat is not None:
            out["caveat"] = self.caveat
        if self.queue is not None:
            out["queue"] = self.queue
        out.update(messages=self.messages, count=len(self.messages),
                   explanation=self.explanation,
                   faults=[f.to_json(t0) for f in self.faults])
        return out


@dataclass
class Result:
    """A checker's answer. A composed checker's result holds its parts'."""

    checker: str
    valid: Validity
    counts: dict[str, int] = field(default_factory=dict)
    violations: list[Anomaly] = field(default_factory=list)
    caveats: list[Anomaly] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    error: str | None = None  # why the verdict is unknown, or what crashed
    parts: list[Result] = field(default_factory=list)


def merge_validity(values: Iterable[Validity]) -> Validity:
    """False if anything is false (a violation seen stays a violation), else unknown if
    anything is unknown, else true."""
    merged: Validity = True
    for value in values:
        if value is False:
            return False
        if value == "unknown":
            merged = "unknown"
    return merged


def exit_code(valid: Validity) -> int:
    """Exit codes: 0 valid, 1 invalid, 2 unknown."""
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_INVALID
    return EXIT_UNKNOWN
