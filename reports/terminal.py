"""The terminal report: verdict, counts, violations with their fault context,
caveats, latency, throughput and availability, a fault timeline and node events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from reports.describe import (
    ANOMALY_COUNTS,
    AVAILABILITY_DEFINITION,
    FAILOVER_DEFINITION,
    LATENCY_FIGURES,
    MESSAGE_COUNTS,
    anomalies,
    availability_shares,
    counts_in_order,
    fault_end,
    fault_label,
    fault_notes,
    fault_span,
    id_list,
    messages_count,
    number,
    run_length,
    verdict_word,
)
from reports.load import RunReport, load

_VERDICT_STYLE = {"VALID": "bold white on green", "INVALID": "bold white on red",
                  "UNKNOWN": "bold black on yellow"}
IDS_SHOWN = 20  # message ids listed per anomaly; results.json has them all
NODE_EVENTS_SHOWN = 40
_TRACK = 40  # characters of the fault timeline's time axis, at most
# Narrower than this, the performance figures go one a row, not one a column, and the
# fault timeline's axis shrinks (or goes, below _TRACK_MIN), so nothing is cut short.
WIDE = 110
_TRACK_MIN = 12


def render(run: RunReport | str | Path, console: Console | None = None) -> None:
    """Print the report of ``run`` (a loaded run, or a run directory / history file as
    ``mirrorchaos check`` takes it) to ``console`` (stdout by default)."""
    report = run if isinstance(run, RunReport) else load(run)
    console = console or Console()
    console.print(*sections(report, console.width))


def sections(report: RunReport, width: int = WIDE) -> list[RenderableType]:
    """The report's parts, laid out for a terminal ``width`` columns wide."""
    results = report.results
    parts: list[RenderableType] = [_verdict(results), _counts(results), _checkers(results)]
    parts.extend(_anomaly_panels(results))
    parts.append(_performance(results, wide=width >= WIDE))
    if results.get("failover"):
        parts.append(_failover(results["failover"]))
    if results.get("faults"):
        parts.append(_fault_timeline(report, track=min(_TRACK, width - 68)))
    if report.node_events:
        parts.append(_node_events(report))
    return parts


def _verdict(results: dict[str, Any]) -> RenderableType:
    word = verdict_word(results.get("valid"))
    line = Text.assemble((f" {word} ", _VERDICT_STYLE[word]), "  ",
                         (f"{results.get('scenario')}", "bold"),
                         f"  run {results.get('run_id')}  seed {results.get('seed')}")
    if results.get("runtime"):
        line.append(f"  runtime {results['runtime']}")
    if results.get("target"):
        line.append(f"  target {results['target']}")
    rows: list[RenderableType] = [line]
    if results.get("error"):
        rows.append(Text(f"why unknown: {results['error']}", style="yellow"))
    return Panel(Group(*rows), title="mirrorchaos run", title_align="left")


def _counts(results: dict[str, Any]) -> RenderableType:
    """Two column pairs: what the workload did, then what went wrong. The anomalies every
    run has come always; the many that checkers add come only when not zero (a run
    that passed would otherwise list thirty zeros), and a caption counts the rest."""
    counts = counts_in_order(results.get("counts") or {})
    workload = [c for c in counts if c[0] in MESSAGE_COUNTS]
    rest = [c for c in counts if c[0] in ANOMALY_COUNTS or
            (c[0] not in MESSAGE_COUNTS and c[1])]
    zeros = len(counts) - len(workload) - len(rest)
    table = Table(title="Counts", title_justify="left",
                  caption=f"{zeros} other counts are 0 (all are in results.json)"
                  if zeros else None, caption_justify="left")
    for column in ("messages", "", "anomalies", ""):
        table.add_column(column, justify="right" if not column else "left")
    for i in range(max(len(workload), len(rest))):
        left = (workload[i][0], str(workload[i][1])) if i < len(workload) else ("", "")
        name, value = rest[i] if i < len(rest) else ("", 0)
        bad = value and name in ("lost", "unexpected", "duplicated_unflagged", "reordered")
        table.add_row(*left, name, Text(str(value) if name else "",
                                        style="bold red" if bad else ""))
    return table


def _checkers(results: dict[str, Any]) -> RenderableType:
    table = Table(title="Checkers", title_justify="left")
    for column in ("checker", "verdict", "violations", "caveats", "error"):
        table.add_column(column, justify="right" if column in ("violations", "caveats")
                         else "left")
    for part in results.get("checkers") or []:
        word = verdict_word(part.get("valid"))
        table.add_row(part["name"], Text(word, style=_VERDICT_STYLE[word].split(" on ")[-1]),
                      str(part.get("violations", 0)), str(part.get("caveats", 0)),
                      part.get("error") or "")
    return table


