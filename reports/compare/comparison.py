"""The comparison of runs of the same scenarios and seeds on different targets (brokers):
a pure function of their results.json documents, so it is the same whether the runs were
just made or read back from the store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, get_args

from harness.checker import EXIT_UNKNOWN, EXIT_VALID, Validity
from harness.run.outcome import EXIT_HARNESS_FAILURE
from harness.scenarios.model import TargetName
from reports.describe import verdict_word

COMPARE_FORMAT = "mirrorchaos-compare"
COMPARE_VERSION = 1
TARGETS: tuple[str, ...] = get_args(TargetName)
# A results.json without "target" comes from before there was a choice: our own broker.
DEFAULT_TARGET = TARGETS[0]


@dataclass(frozen=True)
class RunRecord:
    """One run as the comparison takes it: what pairs it with the other targets' runs
    (scenario and seed), its target, its results.json document, where it is stored (None
    when it never got a directory) and how long it took (None when read back)."""

    scenario: str
    seed: int
    target: str
    results: Mapping[str, Any]
    run_dir: Path | None
    seconds: float | None = None


@dataclass(frozen=True)
class TargetRun:
    """One target's figures on a row, all taken from its results.json."""

    target: str
    valid: Validity
    violations: dict[str, int]  # kind -> messages
    # kind -> one message of it and why, e.g. "p1-3: confirmed, never delivered"
    examples: dict[str, str]
    caveats: int  # messages whose anomaly a documented caveat explains
    confirmed: int | None
    confirm_p50_ms: float | None
    confirm_p99_ms: float | None
    confirms_per_s: float | None
    run_dir: str | None
    seconds: float | None
    error: str | None  # why there is no verdict, or how the harness failed
    harness_failure: bool

    @property
    def verdict(self) -> str:
        return verdict_word(self.valid)

    @property
    def has_verdict(self) -> bool:
        return isinstance(self.valid, bool)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, **asdict(self)}


@dataclass(frozen=True)
class Row:
    scenario: str
    seed: int
    runs: dict[str, TargetRun]  # by target, in the comparison's order
    differs: bool  # the verdicts differ
    reason: str | None  # what differs, from the data; None when nothing does

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "seed": self.seed, "differs": self.differs,
                "reason": self.reason,
                "runs": {target: run.to_json() for target, run in self.runs.items()}}


@dataclass(frozen=True)
class Comparison:
    targets: tuple[str, ...]
    rows: list[Row] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """255 when the harness failed in a run, else 2 when a run has no verdict, else 0
        (an invalid run is a finding of the comparison, not a failure of it)."""
        runs = [run for row in self.rows for run in row.runs.values()]
        if any(run.harness_failure for run in runs):
            return EXIT_HARNESS_FAILURE
        if not all(run.has_verdict for run in runs):
            return EXIT_UNKNOWN
        return EXIT_VALID

    def to_json(self) -> dict[str, Any]:
        return {"format": COMPARE_FORMAT, "version": COMPARE_VERSION,
                "targets": list(self.targets), "exit_code": self.exit_code,
                "rows": [row.to_json() for row in self.rows]}


class DuplicateRun(ValueError):
    """Two runs of the same scenario and seed on the same target: nothing says which
    one to compare."""


def compare(records: Iterable[RunRecord], targets: Sequence[str] | None = None) -> Comparison:
    """One row per scenario and seed, in the order first seen, with a column group per
    target (``targets``, by default the targets the records have, known ones first); a
    target without a run of the row's scenario and seed has no verdict there."""
    records = list(records)
    order = tuple(targets) if targets is not None else _targets_of(records)
    paired: dict[tuple[str, int], dict[str, RunRecord]] = {}
    for record in records:
        row = paired.setdefault((record.scenario, record.seed), {})
        if record.target in row:
            raise DuplicateRun(f"{row[record.target].run_dir} and {record.run_dir} are both "
                               f"runs of {record.scenario} seed {record.seed} on "
                               f"{record.target}")
        row[record.target] = record
    return Comparison(order, [_row(scenario, seed, runs, order)
                              for (scenario, seed), runs in paired.items()])


def target_run(record: RunRecord) -> TargetRun:
    results = record.results
    violations: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for anomaly in results.get("violations") or []:
        kind = str(anomaly.get("kind"))
        violations[kind] += int(anomaly.get("count", 0))
        messages = anomaly.get("messages") or []
        example = f"{messages[0]}: " if messages else ""
        examples.setdefault(kind, example + str(anomaly.get("explanation", "")))
    latency = results.get("latency_ms") or {}
    why = [str(results[key]) for key in ("error", "harness_error") if results.get(key)]
    return TargetRun(
        target=record.target, valid=_validity(results.get("valid")),
        violations=dict(violations), examples=examples,
        caveats=sum(int(a.get("count", 0)) for a in results.get("caveats") or []),
        confirmed=(results.get("counts") or {}).get("confirmed"),
        confirm_p50_ms=latency.get("confirm_p50"), confirm_p99_ms=latency.get("confirm_p99"),
        confirms_per_s=(results.get("throughput") or {}).get("confirms_per_s"),
        run_dir=None if record.run_dir is None else str(record.run_dir),
        seconds=record.seconds, error="; ".join(why) or None,
        harness_failure=bool(results.get("harness_error")))


def _missing(target: str, scenario: str, seed: int) -> TargetRun:
    return TargetRun(target, "unknown", {}, {}, 0, None, None, None, None, None, None,
                     f"no run of {scenario} seed {seed} on {target}", False)


def _validity(value: object) -> Validity:
    return value if isinstance(value, bool) else "unknown"


def _targets_of(records: Sequence[RunRecord]) -> tuple[str, ...]:
    found = dict.fromkeys(record.target for record in records)
    return (*(t for t in TARGETS if t in found), *(t for t in found if t not in TARGETS))


def _row(scenario: str, seed: int, records: Mapping[str, RunRecord],
         targets: Sequence[str]) -> Row:
    runs = {t: target_run(records[t]) if t in records else _missing(t, scenario, seed)
            for t in targets}
    differs = len({run.verdict for run in runs.values()}) > 1
    reasons = [*_no_verdicts(runs.values()), *_kinds_not_shared(runs.values())]
    if differs and not reasons:  # e.g. a checker said invalid without naming a violation
        reasons.append("the verdicts differ with the same violation kinds")
    return Row(scenario, seed, runs, differs, "; ".join(reasons) or None)


def _no_verdicts(runs: Iterable[TargetRun]) -> list[str]:
    return [f"the {run.target} run has no verdict: {run.error or 'no reason recorded'}"
            for run in runs if not run.has_verdict]


def _kinds_not_shared(runs: Iterable[TargetRun]) -> list[str]:
    """Each violation kind that some target's run found and another's did not, with an
    example; only runs with a verdict count, as a run without one was not fully
    checked."""
    checked = [run for run in runs if run.has_verdict]
    reasons = []
    for run in checked:
        for kind, example in run.examples.items():
            without = [other.target for other in checked if kind not in other.violations]
            if without:
                reasons.append(f"{kind} on {run.target}, not on {', '.join(without)} "
                               f"(e.g. {example})")
    return reasons
