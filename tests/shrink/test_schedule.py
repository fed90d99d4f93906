"""A run's schedule as shrinking sees it: planned as the run planned it, written as a
`sequence` scenario that `mirrorchaos run` loads and that plans the same steps again,
cut into windows, and the candidates made from it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import tomli_w

from faults.nemesis import HEAL, Op, Step
from faults.nemesis.schedule import is_final
from harness.scenarios import SCENARIOS, find_scenario, plan_steps
from harness.scenarios.nemesis import every_link
from harness.shrink.schedule import (
    GAP,
    Schedule,
    compacted,
    planned,
    scenario_doc,
    scenario_of,
    shortened,
    stored_scenario,
    windows,
    without_steps,
    without_windows,
)

KILL = Op("kill", {"nodes": ["n2"]})
PARTITION = Op("partition", {"kind": "halves", "mode": "black-hole",
                             "grudge": {"n1": ["n2", "n3"]}})


def schedule(*steps: tuple[float, Op], faults: float = 30.0) -> Schedule:
    return Schedule(tuple(Step(at, op) for at, op in steps), faults)


@pytest.mark.parametrize("seed", [1, 2, 3, 40])
def test_a_mixed_schedule_written_as_a_sequence_plans_the_same_steps(
    tmp_path: Path, seed: int,
) -> None:
    mixed = SCENARIOS["mixed"]
    start = planned(mixed, seed)
    assert start.fault_count >= 2  # something drawn: grudges, links, attributes
    path = tmp_path / "replay.toml"
    path.write_text(tomli_w.dumps(scenario_doc(mixed, start)), encoding="utf-8")
    again = find_scenario(str(path))  # as `mirrorchaos run` loads it
    # any seed: a sequence draws nothing
    steps = plan_steps(again, seed + 1000, *every_link(again))
    assert [(round(s.at, 3), s.op) for s in steps if not is_final(s.op)] == [
        (round(s.at, 3), s.op) for s in start.steps]
    assert again.phases == mixed.phases and again.workload == mixed.workload
    assert again.policy == mixed.policy and again.nemesis.package == "sequence"


def test_the_rest_of_a_stored_scenario_survives_the_round_trip() -> None:
    broken = dataclasses.replace(
        SCENARIOS["consume-survives-kill"], name="broken", description="a file's",
        node_args=("--break", "unflagged-redelivery"), policy={}, nodes=4, tick=0.25,
        partition_handling="autoheal")
    stored = stored_scenario(dataclasses.asdict(broken), "config.json")
    assert stored == broken
    start = planned(broken, 9)
    again = scenario_of(scenario_doc(broken, start), "shrunk.toml")
    assert dataclasses.replace(again, nemesis=broken.nemesis) == broken
    assert [s.op.f for s in start.steps] == ["kill", HEAL, "kill", HEAL]


def test_windows_close_where_a_fault_ends_and_observations_stay_inside() -> None:
    gauntlet = planned(SCENARIOS["gauntlet"], 0)
    parts = windows(gauntlet.steps)
    assert sum(len(p) for p in parts) == len(gauntlet.steps)
    for part in parts[:-1]:
        assert part[-1].op.f in (HEAL, "sync-queue", "start", "resume")
    observed = next(p for p in parts if any(s.op.f == "cluster-state" for s in p))
    assert [s.op.f for s in observed] == ["partition", "cluster-state", HEAL]


def test_each_window_alone_comes_before_each_one_dropped() -> None:
    start = schedule((1, KILL), (3, Op(HEAL)), (5, PARTITION), (8, Op(HEAL)),
                     (10, KILL), (11, Op(HEAL)))
    got = [[s.at for s in c.steps] for c in without_windows(start)]
    assert got == [[1, 3], [5, 8], [10, 11], [5, 8, 10, 11], [1, 3, 10, 11], [1, 3, 5, 8]]
    two = schedule((1, KILL), (3, Op(HEAL)), (5, PARTITION))
    assert [[s.at for s in c.steps] for c in without_windows(two)] == [[1, 3], [5]]
    assert without_windows(schedule((1, KILL), (3, Op(HEAL)))) == []


def test_dropping_steps_one_at_a_time() -> None:
    start = schedule((1, KILL), (3, Op(HEAL)), (5, PARTITION))
    assert [[s.op.f for s in c.steps] for c in without_steps(start)] == [
        [HEAL, "partition"], ["kill", "partition"], ["kill", HEAL]]
    assert without_steps(schedule((1, KILL))) == [schedule()]
    assert without_steps(schedule()) == []


def test_shortening_pulls_a_window_towards_its_start_but_not_below_the_gap() -> None:
    start = schedule((2, KILL), (10, Op(HEAL)), (12, PARTITION), (12 + GAP, Op(HEAL)))
    (short,) = shortened(start)  # the second window is already short
    assert [s.at for s in short.steps] == [2, 6, 12, 12 + GAP]
    shortest = schedule((2, KILL), (3.5, Op(HEAL)))
    (once,) = shortened(shortest)
    assert [s.at for s in once.steps] == [2, 2 + GAP]
    assert shortened(once) == []


def test_compacting_moves_windows_together_and_ends_the_fault_phase_after_them() -> None:
    start = schedule((7, KILL), (10, Op(HEAL)), (20, PARTITION), (24, Op(HEAL)), faults=60)
    packed = compacted(start)
    assert packed is not None
    assert [s.at for s in packed.steps] == [GAP, GAP + 3, 2 * GAP + 3, 2 * GAP + 7]
    assert packed.faults == 3 * GAP + 7
    assert compacted(packed) is None
    assert compacted(schedule(faults=60)) == schedule(faults=GAP)
    assert compacted(schedule(faults=GAP)) is None


def test_fault_count_leaves_out_steps_that_only_end_faults() -> None:
    start = schedule((1, KILL), (2, Op("start", {"nodes": ["n2"]})), (3, PARTITION),
                     (4, Op("cluster-state")), (5, Op(HEAL)), (6, Op("restart", {})))
    assert start.fault_count == 3


def test_a_candidate_the_loader_refuses_is_refused_before_a_replay() -> None:
    bad = schedule((1, Op("kill-everything")))
    with pytest.raises(ValueError, match="kill-everything"):
        scenario_of(scenario_doc(SCENARIOS["smoke"], bad), "candidate.toml")


def test_a_schedule_with_no_step_left_is_a_scenario_without_faults() -> None:
    smoke = SCENARIOS["consume-survives-kill"]
    again = scenario_of(scenario_doc(smoke, schedule(faults=4.0)), "shrunk.toml")
    assert again.nemesis.package == "none" and again.phases.faults == 4.0
    assert [s.op.f for s in plan_steps(again, 1, *every_link(again))] == [HEAL]
