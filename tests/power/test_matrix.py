"""The detection matrix's decisions: what counts as a catch, a miss, and the correct
broker passing; the campaign's early stop and time to detection; the outputs."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from rich.console import Console

from harness.power.campaign import PowerPlan, broken, recheck, run_power
from harness.power.matrix import CORRECT, matrix_from_json
from harness.run.config import RunOptions
from harness.run.outcome import RunOutcome
from harness.scenarios.model import Scenario
from reports.power.render import render_power, write_power_html

A, B = Scenario("a", "first"), Scenario("b", "second")


def fake_runs(verdicts: dict[tuple[str, str], tuple[bool | str, list[str]]], calls: list):
    """A runner whose run of (bug, scenario) ends with the given validity and violation
    kinds; the bug is read back from the node arguments the campaign passed."""

    def runner(scenario: Scenario, options: RunOptions) -> RunOutcome:
        args = scenario.node_args
        bug = args[args.index("--break") + 1] if "--break" in args else CORRECT
        calls.append((bug, scenario.name, options.seed))
        valid, kinds = verdicts.get((bug, scenario.name), (True, []))
        results = {"valid": valid, "violations": [{"kind": k} for k in kinds], "caveats": []}
        code = 0 if valid is True else 1 if valid is False else 2
        return RunOutcome(options.store / scenario.name, code, results)

    return runner


def plan(tmp_path: Path, **kw) -> PowerPlan:
    return PowerPlan([A, B], (7, 11), {"early-confirm": ("lost",), "gm-reorder": ("reordered",)},
                     tmp_path, **kw)


def test_a_bug_is_caught_only_with_a_kind_its_line_names_and_stops_at_its_first_catch(tmp_path):
    calls: list = []
    runner = fake_runs({("early-confirm", "a"): (False, ["lost", "stalled"]),
                        ("gm-reorder", "a"): (False, ["duplicate"]),
                        ("gm-reorder", "b"): (True, [])}, calls)
    matrix = run_power(plan(tmp_path), runner=runner)
    assert ("early-confirm", "b", 7) not in calls  # caught by a: b is not run
    assert ("gm-reorder", "b", 7) in calls  # invalid for another reason is no catch
    assert matrix.passed("early-confirm", 7) and matrix.passed("early-confirm", 11)
    assert not matrix.passed("gm-reorder", 7)
    assert matrix.passed(CORRECT, 7)
    assert matrix.missed() == [("gm-reorder", 7), ("gm-reorder", 11)]
    first = matrix.outcome("early-confirm", 7)
    assert first is not None and first.caught and first.detected_after is not None


def test_the_correct_broker_fails_the_matrix_when_any_run_is_not_valid(tmp_path):
    runner = fake_runs({(CORRECT, "b"): ("unknown", []),
                        ("early-confirm", "a"): (False, ["lost"]),
                        ("gm-reorder", "b"): (False, ["reordered"])}, [])
    matrix = run_power(plan(tmp_path), runner=runner)
    assert not matrix.passed(CORRECT, 7)
    assert (CORRECT, 7) in matrix.missed() and (CORRECT, 11) in matrix.missed()
    cell = matrix.outcome(CORRECT, 7)
    assert cell is not None and cell.scenario == "b" and cell.verdict == "unknown"


def test_full_runs_every_scenario_and_the_time_to_detection_adds_up_the_runs_before(tmp_path):
    calls: list = []
    runner = fake_runs({("early-confirm", "b"): (False, ["lost"])}, calls)
    matrix = run_power(plan(tmp_path, full=True, correct=False), runner=runner)
    assert len(calls) == 2 * 2 * 2  # every bug, seed and scenario
    caught = matrix.outcome("early-confirm", 7)
    assert caught is not None and caught.scenario == "b"
    runs = matrix.of("early-confirm", 7)
    assert caught.detected_after is not None
    assert caught.detected_after >= runs[0].seconds


def test_the_matrix_survives_json_and_renders_its_misses(tmp_path):
    runner = fake_runs({("early-confirm", "a"): (False, ["lost"])}, [])
    matrix = run_power(plan(tmp_path), runner=runner)
    again = matrix_from_json(json.loads(json.dumps(matrix.to_json())))
    assert again.missed() == matrix.missed() and again.cells == matrix.cells
    console = Console(record=True, width=200)
    render_power(again, console)
    text = console.export_text()
    assert "MISSED" in text and "caught by a" in text
    page = write_power_html(again, tmp_path).read_text(encoding="utf-8")
    assert "Detection matrix" in page and "MISSED" in page


def test_a_broken_scenario_starts_its_nodes_with_the_switch():
    assert broken(Scenario("s", "d", node_args=("--tick", "1")), "gm-reorder").node_args == (
        "--tick", "1", "--break", "gm-reorder")


def test_a_recheck_judges_the_stored_runs_again(tmp_path):
    runner = fake_runs({("early-confirm", "a"): (True, []), ("early-confirm", "b"): (True, [])},
                       [])
    matrix = run_power(plan(tmp_path, correct=False), runner=runner)
    assert not matrix.passed("early-confirm", 7)
    stricter = {"valid": False, "violations": [{"kind": "lost"}], "caveats": []}
    again = recheck(matrix, lambda run_dir: stricter if run_dir.name == "b" else {"valid": True})
    caught = again.outcome("early-confirm", 7)
    assert caught is not None and caught.scenario == "b" and caught.caught
    first = again.of("early-confirm", 7)[0]
    assert caught.detected_after == round(first.seconds + caught.seconds, 1)
    assert again.passed("early-confirm", 11) and not again.passed("gm-reorder", 7)


def test_a_campaign_without_the_correct_broker_judges_only_the_bugs(tmp_path):
    runner = fake_runs({("early-confirm", "a"): (False, ["lost"]),
                        ("gm-reorder", "a"): (False, ["reordered"])}, [])
    matrix = run_power(plan(tmp_path, correct=False), runner=runner)
    assert CORRECT not in matrix.targets and matrix.missed() == []
    again = matrix_from_json(json.loads(json.dumps(matrix.to_json())))
    assert again.targets == matrix.targets
    console = Console(record=True, width=200)
    render_power(again, console)
    assert "correct broker not run" in console.export_text()


def test_an_interrupted_run_stops_the_campaign_keeping_its_cell(tmp_path):
    calls: list = []
    cells: list = []

    def runner(scenario: Scenario, options: RunOptions) -> RunOutcome:
        calls.append(scenario.name)
        return RunOutcome(options.store / scenario.name, 2, {"valid": "unknown"},
                          "interrupted", interrupted=True)

    with pytest.raises(KeyboardInterrupt):
        run_power(plan(tmp_path), lambda _matrix, cell: cells.append(cell), runner=runner)
    assert calls == ["a"] and [c.verdict for c in cells] == ["unknown"]


class ScriptedRuns:
    """`fake_runs` for worker processes (a runner they can unpickle): the process that
    ran each run is in its run directory's name."""

    def __init__(self, verdicts: dict[tuple[str, str], tuple[bool | str, list[str]]]) -> None:
        self.verdicts = verdicts

    def __call__(self, scenario: Scenario, options: RunOptions) -> RunOutcome:
        args = scenario.node_args
        bug = args[args.index("--break") + 1] if "--break" in args else CORRECT
        valid, kinds = self.verdicts.get((bug, scenario.name), (True, []))
        results = {"valid": valid, "violations": [{"kind": k} for k in kinds], "caveats": []}
        if valid == "interrupted":
            return RunOutcome(options.store / str(os.getpid()), 2, {"valid": "unknown"},
                              "interrupted", interrupted=True)
        code = 0 if valid is True else 1 if valid is False else 2
        return RunOutcome(options.store / str(os.getpid()), code, results)


