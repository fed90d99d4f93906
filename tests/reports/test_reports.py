"""Terminal report, report.html, junit.xml and `mirrorchaos report` on runs with known
anomalies, faults and node events."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.history import HistoryBuilder
from reports import load, render, render_html, write_html, write_junit
from reports.cli import main
from reports.describe import ANOMALY_COUNTS, MESSAGE_COUNTS
from reports.junit import CHECKER_OF_KIND
from tests.reports.runs import (
    CLOSE_KILLS,
    fault_storm,
    read_results,
    storm_history,
    troubled_history,
    write_run,
)

VIOLATED = {"lost": ["p1-3"], "unexpected": ["x-1"], "duplicate": ["p1-5"],
            "reordered": ["p2-1"]}


@pytest.fixture
def troubled(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", troubled_history())


def _healthy(folder: Path) -> Path:
    b = HistoryBuilder(scenario="smoke")
    b.consume("c1")
    b.publish("p1-1")
    b.deliver("p1-1")
    b.ack("p1-1")
    b.drain()
    return write_run(folder, b)


def _terminal(run: Path, width: int = 200) -> str:
    console = Console(record=True, width=width, file=io.StringIO())
    render(run, console)
    return console.export_text()


def test_at_80_columns_the_terminal_report_changes_layout_rather_than_cut(
        troubled: Path) -> None:
    text = _terminal(troubled, width=80)
    results = read_results(troubled)
    assert "…" not in text and max(map(len, text.splitlines())) <= 80
    assert re.search(rf"confirm p99 \(ms\) +│ +{results['latency_ms']['confirm_p99']:g} │", text)
    fraction = results["availability"]["consume"]["fraction"]
    assert re.search(rf"availability consume +│ +{fraction:.1%} │", text)
    assert "kill f1 → n1" in text  # the fault table is whole


def test_the_fixture_run_has_the_anomalies_the_tests_expect(troubled: Path) -> None:
    results = load(troubled).results
    found = {a["kind"]: a["messages"] for a in results["violations"]}
    assert found == VIOLATED
    assert [(c["caveat"], c["messages"]) for c in results["caveats"]] == [
        ("no-ack-in-flight", ["p3-1"])]


def test_terminal_report_shows_verdict_counts_violations_faults_and_node_events(
        troubled: Path) -> None:
    text = _terminal(troubled)
    results = read_results(troubled)
    assert "INVALID" in text and "mixed-20260101T120000-seed7" in text
    zeros = 0
    for name, value in results["counts"].items():
        shown = re.search(rf"│ {name} +│ +{value} │", text)
        # the anomalies every run has always, the ones checkers add only when not zero
        if value or name in MESSAGE_COUNTS + ANOMALY_COUNTS:
            assert shown, name
        else:
            assert not re.search(rf"│ {name} +│ +\d+ │", text), name
            zeros += 1
    assert zeros > 10 and f"{zeros} other counts are 0 (all are in results.json)" in text
    for kind, ids in VIOLATED.items():
        panel = text[text.index(f"violation: {kind}, {len(ids)} message"):]
        assert f"messages {', '.join(ids)}" in panel
        assert "kill f1 → n1  2.100-4.000 s" in panel.split("╰")[0]
    caveat = text[text.index("caveat: no-ack-in-flight: lost, 1 message"):].split("╰")[0]
    assert "p3-1" in caveat and "partition f2 → n3  5.000-7.000 s" in caveat
    assert f"{results['latency_ms']['confirm_p99']:g}" in text
    availability = results["availability"]
    for kind in ("publish", "consume"):
        assert f"{availability[kind]['fraction']:.1%}" in text, kind
    assert "publish = share of the workload's seconds with a confirm" in text
    for line in ("kill f1 → n1", "partition f2 → n3", "latency f3 → n2"):
        assert re.search(rf"{line} +│ [\d.-]+ s +│ [·█]+", text), line
    assert re.search(r"2\.\d+ s │ n2 +│ promotion q \(previous=n1\) +│ n2", text)
    assert re.search(r"│ n2 +│ sync-end q", text) and re.search(r"│ n3 +│ partition ", text)


def test_terminal_report_of_a_valid_run_has_no_anomaly_panels(tmp_path: Path) -> None:
    text = _terminal(_healthy(tmp_path / "ok"))
    assert "VALID" in text and "INVALID" not in text
    assert "violation:" not in text and "caveat:" not in text and "Faults" not in text


def test_long_id_lists_are_cut_in_the_terminal_but_complete_in_results(
        tmp_path: Path) -> None:
    b = HistoryBuilder()
    for i in range(1, 31):
        b.publish(f"p1-{i}")
    b.drain()
    text = _terminal(write_run(tmp_path / "lossy", b))
    assert "p1-20 … and 10 more" in text and "p1-21" not in text
    assert len(read_results(tmp_path / "lossy")["violations"][0]["messages"]) == 30


def test_results_are_checked_when_missing_or_older_than_the_history_and_reused_otherwise(
        troubled: Path) -> None:
    results_path = troubled / "results.json"
    assert not results_path.exists()
    load(troubled)
    assert read_results(troubled)["valid"] is False
    # a current results.json is used as it is: the checker does not run again
    doc = read_results(troubled)
    doc["run_id"] = "from-results-json"
    results_path.write_text(json.dumps(doc))
    assert load(troubled).results["run_id"] == "from-results-json"
    # a history newer than results.json is checked again
    history = troubled / "history.jsonl"
    later = results_path.stat().st_mtime_ns + 1_000_000_000
    os.utime(history, ns=(later, later))
    assert load(troubled).results["run_id"] == "mixed-20260101T120000-seed7"
    # and so is a results.json of another format
    results_path.write_text(json.dumps({"format": "something-else", "run_id": "x"}))
    assert load(troubled).results["run_id"] == "mixed-20260101T120000-seed7"


def _plot(page: str, div_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The data and layout plotly was given for the figure in ``div_id``."""
    call = page.index(f'Plotly.newPlot(                        "{div_id}",')
    decoder = json.JSONDecoder()
    start = page.index("[", call)
    data, end = decoder.raw_decode(page, start)
    layout, _ = decoder.raw_decode(page, page.index("{", end))
    return data, layout


