"""``report.html`` (SPEC §5): one self-contained page — plotly.js is embedded, so it opens
offline — with throughput, confirm latency and availability over time under shaded fault
windows, a fault and node event timeline, and per-message anomaly, fault and node event
tables."""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.colors import qualitative
from plotly.offline import get_plotlyjs
from plotly.subplots import make_subplots

from reports.describe import (
    AVAILABILITY_DEFINITION,
    LATENCY_FIGURES,
    anomalies,
    availability_shares,
    counts_in_order,
    fault_end,
    fault_label,
    fault_notes,
    fault_span,
    number,
    run_length,
    verdict_word,
)
from reports.load import RunReport, load

REPORT_FILE = "report.html"
ANOMALY_ROWS = 5000  # rows of the per-message table; results.json has every id
_CLUSTER_ROW = "(cluster)"  # timeline row of faults without target nodes (policy, sync)
_PLOT_CONFIG = {"displaylogo": False, "responsive": True}
VERDICT_CLASS = {"VALID": "valid", "INVALID": "invalid", "UNKNOWN": "unknown"}
_NODE_EVENT_SYMBOLS = {"promotion": "star", "mirror-added": "triangle-up",
                       "mirror-dropped": "triangle-down", "sync-start": "circle-open",
                       "sync-end": "circle", "partition": "x", "partition-healed": "cross",
                       "restart": "diamond", "node-event": "square"}

PAGE_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px;
       padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
.verdict { display: inline-block; padding: .15em .6em; border-radius: 4px; color: #fff;
           font-weight: bold; }
