"""The campaign merge on stored runs made by the real checker: a valid run, an invalid
one (confirmed messages never delivered), one that timed out before its drain, one
whose harness crashed before its check, and an invalid run of a second scenario."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from reports.soak.command import campaign_exit_code
from reports.soak.merge import merge_campaign
from reports.soak.page import write_campaign_html
from reports.soak.synthetic import write_synthetic_run
from reports.soak.terminal import render_campaign

FLAVOURS = {0: ("valid", 11), 1: ("invalid", 22), 2: ("timeout", 33), 3: ("crashed", 44),
            4: ("valid", 55)}
BROKEN = (5, "invalid", 66, "broken-redelivery")  # a second scenario in the campaign


# Spark on a shared two-core machine can take minutes; this only guards against a hang
# One test worker runs Spark (a JVM using both cores) at a time.
pytestmark = [pytest.mark.timeout(600), pytest.mark.spark]

@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("campaign")
    for index, (flavour, seed) in FLAVOURS.items():
        write_synthetic_run(directory, index, seed, flavour)  # type: ignore[arg-type]
    index, flavour, seed, scenario = BROKEN
    write_synthetic_run(directory, index, seed, flavour,  # type: ignore[arg-type]
                        scenario=scenario)
    return directory


@pytest.fixture(scope="module")
def merged(spark: Any, campaign: Path) -> Any:
    report = merge_campaign(spark, campaign)
    write_campaign_html(report)
    return report


def test_one_row_per_run_with_its_seed_status_and_verdict(merged: Any) -> None:
    table = {(r["seed"], r["status"], r["verdict"]) for r in merged.runs}
    assert table == {(11, "done", "valid"), (22, "done", "invalid"),
                     (33, "timeout", "unknown"), (44, "crashed", "unknown"),
                     (55, "done", "valid"), (66, "done", "invalid")}
    assert len(merged.runs) == 6
    assert merged.verdicts == {"valid": 2, "invalid": 2, "unknown": 2}
    assert merged.verdicts_per_scenario == {
        "mixed": {"valid": 2, "invalid": 1, "unknown": 2}, "broken-redelivery": {"invalid": 1}}
    invalid = next(r for r in merged.runs if r["seed"] == 22)
    assert (invalid["lost"], invalid["violations"], invalid["confirmed"]) == (3, 3, 200)
    assert campaign_exit_code(merged) == 1


def test_failing_runs_are_listed_with_the_command_that_replays_them(merged: Any) -> None:
    failing = {r["seed"]: r for r in merged.failing}
    assert sorted(failing) == [22, 33, 44, 66]
    assert failing[22]["replay"] == ("mirrorchaos run mixed --seed 22 --runtime process "
                                     "--time-limit 30")
    assert failing[33]["error"] == "synthetic timeout"
    doc = json.loads((merged.directory / "report.json").read_text())
    assert [(f["seed"], f["scenario"], f["replay"]) for f in doc["failing"]] == [
        (s, scenario, f"mirrorchaos run {scenario} --seed {s} --runtime process --time-limit 30")
        for s, scenario in ((22, "mixed"), (33, "mixed"), (44, "mixed"),
                            (66, "broken-redelivery"))]
    assert doc["verdicts_per_scenario"] == merged.verdicts_per_scenario
    page = (merged.directory / "report.html").read_text()
    assert "mirrorchaos run mixed --seed 22 --runtime process --time-limit 30" in page
    assert "<script type='text/javascript'>" in page  # plotly inline: opens offline


def test_anomalies_are_counted_per_fault_kind(merged: Any) -> None:
    # The lost messages are the last three published, after the kill was healed.
    assert merged.anomalies == [{"fault_kind": "(none)", "anomaly": "lost",
                                 "standing": "violation", "messages": 6, "runs": 2,
                                 "scenarios": ["broken-redelivery", "mixed"]}]
    # every run but the crashed one has a results.json with its kill
    assert merged.faults == [{"fault_kind": "kill", "injected": 5, "runs": 5}]


def test_latency_percentiles_come_from_every_history(merged: Any, campaign: Path) -> None:
    overall = merged.latency["overall"]
    # the crashed run has no results.json, but its history counts
    assert (overall["runs"], overall["confirms"]) == (6, 1200)
    assert overall["p50_ms"] < overall["p90_ms"] < overall["p99_ms"] <= overall["max_ms"]
    for run in merged.runs:
        if run["results_p99_ms"] is not None:  # the checker's own figure, same history
            assert run["history_p99_ms"] == pytest.approx(run["results_p99_ms"], rel=0.05)
    assert sum(b["confirms"] for b in merged.latency["histogram"]) == 1200


def test_tables_are_written_as_parquet(spark: Any, merged: Any, campaign: Path) -> None:
    runs = spark.read.parquet(str(campaign / "runs.parquet"))
    assert sorted(r["seed"] for r in runs.select("seed").collect()) == [11, 22, 33, 44, 55, 66]
    for name in ("anomalies", "faults", "latency"):
        assert spark.read.parquet(str(campaign / f"{name}.parquet")).count() > 0


def test_the_terminal_summary_gives_verdicts_per_scenario_and_the_runs_to_replay(
        merged: Any) -> None:
    out = io.StringIO()
    render_campaign(merged, Console(file=out, width=80, color_system=None))
    text = out.getvalue()
    assert "campaign INVALID: 6 runs, 2 invalid, 2 unknown, 2 valid" in text
    assert "  mixed: 1 invalid, 2 unknown, 2 valid\n" in text
    assert "  broken-redelivery: 1 invalid\n" in text
    failing = text[text.index("failing runs"):]
    assert "seed 66 (broken-redelivery: done, invalid) on synthetic:1\n    mirrorchaos run " \
           "broken-redelivery --seed 66 --runtime process --time-limit 30\n" in failing
    assert "seed 22 (mixed: done, invalid)" in failing
    assert "seed 11 " not in failing


def test_the_worker_of_each_run_is_in_every_report(merged: Any) -> None:
    assert {r["seed"]: r["worker"] for r in merged.runs} == {
        11: "synthetic:0", 22: "synthetic:1", 33: "synthetic:0", 44: "synthetic:1",
        55: "synthetic:0", 66: "synthetic:1"}
    doc = json.loads((merged.directory / "report.json").read_text())
    assert {r["worker"] for r in doc["runs"]} == {"synthetic:0", "synthetic:1"}
    for width in (80, 100):  # a line per worker; from 100 columns, a column too
        out = io.StringIO()
        render_campaign(merged, Console(file=out, width=width, color_system=None))
        text = out.getvalue()
        assert "runs per worker: synthetic:0 3 (#0, 2, 4); synthetic:1 3 (#1, 3, 5)\n" in text
        assert re.search(r"│ 5 │ 66 .* │ synthetic:1 │", text) if width == 100 else (
            "│ synthetic:1 │" not in text)
    assert "<th>worker</th>" in (merged.directory / "report.html").read_text()


def test_a_lost_run_is_unknown_and_listed_with_why_and_its_replay(
        spark: Any, tmp_path: Path) -> None:
    """A run whose executor was lost on every attempt has only the driver's record:
    its verdict is unknown, so the campaign is too (exit 2), not valid."""
    write_synthetic_run(tmp_path, 0, 77, "valid")
    write_synthetic_run(tmp_path, 1, 88, "lost")
    report = merge_campaign(spark, tmp_path, write=False)
    assert [(r["seed"], r["status"], r["verdict"], r["attempts"]) for r in report.runs] == [
        (77, "done", "valid", 1), (88, "lost", "unknown", 3)]
    [lost] = report.failing
    assert lost["replay"] == "mirrorchaos run mixed --seed 88 --runtime process --time-limit 30"
    assert lost["error"].startswith("attempt 1: synthetic executor lost; attempt 2: ")
    assert campaign_exit_code(report) == 2
