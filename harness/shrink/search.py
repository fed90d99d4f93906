"""The shrinking loop: greedy, in passes, every candidate judged by a full replay.

Each pass tries, in order, the candidates of one kind (`harness.shrink.schedule`):
whole windows dropped (each window alone first), single steps dropped, windows
shortened. The first candidate of a batch that still fails the same way becomes the
schedule to shrink, and that kind is tried again on it; when none of a kind fails, the
next kind is tried. When no kind makes progress, the windows are moved together and
the fault phase cut after the last one. Passes repeat until a whole pass changes
nothing or the replay budget is spent; the result is always a schedule that was seen
to fail (the one replayed first, at worst).

The judge replays a batch of candidates (side by side when it can) and says which
failed; the loop knows nothing of clusters, so its tests judge with a predicate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from harness.shrink.schedule import Schedule, compacted, shortened, without_steps, without_windows

Judge = Callable[[Sequence[Schedule]], Sequence[bool]]
_KINDS: tuple[tuple[str, Callable[[Schedule], list[Schedule]]], ...] = (
    ("drop windows", without_windows), ("drop steps", without_steps),
    ("shorten windows", shortened))


@dataclass
class Attempt:
    kind: str
    schedule: Schedule
    failed: bool


@dataclass
class Outcome:
    best: Schedule
    attempts: list[Attempt] = field(default_factory=list)
    exhausted: bool = False  # the budget ran out before a pass changed nothing

    @property
    def replays(self) -> int:
        return len(self.attempts)


def shrink(start: Schedule, judge: Judge, budget: int, batch: int = 1) -> Outcome:
    """Shrink ``start``, which is known to fail, with at most ``budget`` replays of
    at most ``batch`` candidates at a time."""
    outcome = Outcome(start)
    seen = {start.key}
    changed = True
    while changed:
        changed = False
        for kind, candidates_of in _KINDS:
            while True:
                found = _first_failing(outcome, kind, candidates_of(outcome.best), seen,
                                       judge, budget, batch)
                if found is None:
                    break
                outcome.best, changed = found, True
            if outcome.exhausted:
                return outcome
        packed = compacted(outcome.best)
        if packed is not None:
            found = _first_failing(outcome, "compact", [packed], seen, judge, budget, batch)
            if found is not None:
                outcome.best, changed = found, True
        if outcome.exhausted:
            return outcome
    return outcome


def _first_failing(outcome: Outcome, kind: str, candidates: list[Schedule],
                   seen: set[str], judge: Judge, budget: int,
                   batch: int) -> Schedule | None:
    fresh = list({c.key: c for c in candidates if c.key not in seen}.values())
    while fresh:
        left = budget - outcome.replays
        if left <= 0:
            outcome.exhausted = True
            return None
        now, fresh = fresh[:min(batch, left)], fresh[min(batch, left):]
        seen.update(c.key for c in now)
        verdicts = judge(now)
        outcome.attempts.extend(Attempt(kind, c, bool(v)) for c, v in zip(now, verdicts,
                                                                        strict=True))
        for candidate, failed in zip(now, verdicts, strict=True):
            if failed:
                return candidate
    return None
