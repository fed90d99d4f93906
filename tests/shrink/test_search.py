"""The shrinking loop, judged by predicates instead of replays: it keeps what the
failure needs, drops the rest, never returns a schedule that was not seen to fail, and
keeps to its budget and batch size."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from faults.nemesis import HEAL, Op, Step
from harness.shrink.schedule import GAP, Schedule
from harness.shrink.search import shrink
from tests.examples import examples


def kill(node: str) -> Op:
    return Op("kill", {"nodes": [node]})


START = Schedule(tuple(Step(at, op) for at, op in [
    (4.0, kill("n1")), (10.0, Op(HEAL)), (16.0, kill("n2")), (24.0, Op(HEAL)),
    (30.0, Op("partition", {"kind": "halves"})), (38.0, Op(HEAL)), (44.0, kill("n3")),
    (50.0, Op(HEAL))]), 60.0)


class Judge:
    """Fails a schedule when ``predicate`` holds; remembers every batch."""

    def __init__(self, predicate: Callable[[Schedule], bool]) -> None:
        self.predicate = predicate
        self.batches: list[list[Schedule]] = []

    def __call__(self, batch: Sequence[Schedule]) -> list[bool]:
        self.batches.append(list(batch))
        return [self.predicate(s) for s in batch]

    @property
    def judged(self) -> list[Schedule]:
        return [s for batch in self.batches for s in batch]


def killed(schedule: Schedule) -> set[str]:
    return {s.op.value["nodes"][0] for s in schedule.steps if s.op.f == "kill"}


def test_a_failure_that_needs_one_kill_shrinks_to_that_kill_alone_and_early() -> None:
    judge = Judge(lambda s: "n2" in killed(s))
    outcome = shrink(START, judge, budget=40)
    assert [(s.at, s.op) for s in outcome.best.steps] == [(GAP, kill("n2"))]
    assert outcome.best.faults == 2 * GAP
    assert not outcome.exhausted
    keys = [s.key for s in judge.judged]
    assert len(keys) == len(set(keys)) == outcome.replays  # nothing judged twice


def test_a_failure_that_needs_two_faults_keeps_both_and_their_order() -> None:
    def needs_both(s: Schedule) -> bool:
        fs = [step.op.f for step in s.steps]
        return "partition" in fs and "n3" in killed(s) and (
            fs.index("partition") < next(i for i, step in enumerate(s.steps)
                                         if step.op.f == "kill"
                                         and step.op.value["nodes"] == ["n3"]))

    outcome = shrink(START, Judge(needs_both), budget=60)
    assert [s.op.f for s in outcome.best.steps] == ["partition", "kill"]
    assert outcome.best.fault_count == 2 < START.fault_count


def test_a_spent_budget_returns_the_best_seen_to_fail() -> None:
    judge = Judge(lambda s: "n2" in killed(s))
    outcome = shrink(START, judge, budget=3)
    assert outcome.exhausted and outcome.replays == 3
    # alone: n1's window (passes), then n2's (fails): the third replay tried shrinking it
    assert [s.op for s in outcome.best.steps] == [kill("n2"), Op(HEAL)]
    assert shrink(START, judge, budget=0).best == START


def test_batches_hold_at_most_the_batch_size_and_the_first_failing_one_wins() -> None:
    judge = Judge(lambda s: bool(killed(s) & {"n2", "n3"}))
    outcome = shrink(START, judge, budget=40, batch=3)
    assert all(len(batch) <= 3 for batch in judge.batches)
    assert len(judge.batches[0]) == 3
    # n2's window comes before n3's among the candidates: it is the one kept
    assert killed(outcome.best) == {"n2"}


@given(st.sets(st.integers(0, len(START.steps) - 1), min_size=1, max_size=3),
       st.integers(1, 4))
@settings(max_examples=examples(60), deadline=None)
def test_the_result_always_failed_and_holds_every_step_the_failure_needs(
    needed: set[int], batch: int,
) -> None:
    ops = [START.steps[i].op for i in sorted(needed)]

    def fails(s: Schedule) -> bool:
        have = [id(step.op) for step in s.steps]  # equal heals are still different steps
        return all(id(op) in have for op in ops)

    judge = Judge(fails)
    outcome = shrink(START, judge, budget=200, batch=batch)
    assert fails(outcome.best)
    assert outcome.best == START or any(s == outcome.best for s in judge.judged)
    assert len(outcome.best.steps) == len(ops)  # nothing it does not need


def test_a_failure_that_needs_no_fault_shrinks_to_no_step_even_when_a_bigger_one_won() -> None:
    # every schedule fails: the first candidate tried wins its batch, yet the loop
    # goes on down to nothing
    outcome = shrink(START, Judge(lambda s: True), budget=40, batch=4)
    assert outcome.best == Schedule((), GAP)
