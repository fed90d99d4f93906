"""`mirrorchaos compare`: the comparison of hand-written results documents, its
Markdown and terminal renderings, run directories read back with --from, and the
command's runs with a stand-in for `run_scenario`."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.run.config import RunOptions
from harness.run.outcome import HarnessError, RunOutcome
from harness.scenarios import Scenario
from reports.cli import main
from reports.compare import RunRecord, compare, markdown, read_run_dir, render_comparison
from reports.compare import command as compare_module
from reports.compare.command import BadRunDir
from reports.compare.comparison import DuplicateRun


def results(valid: object = True, *, scenario: str = "smoke", seed: int = 1,
            violations: tuple[dict[str, Any], ...] = (), **extra: Any) -> dict[str, Any]:
    """A results.json document with the parts the comparison reads."""
    return {"format": "mirrorchaos-results", "version": 1, "scenario": scenario,
            "seed": seed, "valid": valid, "counts": {"confirmed": 1589, "lost": 0},
            "violations": list(violations),
            "caveats": [{"kind": "lost", "caveat": "no-ack", "messages": ["p3-1"],
                         "count": 1, "explanation": "in flight to a no-ack consumer"}],
            "latency_ms": {"confirm_p50": 6.319, "confirm_p99": 16.589},
            "throughput": {"confirms_per_s": 167.661}, **extra}


def violation(kind: str, *messages: str, why: str = "confirmed, never delivered"
              ) -> dict[str, Any]:
    return {"kind": kind, "messages": list(messages), "count": len(messages),
            "explanation": why, "faults": []}


LOST = violation("lost", "p1-3", "p1-4")


def record(target: str, doc: dict[str, Any], run_dir: str | None = None) -> RunRecord:
    return RunRecord(doc["scenario"], doc["seed"], target, doc,
                     Path(run_dir or f"/store/{doc['scenario']}/{target}"))


def write_run_dir(folder: Path, doc: dict[str, Any]) -> Path:
    folder.mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder


def test_equal_verdicts_make_a_row_that_does_not_differ() -> None:
    comparison = compare([record("mirrorchaos", results()), record("rabbitmq", results())])
    [row] = comparison.rows
    assert (row.scenario, row.seed, row.differs, row.reason) == ("smoke", 1, False, None)
    ours = row.runs["mirrorchaos"]
    assert (ours.verdict, ours.violations, ours.caveats, ours.confirmed) == (
        "VALID", {}, 1, 1589)
    assert (ours.confirm_p50_ms, ours.confirm_p99_ms, ours.confirms_per_s) == (
        6.319, 16.589, 167.661)
    assert comparison.exit_code == 0


def test_different_verdicts_give_the_kind_found_on_one_target_only_with_an_example() -> None:
    both_dup = violation("duplicate", "p2-1", why="delivered twice")
    comparison = compare([
        record("mirrorchaos", results(False, violations=(LOST, both_dup))),
        record("rabbitmq", results(False, violations=(both_dup,)))])
    [row] = comparison.rows
    assert not row.differs  # both invalid, yet a kind differs
    assert row.reason == ("lost on mirrorchaos, not on rabbitmq "
                          "(e.g. p1-3: confirmed, never delivered)")
    comparison = compare([record("mirrorchaos", results(True)),
                          record("rabbitmq", results(False, violations=(LOST, LOST)))])
    [row] = comparison.rows
    assert row.differs and row.runs["rabbitmq"].violations == {"lost": 4}
    assert row.reason is not None and row.reason.startswith("lost on rabbitmq, not on "
                                                            "mirrorchaos (e.g. p1-3")
    assert comparison.exit_code == 0  # an invalid run is a finding, not a failure


def test_a_run_without_a_verdict_is_the_reason_and_exits_2() -> None:
    comparison = compare([
        record("mirrorchaos", results(False, violations=(LOST,))),
        record("rabbitmq", results("unknown", error="no final drain recorded"))])
    [row] = comparison.rows
    assert row.differs
    # the unchecked run's missing kinds are no difference: it was not fully checked
    assert row.reason == "the rabbitmq run has no verdict: no final drain recorded"
    assert comparison.exit_code == 2


def test_a_harness_failure_exits_255() -> None:
    failed = {"scenario": "smoke", "seed": 1, "harness_error": "RuntimeError: boom"}
    comparison = compare([record("mirrorchaos", results()), record("rabbitmq", failed)])
    assert comparison.rows[0].runs["rabbitmq"].verdict == "UNKNOWN"
    assert comparison.rows[0].reason == "the rabbitmq run has no verdict: RuntimeError: boom"
    assert comparison.exit_code == 255


def test_runs_are_paired_by_scenario_and_seed() -> None:
    comparison = compare([
        record("rabbitmq", results(seed=2)),
        record("mirrorchaos", results(seed=1)),
        record("mirrorchaos", results(seed=2, scenario="mixed")),
        record("mirrorchaos", results(seed=2)),
        record("rabbitmq", results(seed=1)),
    ])
    assert comparison.targets == ("mirrorchaos", "rabbitmq")  # known order, not seen order
    assert [(r.scenario, r.seed) for r in comparison.rows] == [
        ("smoke", 2), ("smoke", 1), ("mixed", 2)]
    assert comparison.rows[0].runs["rabbitmq"].run_dir == "/store/smoke/rabbitmq"
    lonely = comparison.rows[2]
    assert lonely.runs["rabbitmq"].error == "no run of mixed seed 2 on rabbitmq"
    assert lonely.differs and comparison.exit_code == 2


def test_two_runs_of_the_same_pair_on_one_target_are_refused() -> None:
    with pytest.raises(DuplicateRun, match="/a and /b are both runs of smoke seed 1 on "
                                           "rabbitmq"):
        compare([record("rabbitmq", results(), "/a"), record("rabbitmq", results(), "/b")])


def test_markdown_has_the_table_the_runs_and_the_differences() -> None:
    comparison = compare([record("mirrorchaos", results(True)),
                          record("rabbitmq", results(False, violations=(LOST,)))])
    lines = markdown(comparison).splitlines()
    assert lines[0] == "## Comparison: mirrorchaos vs rabbitmq"
    header, align, row = lines[2:5]
    assert header.startswith("| scenario | seed | mirrorchaos verdict | mirrorchaos "
                             "violations | mirrorchaos caveats |")
    assert header.count("rabbitmq") == 7 and header.endswith("| differs |")
    assert align.count("|") == header.count("|")
    assert row == ("| smoke | 1 | VALID | none | 1 | 1589 | 6.319 | 16.589 | 167.661 "
                   "| INVALID | lost 2 | 1 | 1589 | 6.319 | 16.589 | 167.661 | yes |")
    assert "- smoke seed 1 on rabbitmq: /store/smoke/rabbitmq" in lines
    assert ("- smoke seed 1 (verdicts differ): lost on rabbitmq, not on mirrorchaos "
            "(e.g. p1-3: confirmed, never delivered)") in lines
    same = markdown(compare([record("mirrorchaos", results())]))
    assert "- no differences: the same verdict and violation kinds on every target" in same


def test_the_terminal_table_groups_by_target_when_wide_and_goes_per_row_when_narrow() -> None:
    comparison = compare([record("mirrorchaos", results(True)),
                          record("rabbitmq", results(False, violations=(LOST,)))])

    def shown(width: int) -> str:
        console = Console(record=True, width=width, file=io.StringIO())
        render_comparison(comparison, console)
        return console.export_text()

    wide = shown(240)
    # one header line names both targets: their column groups side by side
    assert any("mirrorchaos" in line and "rabbitmq" in line and "┃" in line
               for line in wide.splitlines())
    assert wide.count("confirms/s") == 2 and "smoke seed 1  verdicts differ" not in wide
    assert "smoke seed 1 on rabbitmq: /store/smoke/rabbitmq" in wide
    narrow = shown(80)
    assert "smoke seed 1  verdicts differ" in narrow
    assert all(len(line) <= 80 for line in narrow.splitlines() if "/store" not in line)
    assert "lost on rabbitmq, not on mirrorchaos" in narrow


def test_a_from_dir_is_read_by_its_results_json(tmp_path: Path) -> None:
    run = read_run_dir(write_run_dir(tmp_path / "run", results(seed=7)))
    assert (run.scenario, run.seed, run.target) == ("smoke", 7, "mirrorchaos")  # no target
    run = read_run_dir(write_run_dir(tmp_path / "rmq", results(target="rabbitmq")))
    assert run.target == "rabbitmq"
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadRunDir, match=f"^{tmp_path / 'empty'}: no results.json"):
        read_run_dir(tmp_path / "empty")
    with pytest.raises(BadRunDir, match=f"^{tmp_path / 'gone'}: not a directory"):
        read_run_dir(tmp_path / "gone")
    nameless = write_run_dir(tmp_path / "nameless", {"valid": True})
    with pytest.raises(BadRunDir, match="names no scenario and seed"):
        read_run_dir(nameless)


def test_compare_from_writes_compare_json_and_exits_with_the_comparison(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ours = write_run_dir(tmp_path / "ours", results(True, target="mirrorchaos"))
    theirs = write_run_dir(tmp_path / "theirs",
                           results(False, violations=(LOST,), target="rabbitmq"))
    store = tmp_path / "store"
    assert main(["compare", "--from", str(ours), str(theirs), "--store", str(store)]) == 0
    [written] = [p for p in (store / "compare").iterdir() if p.name != "latest"]
    assert f"stored in {written} (compare.json, compare.md)" in capsys.readouterr().err
    doc = json.loads((written / "compare.json").read_text(encoding="utf-8"))
    assert (doc["format"], doc["targets"], doc["exit_code"]) == (
        "mirrorchaos-compare", ["mirrorchaos", "rabbitmq"], 0)
    [row] = doc["rows"]
    assert row["differs"] is True and row["reason"].startswith("lost on rabbitmq")
    assert row["runs"]["rabbitmq"]["run_dir"] == str(theirs)
    assert row["runs"]["rabbitmq"]["violations"] == {"lost": 2}
    assert (written / "compare.md").read_text(encoding="utf-8") == markdown(
        compare([read_run_dir(ours), read_run_dir(theirs)]))


def test_compare_from_a_dir_without_results_names_it_and_exits_254(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ours = write_run_dir(tmp_path / "ours", results())
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    store = tmp_path / "store"
    assert main(["compare", "--from", str(ours), str(empty), "--store", str(store)]) == 254
    assert f"bad input: {empty}: no results.json" in capsys.readouterr().err
    assert not store.exists()  # nothing written for a comparison that was not made
    assert main(["compare", "smoke", "--from", str(ours)]) == 254
    assert "not both" in capsys.readouterr().err


def test_compare_runs_each_scenario_on_each_target_with_the_same_seed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[tuple[str, RunOptions]] = []

    def run_scenario(scenario: Scenario, options: RunOptions) -> RunOutcome:
        ran.append((scenario.name, options))
        run_dir = options.store / scenario.name / str(options.target)
        if options.target == "rabbitmq":
            doc = results(False, scenario=scenario.name, violations=(LOST,))
            return RunOutcome(run_dir, 1, doc)
        return RunOutcome(run_dir, 0, results(True, scenario=scenario.name))

    monkeypatch.setattr(compare_module, "run_scenario", run_scenario)
    store = tmp_path / "store"
    assert main(["compare", "smoke", "mixed", "--seed", "5", "--runtime", "docker",
                 "--time-limit", "8", "--store", str(store)]) == 0
    assert [(name, o.target) for name, o in ran] == [
        ("smoke", "mirrorchaos"), ("smoke", "rabbitmq"),
        ("mixed", "mirrorchaos"), ("mixed", "rabbitmq")]
    assert {(o.seed, o.runtime, o.time_limit, o.store) for _, o in ran} == {
        (5, "docker", 8.0, store)}
    err = capsys.readouterr().err.splitlines()
    assert "smoke on rabbitmq: seed 5, starting" in err
    [ended] = [line for line in err if line.startswith("smoke on rabbitmq: INVALID in ")]
    assert ended.endswith(f"s, {store / 'smoke' / 'rabbitmq'}")
    doc = json.loads((store / "compare" / "latest" / "compare.json").read_text("utf-8"))
    assert [(r["scenario"], r["seed"], r["differs"]) for r in doc["rows"]] == [
        ("smoke", 5, True), ("mixed", 5, True)]


def test_a_run_the_harness_could_not_start_is_a_harness_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def run_scenario(scenario: Scenario, options: RunOptions) -> RunOutcome:
        if options.target == "rabbitmq":
            raise HarnessError("no Docker engine answers")
        return RunOutcome(tmp_path / "ours", 0, results(True, scenario=scenario.name))

    monkeypatch.setattr(compare_module, "run_scenario", run_scenario)
    store = tmp_path / "store"
    assert main(["compare", "smoke", "--seed", "1", "--runtime", "docker",
                 "--store", str(store)]) == 255
    assert "smoke on rabbitmq: UNKNOWN in " in capsys.readouterr().err
    doc = json.loads((store / "compare" / "latest" / "compare.json").read_text("utf-8"))
    rabbitmq = doc["rows"][0]["runs"]["rabbitmq"]
    assert (rabbitmq["run_dir"], rabbitmq["harness_failure"]) == (None, True)
    assert doc["rows"][0]["reason"] == "the rabbitmq run has no verdict: no Docker engine answers"


def test_a_target_that_cannot_run_where_the_scenario_runs_is_refused_before_any_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[str] = []
    monkeypatch.setattr(compare_module, "run_scenario",
                        lambda scenario, options: ran.append(scenario.name))
    # smoke runs on local processes unless told otherwise; RabbitMQ runs in Docker only
    assert main(["compare", "smoke", "--seed", "1", "--store", str(tmp_path)]) == 254
    assert "smoke: the rabbitmq target runs in docker, not process" in capsys.readouterr().err
    assert ran == []
