"""``report.html``: one self-contained page — plotly.js is embedded, so it opens
offline — with throughput, confirm latency and availability over time under shaded fault
windows, a fault and node event timeline, and per-message anomaly, fault and node event
tables.

The time axes start when the workload began, not when the run did: the set-up before it
(starting the cluster, building the node image) can take minutes and would squeeze the
run into the axis' last part. Times keep the run's start as their zero, as results.json
and the terminal report do; the page says how long the set-up was.
"""

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
# Fault labels are laid out in lanes before the page knows its width: a character is
# taken as 1/_AXIS_CHARS of the x axis, 8 px of an 800 px wide plot (plotly's 12 px font
# takes 5-7).
_AXIS_CHARS = 100
_LANE_PX = 22  # height of a lane of fault labels
_PLOTS_PX = 540  # throughput, latency and availability together, gaps and margins aside
_GAP_PX = 50  # between two plots of the over-time figure

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
        + (f", target {escape(str(results['target']))}" if results.get("target") else "")
        + "</p>",
    ]
    if results.get("error"):
        body.append(f"<p><b>Why unknown:</b> {escape(results['error'])}</p>")
    body.append("<div class='flex'>" + _counts_table(results) + _checkers_table(results)
                + _latency_table(results) + "</div>")
    axis = _time_axis(report)
    body.append("<h2>Over time</h2>" + _set_up_note(report, axis[0])
                + figure_html(_over_time(report, colours, axis), "over-time")
                + f"<p class='note'>{escape(AVAILABILITY_DEFINITION)}.</p>")
    body.append("<h2>Faults and node events</h2>"
                + figure_html(_timeline(report, colours, axis), "timeline"))
    body.append("<h2>Anomalies, per message</h2>" + _anomaly_table(results))
    body.append("<h2>Faults</h2>" + _faults_table(results))
    if report.node_events:
        body.append("<h2>Node events</h2>" + _node_events_table(report))
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>mirrorchaos {escape(report.title)}</title><style>{PAGE_STYLE}</style>"
            f"<script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            + "\n".join(body) + "</body></html>\n")


# -- plots ---------------------------------------------------------------------------


def _time_axis(report: RunReport) -> tuple[float, float]:
    """Every time axis' range: from the workload's start to the last thing plotted."""
    start = report.workload_start
    return start, max(run_length(report), start + 1)


def _axis_title(start: float) -> str:
    return "seconds since the run started" + (
        f" (set-up until {start:.1f} s not shown)" if start else "")


def _set_up_note(report: RunReport, start: float) -> str:
    """What the time axes leave out: the set-up, with the node events during it."""
    if not start:
        return ""
    hidden = sum(e.time < start for e in report.node_events)
    events = (f" The nodes' {hidden} events during it are in the node events table."
              if hidden else "")
    return (f"<p class='note'><b>Set-up, 0-{start:.1f} s, not plotted:</b> the cluster "
            "starting (and the node image being built where needed) before the workload "
            "began; the time axes start with the workload. Times are seconds since the "
            f"run started, as in results.json and the terminal report.{events}</p>")


def _fault_colours(faults: list[dict[str, Any]]) -> dict[str, str]:
    kinds = sorted({f["kind"] for f in faults})
    palette = qualitative.Set2
    return {kind: palette[i % len(palette)] for i, kind in enumerate(kinds)}


def _label_places(faults: list[dict[str, Any]],
                  axis: tuple[float, float]) -> list[tuple[float, int]]:
    """Per fault, where its label goes: (x, lane). A label starts at its fault's start,
    moved left to end inside the axis, in the first lane where it and the fault's window
    clear what that lane already holds: in a lane, nothing overlaps."""
    first, last = axis
    per_char = (last - first) / _AXIS_CHARS
    ends: list[float] = []  # per lane, where its last label or window ends
    places = []
    for fault in faults:  # in start order, as results.json lists them
        width = (len(fault_label(fault)) + 1) * per_char
        x = max(first, min(fault["start"], last - width))
        lane = next((i for i, end in enumerate(ends) if end <= x), len(ends))
        ends[lane:lane + 1] = [max(x + width, fault_end(fault, last))]  # or a new lane
        places.append((x, lane))
    return places