def _anomaly_panels(results: dict[str, Any]) -> list[RenderableType]:
    panels: list[RenderableType] = []
    for standing, anomaly in anomalies(results):
        violation = standing == "violation"
        body = Table.grid(padding=(0, 1))
        body.add_column(style="bold")
        body.add_column()
        body.add_row("why", anomaly.get("explanation", ""))
        if anomaly.get("queue"):
            body.add_row("queue", anomaly["queue"])
        body.add_row("messages", id_list(anomaly.get("messages") or [], IDS_SHOWN))
        faults = anomaly.get("faults") or []
        body.add_row("faults", "\n".join(f"{fault_label(f)}  {fault_span(f)}" for f in faults)
                     if faults else "none in force")
        title = f"{standing}: {anomaly['kind']}, {messages_count(anomaly.get('count', 0))}"
        panels.append(Panel(body, title=title, title_align="left",
                            border_style="red" if violation else "yellow"))
    return panels


def _performance(results: dict[str, Any], *, wide: bool) -> RenderableType:
    """Latency percentiles, throughput and availability: as one row of columns when
    ``wide``, else as rows of figure and value."""
    latency = results.get("latency_ms") or {}
    throughput = results.get("throughput") or {}
    figures = [(f"confirm {label} (ms)" if not wide else label, number(latency.get(key)))
               for label, key in LATENCY_FIGURES]
    figures += [("confirms", str(latency.get("confirms", 0))),
                ("confirms/s", number(throughput.get("confirms_per_s"))),
                ("deliveries/s", number(throughput.get("deliveries_per_s")))]
    shares = [(f"availability {kind}", f"{fraction:.1%}")
              for kind, fraction in availability_shares(results)]
    table = Table(title="Confirm latency (ms) and throughput", title_justify="left")
    if wide:
        for label, _ in [*figures, *shares]:
            table.add_column(label.removeprefix("availability "), justify="right")
        table.add_row(*(value for _, value in [*figures, *shares]))
    else:
        table.add_column("figure")
        table.add_column("value", justify="right")
        for label, value in [*figures, *shares]:
            table.add_row(label, value)
    return Group(table, Text(AVAILABILITY_DEFINITION, style="dim"))


def _failover(gaps: list[dict[str, Any]]) -> RenderableType:
    """Per node fault, how long the publishers went without a confirm."""
    table = Table(title="Failover: the longest pause in confirms per node fault",
                  title_justify="left")
    for column in ("fault", "at (s)", "pause (s)", "began (s)", "one publisher's (s)"):
        table.add_column(column, justify="left" if column == "fault" else "right")
    for gap in gaps:
        own = gap["publisher_pause"]
        table.add_row(fault_label({**gap, "id": gap["fault"]}), f"{gap['start']:.3f}",
                      _seconds(gap["pause"]), _seconds(gap["pause_from"], signed=True),
                      "n/a" if own is None else f"{own:.3f} {gap['publisher']}")
    return Group(table, Text(FAILOVER_DEFINITION, style="dim"))


def _seconds(value: float | None, *, signed: bool = False) -> str:
    return "n/a" if value is None else f"{value:+.3f}" if signed else f"{value:.3f}"


def _fault_timeline(report: RunReport, track: int = _TRACK) -> RenderableType:
    """One row a fault; a time axis ``track`` characters wide, none below _TRACK_MIN,
    from the workload's start (the set-up before it has no faults)."""
    start = report.workload_start
    length = max(run_length(report), start + 1.0)
    span = length - start
    shown = track >= _TRACK_MIN
    title = f"Faults (timeline {start:.1f}-{length:.1f} s)" if shown else "Faults"
    table = Table(title=title, title_justify="left")
    for column in ("fault", "when", *(("timeline",) if shown else ()), "notes"):
        table.add_column(column)
    for fault in report.results.get("faults") or []:
        bar = Text()
        if shown:
            first = min(max(int((fault["start"] - start) / span * track), 0), track - 1)
            last = max(first + 1, round((fault_end(fault, length) - start) / span * track))
            bar.append("·" * first)
            bar.append("█" * (last - first),
                       style="red" if fault.get("applied", True) else "dim")
            bar.append("·" * (track - last))
        table.add_row(fault_label(fault), fault_span(fault), *((bar,) if shown else ()),
                      fault_notes(fault))
    return table


def _node_events(report: RunReport) -> RenderableType:
    events = report.node_events
    counts = report.results.get("node_reports") or {}
    summary = ", ".join(f"{op} {n}" for op, n in sorted(counts.items()))
    table = Table(title="Node events", title_justify="left", caption=summary,
                  caption_justify="left")
    for column in ("time", "about", "event", "reported by"):
        table.add_column(column, justify="right" if column == "time" else "left")
    for event in events[:NODE_EVENTS_SHOWN]:
        table.add_row(f"{event.time:.3f} s", event.node or "", event.describe(), event.reporter)
    if len(events) > NODE_EVENTS_SHOWN:
        table.caption = f"{summary}; {len(events) - NODE_EVENTS_SHOWN} more not shown"
    return table