def test_html_report_is_self_contained_with_fault_windows_and_series_from_the_results(
        troubled: Path) -> None:
    page = write_html(troubled).read_text(encoding="utf-8")
    results = read_results(troubled)
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=", page)
    assert "Plotly.newPlot" in page and len(page) > 3_000_000  # plotly.js is inline
    data, layout = _plot(page, "over-time")
    traces = {t["name"]: t for t in data}
    assert traces["confirms/s"]["y"] == results["throughput"]["confirms"]  # 1 s buckets
    assert traces["deliveries/s"]["y"] == results["throughput"]["deliveries"]
    assert traces["latency max"]["y"] == results["latency_over_time"]["max"]
    assert traces["publish served"]["y"] == [int(c > 0) for c in results["throughput"]["confirms"]]
    assert traces["consume served"]["y"] == [
        int(d > 0) for d in results["throughput"]["deliveries"]]
    assert "consume = share of the seconds with a consumer attached" in page
    windows = sorted((s["x0"], s["x1"]) for s in layout["shapes"])
    assert windows == sorted((f["start"], f["end"]) for f in results["faults"]
                             for _ in range(4))  # in its lane and in each plot
    assert _labels(data)["text"] == ["kill f1 → n1", "partition f2 → n3", "latency f3 → n2"]
    # the workload began as the run did: nothing to leave out
    assert layout["xaxis"]["range"][0] == 0 and "Set-up" not in page


def test_html_timeline_has_fault_bars_per_target_and_node_events(troubled: Path) -> None:
    page = render_html(load(troubled))
    data, _ = _plot(page, "timeline")
    bars = {t["name"]: t for t in data if t["type"] == "bar"}
    assert bars["fault: kill"]["y"] == ["n1"] and bars["fault: kill"]["base"] == [2.1]
    assert bars["fault: partition"]["y"] == ["n3"]
    events = {t["name"]: t for t in data if t["type"] == "scatter"}
    assert set(events) == {"node: promotion", "node: mirror-added", "node: sync-start",
                           "node: sync-end", "node: partition", "node: partition-healed"}
    assert events["node: promotion"]["y"] == ["n2"]
    assert events["node: mirror-added"]["y"] == ["n1"]


def _labels(data: list[dict[str, Any]]) -> dict[str, Any]:
    """The over-time figure's fault labels: one text trace, a point per fault."""
    (labels,) = [t for t in data if t["name"] == "fault labels"]
    assert labels["mode"] == "text"
    return labels


