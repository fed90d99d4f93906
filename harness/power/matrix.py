"""The detection matrix: which campaign run caught which planted bug, on which seed.

A *target* is the correct broker (``CORRECT``) or one planted bug (a node started with
``--break NAME``; the catalogue is docs/planted-bugs.md). A bug is *caught* on a seed
when one of that seed's runs comes out invalid with a violation kind the bug's
catalogue line names: invalid for another reason is reported, but is not the catch
the catalogue promises. The correct broker must come out valid in every run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

CORRECT = "correct"


@dataclass(frozen=True)
class Cell:
    """One run of the campaign: a target, a seed, a scenario and what the check said."""

    target: str
    seed: int
    scenario: str
    verdict: str  # valid | invalid | unknown
    exit_code: int
    violations: tuple[str, ...]  # violation kinds found, sorted
    caveats: tuple[str, ...]
    expected: tuple[str, ...]  # the kinds that count as a catch (empty: the correct broker)
    seconds: float  # the run's wall time
    detected_after: float | None  # seconds of this target's campaign until this run caught it
    run_dir: str
    error: str | None = None

    @property
    def caught(self) -> bool:
        return self.verdict == "invalid" and bool(set(self.violations) & set(self.expected))

    @property
    def passed(self) -> bool:
        """For the correct broker: valid. For a bug: caught."""
        return self.verdict == "valid" if self.target == CORRECT else self.caught

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "caught": self.caught}


@dataclass
class Matrix:
    seeds: tuple[int, ...]
    scenarios: tuple[str, ...]
    expected: Mapping[str, tuple[str, ...]]  # bug -> violation kinds that catch it
    cells: list[Cell] = field(default_factory=list)
    correct: bool = True  # whether the campaign runs the correct broker too

    @property
    def targets(self) -> list[str]:
        return [CORRECT, *self.expected] if self.correct else list(self.expected)

    def of(self, target: str, seed: int) -> list[Cell]:
        return [c for c in self.cells if c.target == target and c.seed == seed]

    def outcome(self, target: str, seed: int) -> Cell | None:
        """The cell that decides the target on the seed: for a bug its first catch, else
        its last run; for the correct broker its first run that is not valid, else its
        last run. None when nothing ran."""
        cells = self.of(target, seed)
        deciding = next((c for c in cells if (c.caught if target != CORRECT
                                              else c.verdict != "valid")), None)
        return deciding or (cells[-1] if cells else None)

    def passed(self, target: str, seed: int) -> bool:
        cells = self.of(target, seed)
        if target == CORRECT:
            return len(cells) == len(self.scenarios) and all(c.passed for c in cells)
        return any(c.caught for c in cells)

    def missed(self) -> list[tuple[str, int]]:
        """(target, seed) pairs that failed: a bug not caught, the correct broker not valid."""
        return [(t, s) for t in self.targets for s in self.seeds if not self.passed(t, s)]

    def to_json(self) -> dict[str, Any]:
        return {
            "seeds": list(self.seeds), "scenarios": list(self.scenarios),
            "correct": self.correct,
            "expected": {bug: list(kinds) for bug, kinds in self.expected.items()},
            "passed": not self.missed(),
            "missed": [{"target": t, "seed": s} for t, s in self.missed()],
            "summary": [self._summary(t) for t in self.targets],
            "cells": [c.to_json() for c in self.cells],
        }

    def _summary(self, target: str) -> dict[str, Any]:
        per_seed = {}
        for seed in self.seeds:
            cell = self.outcome(target, seed)
            per_seed[str(seed)] = None if cell is None else {
                "passed": self.passed(target, seed), "scenario": cell.scenario,
                "verdict": cell.verdict, "violations": list(cell.violations),
                "detected_after": cell.detected_after}
        return {"target": target, "expected": list(self.expected.get(target, ())),
                "seeds": per_seed}


def matrix_from_json(doc: Mapping[str, Any]) -> Matrix:
    """A matrix as `Matrix.to_json` wrote it (for rendering a stored campaign again)."""
    matrix = Matrix(tuple(doc["seeds"]), tuple(doc["scenarios"]),
                    {bug: tuple(kinds) for bug, kinds in doc["expected"].items()},
                    correct=bool(doc.get("correct", True)))
    matrix.cells.extend(_cell(c) for c in doc["cells"])
    return matrix


def _cell(doc: Mapping[str, Any]) -> Cell:
    fields = {k: v for k, v in doc.items() if k != "caught"}
    for key in ("violations", "caveats", "expected"):
        fields[key] = tuple(fields[key])
    return Cell(**fields)


def kinds(anomalies: Iterable[Mapping[str, Any]]) -> tuple[str, ...]:
    return tuple(sorted({str(a.get("kind")) for a in anomalies}))
