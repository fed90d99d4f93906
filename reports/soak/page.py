"""The campaign's ``report.html``: self-contained like a run's (plotly embedded), built
with the same style and table helpers as `reports.html`."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from reports.html import PAGE_STYLE, VERDICT_CLASS, figure_html, table_html
from reports.soak.merge import PERCENTILES, CampaignReport, _pname

REPORT_HTML = "report.html"
_VERDICT_COLOURS = {"valid": "#2e7d32", "invalid": "#c62828", "unknown": "#f9a825"}


def write_campaign_html(report: CampaignReport, path: str | Path | None = None) -> Path:
    target = Path(path) if path is not None else report.directory / REPORT_HTML
    target.write_text(render_campaign_html(report), encoding="utf-8")
    return target


def campaign_title(report: CampaignReport) -> str:
    scenarios = sorted({str(r["scenario"]) for r in report.runs}) or ["(no runs)"]
    return f"soak {', '.join(scenarios)} · {report.directory.name}"


def overall_word(report: CampaignReport) -> str:
    if any(r["verdict"] == "invalid" for r in report.runs):
        return "INVALID"
    return "VALID" if report.runs and not report.failing else "UNKNOWN"


def render_campaign_html(report: CampaignReport) -> str:
    word = overall_word(report)
    plan = report.plan or {}
    options = plan.get("options") or {}
    facts = [f"{len(report.runs)} runs"]
    if plan.get("root_seed") is not None:
        facts.append(f"root seed {plan['root_seed']}")
    facts += [f"{k} {options[k]}" for k in ("master", "runtime", "duration") if k in options]
    body = [
        f"<h1>mirrorchaos: {escape(campaign_title(report))} "
        f"<span class='verdict {VERDICT_CLASS[word]}'>{word}</span></h1>",
        "<p>" + escape(", ".join(facts)) + " — " + escape(", ".join(
            f"{n} {v}" for v, n in sorted(report.verdicts.items()))) + "</p>",
        _per_scenario(report),
        "<h2>Failing runs, to replay</h2>" + _failing_table(report),
        "<h2>Verdict per run</h2>" + figure_html(_runs_figure(report), "runs")
        + _runs_table(report),
        "<h2>Anomalies per fault kind</h2>" + _anomalies_section(report),
        "<h2>Confirm latency across runs</h2>" + _latency_section(report),
    ]
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>mirrorchaos {escape(campaign_title(report))}</title>"
            f"<style>{PAGE_STYLE}</style>"
            f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            + "\n".join(body) + "</body></html>\n")


def _cell(value: Any, digits: int = 1) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return escape(str(value))


def _per_scenario(report: CampaignReport) -> str:
    per_scenario = report.verdicts_per_scenario
    if len(per_scenario) < 2:
        return ""
    return "<ul>" + "".join(
        f"<li>{escape(scenario)}: " + escape(", ".join(
            f"{n} {v}" for v, n in sorted(counts.items()))) + "</li>"
        for scenario, counts in per_scenario.items()) + "</ul>"


def _failing_table(report: CampaignReport) -> str:
    if not report.failing:
        return "<p class='note'>None: every run finished with a valid verdict.</p>"
    rows = [[_cell(r["seed"]), escape(str(r["scenario"])), escape(r["status"]),
             escape(r["verdict"]), f"<code>{escape(r['replay'])}</code>", _cell(r["error"]),
             _cell(r["worker"]), _cell(r["run_dir"])] for r in report.failing]
    return table_html(["seed", "scenario", "status", "verdict", "replay", "why", "worker",
                       "run directory"], rows,
                  ["invalid" if r["verdict"] == "invalid" else "unknown"
                   for r in report.failing])


def _runs_table(report: CampaignReport) -> str:
    rows = [[escape(r["task"]), escape(str(r["scenario"])), _cell(r["seed"]),
             escape(r["status"]), escape(r["verdict"]), _cell(r["confirmed"]),
             _cell(r["lost"]), _cell(r["duplicated"]), _cell(r["violations"]),
             _cell(r["caveats"]), _cell(r["faults"]), _cell(r["history_p50_ms"]),
             _cell(r["history_p99_ms"]), _cell(r["elapsed_s"]), _cell(r["worker"]),
             _cell(r["executor"]), _cell(r["attempts"])] for r in report.runs]
    return table_html(["run", "scenario", "seed", "status", "verdict", "confirmed", "lost",
                   "duplicated", "violations", "caveats", "faults", "p50 ms", "p99 ms",
                   "time s", "worker", "executor", "attempts"], rows,
                  ["" if not r["failing"] else "invalid" if r["verdict"] == "invalid"
                   else "unknown" for r in report.runs])


def _runs_figure(report: CampaignReport) -> go.Figure:
    """Each run's confirm p99 (from its history), coloured by verdict."""
    fig = go.Figure()
    for verdict, colour in _VERDICT_COLOURS.items():
        runs = [r for r in report.runs if r["verdict"] == verdict]
        if runs:
            fig.add_trace(go.Bar(
                x=[r["task"] for r in runs], y=[r["history_p99_ms"] or 0 for r in runs],
                name=verdict, marker_color=colour,
                hovertext=[f"seed {r['seed']}: {r['status']}, {r['verdict']}" for r in runs]))
    fig.update_layout(height=320, margin={"t": 20, "b": 40}, yaxis_title="confirm p99 (ms)",
                      xaxis={"categoryorder": "category ascending"})
    return fig