def test_html_time_axes_start_when_the_workload_began_not_with_the_set_up(
        tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", storm_history(CLOSE_KILLS, length=30, set_up=230.0))
    page = write_html(run).read_text(encoding="utf-8")
    for div in ("over-time", "timeline"):
        _, layout = _plot(page, div)
        ranges = [axis["range"] for name, axis in layout.items() if name.startswith("xaxis")]
        assert ranges and all(first == 230.0 < last for first, last in ranges), div
    assert "Set-up, 0-230.0 s, not plotted:" in page
    assert "The nodes' 3 events during it are in the node events table." in page
    # times stay seconds since the run started, as results.json and the terminal say
    data, _ = _plot(page, "timeline")
    kill = next(t for t in data if t["name"] == "fault: kill")
    assert kill["base"][0] == read_results(run)["faults"][0]["start"] == 240.0
    assert kill["hovertext"][0] == "kill f1 → n1<br>240.000-246.000 s"
    terminal = _terminal(run)
    assert re.search(r"kill f1 → n1 +│ 240\.000-246\.000 s", terminal)
    # the terminal's fault timeline starts with the workload too
    assert re.search(r"Faults \(timeline 230\.0-2\d\d\.\d s\)", terminal)


def test_labels_of_faults_that_start_close_together_take_a_lane_each(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", storm_history(CLOSE_KILLS))
    labels = _labels(_plot(render_html(load(run)), "over-time")[0])
    assert labels["text"] == ["kill f1 → n1", "kill f2 → n2", "kill f3 → n3", "kill f4 → n1"]
    assert labels["x"] == [10.0, 10.5, 11.0, 11.5]  # each at its fault's start
    assert labels["y"] == [0, 1, 2, 3]


def test_in_a_lane_each_fault_label_comes_after_the_previous_faults_window(
        tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", storm_history(fault_storm()))
    labels = _labels(_plot(render_html(load(run)), "over-time")[0])
    faults = read_results(run)["faults"]
    assert len(labels["x"]) == len(faults) == 40
    lanes: dict[int, list[tuple[float, dict[str, Any]]]] = {}
    for x, lane, fault in zip(labels["x"], labels["y"], faults, strict=True):
        lanes.setdefault(lane, []).append((x, fault))
    assert len(lanes) > 1
    for placed in lanes.values():
        for (_, before), (x, after) in itertools.pairwise(placed):
            assert before["end"] <= x <= after["start"], (before, after)


def test_html_anomaly_table_has_one_row_per_message(troubled: Path) -> None:
    page = render_html(load(troubled))
    rows = re.findall(r"<tr class='(violation|caveat)'><td>([^<]+)</td><td>([^<]+)</td>",
                      page)
    assert sorted((m, k) for _, m, k in rows) == sorted(
        [(ids[0], kind) for kind, ids in VIOLATED.items()] + [("p3-1", "lost")])
    assert ("caveat", "p3-1", "lost") in rows
    assert "kill f1 → n1 (2.100-4.000 s)" in page
    assert "promotion q (previous=n1)" in page


def _junit(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    return suite


def test_junit_has_a_case_per_checker_and_a_failure_per_failing_checker(
        troubled: Path) -> None:
    suite = _junit(write_junit(troubled))
    results = read_results(troubled)
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == [c["name"] for c in results["checkers"]]
    failing = [c["name"] for c in results["checkers"] if c["valid"] is False]
    assert failing == ["lost", "unexpected", "duplicated", "ordering"]
    assert suite.get("tests") == str(len(cases)) and suite.get("failures") == str(len(failing))
    assert sorted(n for n, c in cases.items() if c.find("failure") is not None) == sorted(
        failing)
    for kind, ids in VIOLATED.items():
        failure = cases[CHECKER_OF_KIND[kind]].find("failure")
        assert failure is not None
        assert ids[0] in (failure.get("message") or "") and ids[0] in (failure.text or "")
        assert "kill f1 → n1" in (failure.text or "")
    out = cases["lost"].find("system-out")
    assert out is not None and "no-ack-in-flight" in (out.text or "")
    assert "p3-1" in (out.text or "")


def test_junit_marks_an_unknown_verdict_as_an_error(tmp_path: Path) -> None:
    b = HistoryBuilder()
    b.publish("p1-1")
    b.deliver("p1-1")  # no final drain: the history cannot be judged
    suite = _junit(write_junit(write_run(tmp_path / "undrained", b)))
    errors = [c for c in suite.findall("testcase") if c.find("error") is not None]
    assert [c.get("name") for c in errors] == ["history"]
    error = errors[0].find("error")
    assert error is not None and error.get("message") == "no final drain recorded"
    assert suite.get("errors") == "1" and suite.get("failures") == "0"


def test_report_command_writes_the_files_and_exits_with_the_verdict(
        troubled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(troubled), "--junit"]) == 1
    assert (troubled / "report.html").exists() and (troubled / "junit.xml").exists()
    out = capsys.readouterr().out
    assert "INVALID" in out and f"wrote {troubled / 'junit.xml'}" in out
    healthy = _healthy(tmp_path / "ok")
    assert main(["report", str(healthy), "--no-html"]) == 0
    assert not (healthy / "report.html").exists() and not (healthy / "junit.xml").exists()
    assert (healthy / "results.json").exists()
    assert main(["report", str(healthy / "history.jsonl")]) == 0  # a history file works too
    assert (healthy / "report.html").exists()


def test_report_command_on_a_directory_without_history_says_so_and_exits_254(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 254
    assert f"bad input: {tmp_path / 'history.jsonl'}: expected a readable history file" in (
        capsys.readouterr().err)
    broken = write_run(tmp_path / "broken", troubled_history())
    history = broken / "history.jsonl"
    history.write_text(history.read_text().replace('"op":"ack"', '"op":"acked"'))
    assert main(["report", str(broken)]) == 254
    assert "field 'op'" in capsys.readouterr().err
    assert not (broken / "report.html").exists()
