"""The campaign's rich terminal summary."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from reports.soak.merge import PERCENTILES, CampaignReport, _pname
from reports.soak.page import campaign_title, overall_word

_STYLES = {"valid": "green", "invalid": "red", "unknown": "yellow"}
WIDE = 100  # columns from which the runs table has room for each run's worker


def _n(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def render_campaign(report: CampaignReport, console: Console) -> None:
    word = overall_word(report)
    style = {"VALID": "green", "INVALID": "red"}.get(word, "yellow")
    plan = report.plan or {}
    console.rule(f"mirrorchaos {campaign_title(report)}")
    console.print(f"campaign [{style}]{word}[/{style}]: {len(report.runs)} runs, "
                  + ", ".join(f"[{_STYLES.get(v, 'white')}]{n} {v}[/]"
                              for v, n in sorted(report.verdicts.items()))
                  + (f"; root seed {plan['root_seed']}" if "root_seed" in plan else ""))
    per_scenario = report.verdicts_per_scenario
    if len(per_scenario) > 1:
        for scenario, counts in per_scenario.items():
            console.print(f"  {scenario}: " + ", ".join(
                f"[{_STYLES.get(v, 'white')}]{n} {v}[/]" for v, n in sorted(counts.items())))

    # whole seeds even at 80 columns: caveats, faults and times are in report.html
    runs = Table(title="Runs (conf. = confirmed, viol. = violations)", title_justify="left")
    for head in ("#", "seed", "status", "verdict", "conf.", "lost", "viol.", "p99 ms"):
        runs.add_column(head, justify="left" if head in ("seed", "status", "verdict")
                        else "right", no_wrap=True)
    wide = console.width >= WIDE  # room for the worker too: else a line per worker below
    if wide:
        runs.add_column("worker", no_wrap=True)
    for r in report.runs:
        verdict_style = _STYLES.get(r["verdict"], "white")
        runs.add_row(str(r["index"]), str(r["seed"]),
                     r["status"] if r["status"] == "done" else f"[red]{r['status']}[/red]",
                     f"[{verdict_style}]{r['verdict']}[/]", _n(r["confirmed"]), _n(r["lost"]),
                     _n(r["violations"]), _n(r["history_p99_ms"]),
                     *([_n(r["worker"])] if wide else []))
    console.print(runs)
    per_worker: dict[str, list[str]] = {}
    for r in report.runs:
        per_worker.setdefault(_n(r["worker"]), []).append(str(r["index"]))
    console.print("runs per worker: " + "; ".join(
        f"{worker} {len(indexes)} (#{', '.join(indexes)})"
        for worker, indexes in per_worker.items()),
        markup=False, highlight=False)

    if report.anomalies:
        table = Table(title="Anomalies per fault kind in force", title_justify="left")
        for head in ("fault kind", "anomaly", "standing", "messages", "runs"):
            table.add_column(head, justify="right" if head in ("messages", "runs") else "left")
        for a in report.anomalies:
            s = "red" if a["standing"] == "violation" else "yellow"
            table.add_row(a["fault_kind"], a["anomaly"], f"[{s}]{a['standing']}[/{s}]",
                          str(a["messages"]), str(a["runs"]))
        console.print(table)
    else:
        console.print("no anomalies in any run")
    if report.faults:
        console.print("faults injected: " + ", ".join(
            f"{f['fault_kind']} {f['injected']} (in {f['runs']} runs)" for f in report.faults))

    latency = Table(title="Confirm latency across runs (ms, percentile_approx over the "
                    "histories)", title_justify="left")
    for head in ("scenario", "runs", "confirms", *[f"p{q * 100:g}" for q in PERCENTILES],
                 "max"):
        latency.add_column(head, justify="left" if head == "scenario" else "right")
    rows = [("all runs", report.latency.get("overall") or {}),
            *[(str(r["scenario"]), r) for r in report.latency.get("per_scenario") or []]]
    for label, row in rows:
        latency.add_row(label, _n(row.get("runs")), _n(row.get("confirms")),
                        *[_n(row.get(_pname(q)), 2) for q in PERCENTILES],
                        _n(row.get("max_ms"), 2))
    console.print(latency)

    if report.failing:
        console.print("[red]failing runs[/red], each with the command that replays it:")
        for r in report.failing:
            why = f" — {r['error']}" if r["error"] else ""
            where = f" on {r['worker']}" if r["worker"] else ""
            console.print(f"  seed {r['seed']} ({r['scenario']}: {r['status']}, "
                          f"{r['verdict']}){where}{why}",
                          markup=False, highlight=False, soft_wrap=True)
            console.print(f"    {r['replay']}", markup=False, highlight=False, soft_wrap=True)
    console.print(f"campaign stored in {report.directory} (report.html, report.json, "
                  "runs/anomalies/faults/latency .parquet)", markup=False, highlight=False,
                  soft_wrap=True)