.valid { background: #2e7d32; } .invalid { background: #c62828; }
.unknown { background: #f9a825; color: #000; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .2em .6em; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.violation td:first-child { border-left: 4px solid #c62828; }
tr.caveat td:first-child { border-left: 4px solid #f9a825; }
.flex { display: flex; gap: 2em; flex-wrap: wrap; align-items: flex-start; }
.note { color: #666; }
"""


def write_html(run: RunReport | str | Path, path: str | Path | None = None) -> Path:
    """Write the page for ``run`` (by default ``report.html`` in its run directory)."""
    report = run if isinstance(run, RunReport) else load(run)
    target = Path(path) if path is not None else report.folder / REPORT_FILE
    target.write_text(render_html(report), encoding="utf-8")
    return target


def render_html(report: RunReport) -> str:
    results = report.results
    colours = _fault_colours(results.get("faults") or [])
    word = verdict_word(results.get("valid"))
    body = [
        f"<h1>mirrorchaos: {escape(report.title)} "
        f"<span class='verdict {VERDICT_CLASS[word]}'>{word}</span></h1>",
        f"<p>scenario <b>{escape(str(results.get('scenario')))}</b>, seed "
        f"{escape(str(results.get('seed')))}"
        + (f", runtime {escape(str(results['runtime']))}" if results.get("runtime") else "")
        + "</p>",
    ]
    if results.get("error"):
        body.append(f"<p><b>Why unknown:</b> {escape(results['error'])}</p>")
    body.append("<div class='flex'>" + _counts_table(results) + _checkers_table(results)
                + _latency_table(results) + "</div>")
    body.append("<h2>Over time</h2>" + figure_html(_over_time(report, colours), "over-time")
                + f"<p class='note'>{escape(AVAILABILITY_DEFINITION)}.</p>")
    body.append("<h2>Faults and node events</h2>" + figure_html(_timeline(report, colours),
                                                            "timeline"))
    body.append("<h2>Anomalies, per message</h2>" + _anomaly_table(results))
    body.append("<h2>Faults</h2>" + _faults_table(results))
    if report.node_events:
        body.append("<h2>Node events</h2>" + _node_events_table(report))
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>mirrorchaos {escape(report.title)}</title><style>{PAGE_STYLE}</style>"
            f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            + "\n".join(body) + "</body></html>\n")


# -- plots ---------------------------------------------------------------------------


def _fault_colours(faults: list[dict[str, Any]]) -> dict[str, str]:
    kinds = sorted({f["kind"] for f in faults})
    palette = qualitative.Set2
    return {kind: palette[i % len(palette)] for i, kind in enumerate(kinds)}


def _over_time(report: RunReport, colours: dict[str, str]) -> go.Figure:
    results = report.results
    throughput = results.get("throughput") or {}
    latency = results.get("latency_over_time") or {}
    width = float(throughput.get("bucket_s") or 1.0)
    confirms = throughput.get("confirms") or []
    deliveries = throughput.get("deliveries") or []
    middles = [(i + 0.5) * width for i in range(len(confirms))]  # a bucket's rate, mid-bucket
    fig = make_subplots(rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.07,
                        row_heights=[0.45, 0.35, 0.2],
                        subplot_titles=("Throughput (messages/s)", "Confirm latency (ms)",
                                        _availability_title(results)))
    fig.add_trace(go.Scatter(x=middles, y=[c / width for c in confirms], name="confirms/s",
                             mode="lines+markers"), row=1, col=1)
    fig.add_trace(go.Scatter(x=middles, y=[d / width for d in deliveries],
                             name="deliveries/s", mode="lines+markers"), row=1, col=1)
    latency_width = float(latency.get("bucket_s") or width)
    for series in ("mean", "max"):
        values = latency.get(series) or []
        fig.add_trace(go.Scatter(x=[(i + 0.5) * latency_width for i in range(len(values))],
                                 y=values, name=f"latency {series}", mode="lines+markers",
                                 connectgaps=False), row=2, col=1)
    # per kind the workload had: a second with a confirm, one with a delivery
    served = {"publish": confirms, "consume": deliveries}
    for kind, _ in availability_shares(results):
        fig.add_trace(go.Bar(x=middles, y=[1 if n else 0 for n in served[kind]], width=width,
                             name=f"{kind} served", opacity=0.6), row=3, col=1)
    fig.update_yaxes(range=[0, 1], tickvals=[0, 1], ticktext=["down", "up"], row=3, col=1)
    length = run_length(report)
    for fault in results.get("faults") or []:
        for row in (1, 2, 3):
            label = {"annotation_text": fault_label(fault),
                     "annotation_position": "top left"} if row == 1 else {}
            fig.add_vrect(x0=fault["start"], x1=fault_end(fault, length), row=row, col=1,
                          fillcolor=colours[fault["kind"]], opacity=0.25, line_width=0,
                          **label)
    fig.update_xaxes(range=[0, length or 1])
    fig.update_xaxes(title_text="seconds since the run started", row=3, col=1)
    fig.update_layout(height=720, margin={"t": 40, "b": 40}, hovermode="x unified")
    return fig


def _availability_title(results: dict[str, Any]) -> str:
    shares = ", ".join(f"{kind} {fraction:.1%}" for kind, fraction in
                       availability_shares(results))
    return "Availability" + (f" ({shares})" if shares else "")


def _timeline(report: RunReport, colours: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    length = run_length(report)
    shown: set[str] = set()
    for fault in report.results.get("faults") or []:
        kind = fault["kind"]
        rows = list(fault.get("targets") or []) or [_CLUSTER_ROW]
        end = fault_end(fault, length)
        fig.add_trace(go.Bar(
            x=[end - fault["start"]] * len(rows), base=[fault["start"]] * len(rows), y=rows,
            orientation="h", name=f"fault: {kind}", legendgroup=kind, showlegend=kind not in shown,
            marker_color=colours[kind], opacity=0.8,
            hovertext=[f"{fault_label(fault)}<br>{fault_span(fault)}"] * len(rows),
            hoverinfo="text"))
        shown.add(kind)
    by_op: dict[str, list[Any]] = {}
    for event in report.node_events:
        by_op.setdefault(event.op, []).append(event)
    for op, events in sorted(by_op.items()):
        fig.add_trace(go.Scatter(
            x=[e.time for e in events], y=[e.node or e.reporter for e in events],
            mode="markers", name=f"node: {op}",
            marker={"symbol": _NODE_EVENT_SYMBOLS.get(op, "square"), "size": 12,
                    "line": {"width": 1}},
            hovertext=[f"{e.time:.3f} s: {e.describe()} (reported by {e.reporter})"
                       for e in events], hoverinfo="text"))
    legend_rows = len(shown) + len(by_op)
    fig.update_layout(barmode="overlay", height=max(120 + 50 * len(_rows(fig)),
                                                    80 + 24 * legend_rows),
                      margin={"t": 20, "b": 40}, xaxis_title="seconds since the run started",
                      xaxis_range=[0, length or 1])
    fig.update_yaxes(categoryorder="category descending")
    return fig


def _rows(fig: go.Figure) -> set[str]:
    return {y for trace in fig.data for y in (trace.y or ())}


def figure_html(fig: go.Figure, div_id: str) -> str:
    html: str = pio.to_html(fig, full_html=False, include_plotlyjs=False,
                            config=_PLOT_CONFIG, div_id=div_id)
    return html


# -- tables --------------------------------------------------------------------------


def table_html(head: list[str], rows: list[list[str]], classes: list[str] | None = None) -> str:
    """Cells are HTML already (escaped by the caller); numbers are right-aligned."""
    out = ["<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"]
    for i, row in enumerate(rows):
        cls = f" class='{classes[i]}'" if classes else ""
        cells = "".join(f"<td class='n'>{c}</td>" if c.lstrip("-").replace(".", "").isdigit()
                        else f"<td>{c}</td>" for c in row)
        out.append(f"<tr{cls}>{cells}</tr>")
    return "".join(out) + "</table>"


def _counts_table(results: dict[str, Any]) -> str:
    rows = [[escape(k), str(v)] for k, v in counts_in_order(results.get("counts") or {})]
    return "<div><h2>Counts</h2>" + table_html(["count", "value"], rows) + "</div>"


def _checkers_table(results: dict[str, Any]) -> str:
    rows = [[escape(p["name"]), verdict_word(p.get("valid")), str(p.get("violations", 0)),
             str(p.get("caveats", 0)), escape(p.get("error") or "")]
            for p in results.get("checkers") or []]
    return ("<div><h2>Checkers</h2>"
            + table_html(["checker", "verdict", "violations", "caveats", "error"], rows)
            + "</div>")


def _latency_table(results: dict[str, Any]) -> str:
    latency = results.get("latency_ms") or {}
    throughput = results.get("throughput") or {}
    rows = [[label, number(latency.get(key))] for label, key in LATENCY_FIGURES]
    rows += [["confirms", str(latency.get("confirms", 0))],
             ["confirms/s", number(throughput.get("confirms_per_s"))],
             ["deliveries/s", number(throughput.get("deliveries_per_s"))]]
    return ("<div><h2>Confirm latency (ms), throughput</h2>"
            + table_html(["figure", "value"], rows) + "</div>")


def _anomaly_table(results: dict[str, Any]) -> str:
    rows: list[list[str]] = []
    classes: list[str] = []
    total = 0
    for standing, anomaly in anomalies(results):
        faults = "<br>".join(escape(f"{fault_label(f)} ({fault_span(f)})")
                             for f in anomaly.get("faults") or [])
        for message in anomaly.get("messages") or []:
            total += 1
            if len(rows) < ANOMALY_ROWS:
                rows.append([escape(message), escape(anomaly["kind"]), escape(standing),
                             escape(anomaly.get("queue") or ""),
                             escape(anomaly.get("explanation", "")), faults])
                classes.append(standing.split(":")[0])
    if not rows:
        return "<p class='note'>No anomalies.</p>"
    note = (f"<p class='note'>The first {ANOMALY_ROWS} of {total} are shown; results.json "
            "lists every one.</p>" if total > ANOMALY_ROWS else "")
    return note + table_html(["message", "kind", "standing", "queue", "why",
                          "faults in force during its life"], rows, classes)


def _faults_table(results: dict[str, Any]) -> str:
    faults = results.get("faults") or []
    if not faults:
        return "<p class='note'>No faults were injected.</p>"
    rows = [[escape(f["id"]), escape(f["kind"]), escape(", ".join(f.get("targets") or [])),
             escape(fault_span(f)), escape(fault_notes(f))] for f in faults]
    return table_html(["id", "kind", "targets", "in force", "notes"], rows)


def _node_events_table(report: RunReport) -> str:
    rows = [[f"{e.time:.3f}", escape(e.node or ""), escape(e.describe()), escape(e.reporter)]
            for e in report.node_events]
    return table_html(["time (s)", "about", "event", "reported by"], rows)