def _anomalies_section(report: CampaignReport) -> str:
    faults = table_html(["fault kind", "injected", "runs"],
                    [[escape(f["fault_kind"]), _cell(f["injected"]), _cell(f["runs"])]
                     for f in report.faults]) if report.faults else (
        "<p class='note'>No faults were injected.</p>")
    if not report.anomalies:
        return "<div class='flex'><p class='note'>No anomalies in any run.</p>" + faults + "</div>"
    rows = [[escape(a["fault_kind"]), escape(a["anomaly"]), escape(a["standing"]),
             _cell(a["messages"]), _cell(a["runs"]), escape(", ".join(a["scenarios"]))]
            for a in report.anomalies]
    fig = go.Figure()
    for standing in ("violation", "caveat"):
        these = [a for a in report.anomalies if a["standing"] == standing]
        if these:
            fig.add_trace(go.Bar(x=[a["fault_kind"] for a in these],
                                 y=[a["messages"] for a in these],
                                 name=standing, hovertext=[a["anomaly"] for a in these]))
    fig.update_layout(barmode="stack", height=300, margin={"t": 20, "b": 40},
                      yaxis_title="messages")
    return (figure_html(fig, "anomalies") + "<div class='flex'>"
            + table_html(["fault kind in force", "anomaly", "standing", "messages", "runs",
                      "scenarios"], rows,
                     ["violation" if a["standing"] == "violation" else "caveat"
                      for a in report.anomalies])
            + faults + "</div><p class='note'>An anomaly with several faults in force "
            "during its message's life counts under each kind.</p>")


def _latency_section(report: CampaignReport) -> str:
    latency = report.latency
    head = ["scenario", "runs", "confirms", *[f"p{q * 100:g}" for q in PERCENTILES],
            "mean", "max"]
    rows = []
    for label, row in [("all runs", latency.get("overall") or {}),
                       *[(str(r["scenario"]), r) for r in latency.get("per_scenario") or []]]:
        rows.append([escape(label), _cell(row.get("runs")), _cell(row.get("confirms")),
                     *[_cell(row.get(_pname(q)), 2) for q in PERCENTILES],
                     _cell(row.get("mean_ms"), 2), _cell(row.get("max_ms"), 2)])
    fig = go.Figure(go.Bar(
        x=[(b["from_ms"] * b["to_ms"]) ** 0.5 for b in latency.get("histogram") or []],
        y=[b["confirms"] for b in latency.get("histogram") or []],
        width=[b["to_ms"] - b["from_ms"] for b in latency.get("histogram") or []],
        name="confirms"))
    fig.update_layout(height=300, margin={"t": 20, "b": 40}, xaxis_type="log",
                      xaxis_title="confirm latency (ms)", yaxis_title="confirms")
    source = escape(latency.get("source", ""))
    return (table_html(head, rows) + f"<p class='note'>Milliseconds; from the {source}.</p>"
            + figure_html(fig, "latency"))