def _over_time(report: RunReport, colours: dict[str, str],
               axis: tuple[float, float]) -> go.Figure:
    results = report.results
    faults = results.get("faults") or []
    places = _label_places(faults, axis)
    lanes = max((lane for _, lane in places), default=-1) + 1
    titles = ["Throughput (messages/s)", "Confirm latency (ms)", _availability_title(results)]
    heights = [0.45 * _PLOTS_PX, 0.35 * _PLOTS_PX, 0.2 * _PLOTS_PX]
    if faults:
        titles.insert(0, "Faults")
        heights.insert(0, lanes * _LANE_PX)
    top = 2 if faults else 1  # the throughput plot's row, below the faults' lanes
    area = sum(heights) + _GAP_PX * (len(titles) - 1)
    fig = make_subplots(rows=len(titles), cols=1, shared_xaxes=True,
                        vertical_spacing=_GAP_PX / area, row_heights=heights,
                        subplot_titles=titles)
    throughput = results.get("throughput") or {}
    latency = results.get("latency_over_time") or {}
    width = float(throughput.get("bucket_s") or 1.0)
    confirms = throughput.get("confirms") or []
    deliveries = throughput.get("deliveries") or []
    middles = [(i + 0.5) * width for i in range(len(confirms))]  # a bucket's rate, mid-bucket
    fig.add_trace(go.Scatter(x=middles, y=[c / width for c in confirms], name="confirms/s",
                             mode="lines+markers"), row=top, col=1)
    fig.add_trace(go.Scatter(x=middles, y=[d / width for d in deliveries],
                             name="deliveries/s", mode="lines+markers"), row=top, col=1)
    latency_width = float(latency.get("bucket_s") or width)
    for series in ("mean", "max"):
        values = latency.get(series) or []
        fig.add_trace(go.Scatter(x=[(i + 0.5) * latency_width for i in range(len(values))],
                                 y=values, name=f"latency {series}", mode="lines+markers",
                                 connectgaps=False), row=top + 1, col=1)
    # per kind the workload had: a second with a confirm, one with a delivery
    served = {"publish": confirms, "consume": deliveries}
    for kind, _ in availability_shares(results):
        fig.add_trace(go.Bar(x=middles, y=[1 if n else 0 for n in served[kind]], width=width,
                             name=f"{kind} served", opacity=0.6), row=top + 2, col=1)
    fig.update_yaxes(range=[0, 1], tickvals=[0, 1], ticktext=["down", "up"], row=top + 2,
                     col=1)
    if faults:
        _fault_lanes(fig, faults, places, colours, axis[1])
        fig.update_yaxes(range=[lanes - 0.5, -0.5], visible=False, row=1, col=1)
    fig.update_xaxes(range=list(axis))
    fig.update_xaxes(title_text=_axis_title(axis[0]), row=top + 2, col=1)
    fig.update_layout(height=area + 80, margin={"t": 40, "b": 40}, hovermode="x unified")
    return fig


def _fault_lanes(fig: go.Figure, faults: list[dict[str, Any]],
                 places: list[tuple[float, int]], colours: dict[str, str],
                 length: float) -> None:
    """Each fault's window in its lane of the top row, under its label (in the legend
    once per kind), and shaded over the plots in rows 2-4. The shapes go in at once:
    plotly's add_shape copies every shape before it, minutes for a few hundred faults."""
    shapes: list[dict[str, Any]] = []
    shown: set[str] = set()
    for fault, (_, lane) in zip(faults, places, strict=True):
        kind = fault["kind"]
        window = {"type": "rect", "x0": fault["start"], "x1": fault_end(fault, length),
                  "fillcolor": colours[kind], "line": {"width": 0}, "legendgroup": kind}
        shapes.append({**window, "xref": "x", "yref": "y", "y0": lane - 0.4,
                       "y1": lane + 0.4, "opacity": 0.6, "layer": "between",
                       "name": f"fault: {kind}", "showlegend": kind not in shown})
        shown.add(kind)
        shapes.extend({**window, "xref": f"x{row}", "yref": f"y{row} domain", "y0": 0,
                       "y1": 1, "opacity": 0.25} for row in (2, 3, 4))
    fig.update_layout(shapes=shapes)
    fig.add_trace(go.Scatter(
        x=[x for x, _ in places], y=[lane for _, lane in places], mode="text",
        text=[fault_label(f) for f in faults], textposition="middle right",
        hovertext=[f"{fault_label(f)}<br>{fault_span(f)}" for f in faults],
        hoverinfo="text", name="fault labels", showlegend=False), row=1, col=1)


def _availability_title(results: dict[str, Any]) -> str:
    shares = ", ".join(f"{kind} {fraction:.1%}" for kind, fraction in
                       availability_shares(results))
    return "Availability" + (f" ({shares})" if shares else "")


def _timeline(report: RunReport, colours: dict[str, str],
              axis: tuple[float, float]) -> go.Figure:
    fig = go.Figure()
    shown: set[str] = set()
    for fault in report.results.get("faults") or []:
        kind = fault["kind"]
        rows = list(fault.get("targets") or []) or [_CLUSTER_ROW]
        end = fault_end(fault, axis[1])
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
                      margin={"t": 20, "b": 40}, xaxis_title=_axis_title(axis[0]),
                      xaxis_range=list(axis))
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
