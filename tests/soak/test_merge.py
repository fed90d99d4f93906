"""The campaign merge on stored runs made by the real checker: a valid run, an invalid
one (confirmed messages never delivered), one that timed out before its drain and one
whose harness crashed before its check."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from reports.soak.command import campaign_exit_code
from reports.soak.merge import merge_campaign
from reports.soak.page import write_campaign_html
from reports.soak.synthetic import write_synthetic_run

FLAVOURS = {0: ("valid", 11), 1: ("invalid", 22), 2: ("timeout", 33), 3: ("crashed", 44),
            4: ("valid", 55)}


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("campaign")
    for index, (flavour, seed) in FLAVOURS.items():
        write_synthetic_run(directory, index, seed, flavour)  # type: ignore[arg-type]
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
                     (55, "done", "valid")}
    assert len(merged.runs) == 5
    assert merged.verdicts == {"valid": 2, "invalid": 1, "unknown": 2}
    invalid = next(r for r in merged.runs if r["seed"] == 22)
    assert (invalid["lost"], invalid["violations"], invalid["confirmed"]) == (3, 3, 200)
    assert campaign_exit_code(merged) == 1


def test_failing_runs_are_listed_with_the_command_that_replays_them(merged: Any) -> None:
    failing = {r["seed"]: r for r in merged.failing}
    assert sorted(failing) == [22, 33, 44]
    assert failing[22]["replay"] == ("mirrorchaos run mixed --seed 22 --runtime process "
                                     "--time-limit 30")
    assert failing[33]["error"] == "synthetic timeout"
    doc = json.loads((merged.directory / "report.json").read_text())
    assert [(f["seed"], f["replay"]) for f in doc["failing"]] == [
        (s, f"mirrorchaos run mixed --seed {s} --runtime process --time-limit 30")
        for s in (22, 33, 44)]
    page = (merged.directory / "report.html").read_text()
    assert "mirrorchaos run mixed --seed 22 --runtime process --time-limit 30" in page
    assert "<script type='text/javascript'>" in page  # plotly inline: opens offline


def test_anomalies_are_counted_per_fault_kind(merged: Any) -> None:
    # The lost messages are the last three published, after the kill was healed.
    assert merged.anomalies == [{"fault_kind": "(none)", "anomaly": "lost",
                                 "standing": "violation", "messages": 3, "runs": 1,
                                 "scenarios": ["mixed"]}]
    # every run but the crashed one has a results.json with its kill
    assert merged.faults == [{"fault_kind": "kill", "injected": 4, "runs": 4}]


def test_latency_percentiles_come_from_every_history(merged: Any, campaign: Path) -> None:
    overall = merged.latency["overall"]
    # the crashed run has no results.json, but its history counts
    assert (overall["runs"], overall["confirms"]) == (5, 1000)
    assert overall["p50_ms"] < overall["p90_ms"] < overall["p99_ms"] <= overall["max_ms"]
    for run in merged.runs:
        if run["results_p99_ms"] is not None:  # the checker's own figure, same history
            assert run["history_p99_ms"] == pytest.approx(run["results_p99_ms"], rel=0.05)
    assert sum(b["confirms"] for b in merged.latency["histogram"]) == 1000


def test_tables_are_written_as_parquet(spark: Any, merged: Any, campaign: Path) -> None:
    runs = spark.read.parquet(str(campaign / "runs.parquet"))
    assert sorted(r["seed"] for r in runs.select("seed").collect()) == [11, 22, 33, 44, 55]
    for name in ("anomalies", "faults", "latency"):
        assert spark.read.parquet(str(campaign / f"{name}.parquet")).count() > 0