def test_jobs_run_pairs_in_worker_processes_with_the_same_decisions(tmp_path):
    verdicts: dict[tuple[str, str], tuple[bool | str, list[str]]] = {
        ("early-confirm", "a"): (False, ["lost"]), ("gm-reorder", "b"): (False, ["reordered"])}
    alone = run_power(plan(tmp_path), runner=ScriptedRuns(verdicts))
    side_by_side = run_power(plan(tmp_path), runner=ScriptedRuns(verdicts), jobs=2)

    def decisions(matrix):
        return sorted((c.target, c.seed, c.scenario, c.verdict, c.caught) for c in matrix.cells)

    assert decisions(side_by_side) == decisions(alone)
    assert side_by_side.missed() == alone.missed() == []
    assert {Path(c.run_dir).name for c in alone.cells} == {str(os.getpid())}
    assert str(os.getpid()) not in {Path(c.run_dir).name for c in side_by_side.cells}


def test_an_interrupted_run_stops_a_campaign_of_several_jobs(tmp_path):
    runner = ScriptedRuns({(CORRECT, "a"): ("interrupted", [])})
    cells: list = []
    with pytest.raises(KeyboardInterrupt):
        run_power(plan(tmp_path), lambda _matrix, cell: cells.append(cell), runner=runner,
                  jobs=2)
    assert (CORRECT, "unknown") in {(c.target, c.verdict) for c in cells}


class CtrlC(ScriptedRuns):
    """`ScriptedRuns` as a Ctrl-C on the terminal goes: the campaign's own process is
    interrupted along with the interrupted runs. Every run is written down in a file
    with the worker that started it; runs not interrupted take a tenth of a second."""

    def __init__(self, verdicts: dict[tuple[str, str], tuple[bool | str, list[str]]],
                 log: Path) -> None:
        super().__init__(verdicts)
        self.log = log

    def __call__(self, scenario: Scenario, options: RunOptions) -> RunOutcome:
        outcome = super().__call__(scenario, options)
        with self.log.open("a", encoding="utf-8") as log:
            log.write(f"{os.getpid()} {'interrupted' if outcome.interrupted else 'ran'}\n")
        if outcome.interrupted:
            os.kill(os.getppid(), signal.SIGINT)
        else:
            time.sleep(0.1)
        return outcome


def test_a_ctrl_c_starts_no_more_runs_in_a_worker_whose_run_it_interrupted(tmp_path):
    log = tmp_path / "runs.log"
    runner = CtrlC({(CORRECT, "a"): ("interrupted", [])}, log)
    with pytest.raises(KeyboardInterrupt):
        run_power(plan(tmp_path), runner=runner, jobs=2)
    runs = [line.split() for line in log.read_text(encoding="utf-8").splitlines()]
    interrupted = {pid for pid, what in runs if what == "interrupted"}
    assert interrupted
    for worker in interrupted:
        of_worker = [what for pid, what in runs if pid == worker]
        assert of_worker.index("interrupted") == len(of_worker) - 1, runs
