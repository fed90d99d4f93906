"""The detection matrix as people read it: a rich terminal table and a self-contained
``report.html`` section with every run linked to its own report."""

from __future__ import annotations

import os
from html import escape
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harness.power.matrix import CORRECT, Cell, Matrix
from reports.html import PAGE_STYLE, table_html

REPORT_FILE = "report.html"


def describe(matrix: Matrix, cell: Cell | None, target: str, seed: int) -> str:
    """One seed's outcome for a target, in words."""
    if cell is None:
        return "not run"
    kinds = ", ".join(cell.violations) or "no violation"
    if target == CORRECT:
        if matrix.passed(target, seed):
            return f"valid in all {len(matrix.scenarios)}"
        return f"{cell.verdict} in {cell.scenario}: {kinds}"
    if cell.caught:
        return f"caught by {cell.scenario} after {cell.detected_after:g}s: {kinds}"
    return f"MISSED ({cell.verdict}: {kinds})"


def render_power(matrix: Matrix, console: Console) -> None:
    table = Table(title="detection matrix", show_lines=False)
    table.add_column("target", no_wrap=True)
    table.add_column("must report", overflow="fold")
    for seed in matrix.seeds:
        table.add_column(f"seed {seed}", overflow="fold")
    for target in matrix.targets:
        row = [target, ", ".join(matrix.expected.get(target, ())) or "valid"]
        for seed in matrix.seeds:
            text = describe(matrix, matrix.outcome(target, seed), target, seed)
            style = "green" if matrix.passed(target, seed) else "red"
            row.append(f"[{style}]{escape_markup(text)}[/{style}]")
        table.add_row(*row)
    console.print(table)
    missed = matrix.missed()
    bugs = len(matrix.expected) * len(matrix.seeds)
    caught = sum(1 for t in matrix.expected for s in matrix.seeds if matrix.passed(t, s))
    if not matrix.correct:
        verdict = "not run"
    elif all(matrix.passed(CORRECT, s) for s in matrix.seeds):
        verdict = "valid on every seed"
    else:
        verdict = "NOT valid on every seed"
    console.print(f"caught {caught} of {bugs} (bug, seed) pairs; correct broker {verdict}")
    if missed:
        console.print("[red]failed:[/red] " + ", ".join(f"{t} (seed {s})" for t, s in missed))


def escape_markup(text: str) -> str:
    return text.replace("[", r"\[")


def power_section(matrix: Matrix, base: Path) -> str:
    """The matrix and every run, as an HTML section; run links relative to ``base``."""
    head = ["target", "must report", *(f"seed {s}" for s in matrix.seeds)]
    rows, classes = [], []
    for target in matrix.targets:
        row = [escape(target), escape(", ".join(matrix.expected.get(target, ())) or "valid")]
        row += [escape(describe(matrix, matrix.outcome(target, s), target, s))
                for s in matrix.seeds]
        rows.append(row)
        classes.append("violation" if not all(matrix.passed(target, s) for s in matrix.seeds)
                       else "")
    runs = [[escape(c.target), str(c.seed), escape(c.scenario), escape(c.verdict),
             escape(", ".join(c.violations)), f"{c.seconds:g}", _link(c, base)]
            for c in matrix.cells]
    return ("<h2>Detection matrix</h2>" + table_html(head, rows, classes)
            + "<h2>Runs</h2>" + table_html(
                ["target", "seed", "scenario", "verdict", "violations", "seconds", "report"],
                runs))


def _link(cell: Cell, base: Path) -> str:
    target = Path(cell.run_dir) / "report.html"
    href = os.path.relpath(target, base)
    return f"<a href='{escape(href)}'>{escape(Path(cell.run_dir).name)}</a>"


def write_power_html(matrix: Matrix, directory: Path) -> Path:
    verdict = "every bug caught, correct broker valid" if not matrix.missed() else (
        f"{len(matrix.missed())} (target, seed) pairs failed")
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>mirrorchaos power"
            f"</title><style>{PAGE_STYLE}</style></head><body><h1>Detection power</h1>"
            f"<p>{escape(verdict)}; scenarios {escape(', '.join(matrix.scenarios))}.</p>"
            f"{power_section(matrix, directory)}</body></html>")
    path = directory / REPORT_FILE
    path.write_text(page, encoding="utf-8")
    return path
