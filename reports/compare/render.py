"""A comparison shown two ways with the same cells: a rich table for the terminal and a
Markdown table (compare.md) for a closing note or a CI log; each followed by where the
runs are stored and what differs."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from reports.compare.comparison import Comparison, Row, TargetRun
from reports.describe import number

FIGURES = ("verdict", "violations", "caveats", "confirmed", "p50 ms", "p99 ms", "confirms/s")
_VERDICT_COLOUR = {"VALID": "green", "INVALID": "red", "UNKNOWN": "yellow"}
NO_DIFFERENCES = "no differences: the same verdict and violation kinds on every target"


def figures(run: TargetRun) -> list[str]:
    """The run's cells, in the order of FIGURES."""
    violations = ", ".join(f"{kind} {count}" for kind, count in sorted(run.violations.items()))
    return [run.verdict, violations or "none", str(run.caveats),
            "n/a" if run.confirmed is None else str(run.confirmed),
            number(run.confirm_p50_ms), number(run.confirm_p99_ms), number(run.confirms_per_s)]


def title(comparison: Comparison) -> str:
    return "Comparison: " + " vs ".join(comparison.targets)


def run_lines(comparison: Comparison) -> list[str]:
    return [f"{row.scenario} seed {row.seed} on {target}: {run.run_dir or 'no run directory'}"
            for row in comparison.rows for target, run in row.runs.items()]


def difference_lines(comparison: Comparison) -> list[str]:
    """One line a row with something that differs; none when nothing does."""
    return [f"{row.scenario} seed {row.seed} "
            f"({'verdicts differ' if row.differs else 'same verdicts'}): {row.reason}"
            for row in comparison.rows if row.reason is not None]


def render_comparison(comparison: Comparison, console: Console) -> None:
    """The table with a column group per target when it fits ``console``'s width, else
    (like the run report's figures) a table per row, one figure a line."""
    table = _grouped(comparison)
    # measured unbounded: a table's measure is clamped to the width it is given
    natural = console.measure(table, options=console.options.update_width(10_000)).maximum
    if natural <= console.width:
        console.print(table)
    else:
        console.print(title(comparison), style="bold")
        console.print(*(_transposed(row) for row in comparison.rows))
    console.print("Runs", style="bold")
    for line in run_lines(comparison):  # whole paths, for a click or a copy
        console.print(f"  {line}", markup=False, highlight=False, soft_wrap=True)
    differences = difference_lines(comparison)
    console.print("Differences", style="bold")
    for line in differences or [NO_DIFFERENCES]:
        console.print(f"  {line}", markup=False, highlight=False)


def _grouped(comparison: Comparison) -> Table:
    table = Table(title=title(comparison), title_justify="left")
    table.add_column("scenario")
    table.add_column("seed", justify="right")
    for target in comparison.targets:  # the target heads its group's first column
        for i, figure in enumerate(FIGURES):
            table.add_column(f"{target if i == 0 else ''}\n{figure}",
                             justify="left" if i < 2 else "right")
    table.add_column("differs")
    for row in comparison.rows:
        table.add_row(row.scenario, str(row.seed),
                      *(cell for run in row.runs.values() for cell in _styled(run)),
                      _differs(row, "yes"))
    return table


def _transposed(row: Row) -> Table:
    table = Table(title=Text.assemble(f"{row.scenario} seed {row.seed}  ",
                                      _differs(row, "verdicts differ")),
                  title_justify="left")
    table.add_column("figure")
    for target in row.runs:
        table.add_column(target, justify="right")
    columns = [_styled(run) for run in row.runs.values()]
    for i, figure in enumerate(FIGURES):
        table.add_row(figure, *(cells[i] for cells in columns))
    return table


def _differs(row: Row, word: str) -> Text:
    return Text(word, style="bold red") if row.differs else Text("")


def _styled(run: TargetRun) -> list[Text]:
    verdict, *rest = figures(run)
    return [Text(verdict, style=_VERDICT_COLOUR[verdict]), *(Text(cell) for cell in rest)]


def markdown(comparison: Comparison) -> str:
    """The terminal table as Markdown, then the runs and the differences as lists."""
    header = ["scenario", "seed", *(f"{target} {figure}" for target in comparison.targets
                                    for figure in FIGURES), "differs"]
    align = ["---", "---:", *(["---", "---", *["---:"] * (len(FIGURES) - 2)]
                              * len(comparison.targets)), "---"]
    lines = [f"## {title(comparison)}", "", _md_row(header), _md_row(align)]
    for row in comparison.rows:
        cells = [cell for run in row.runs.values() for cell in figures(run)]
        lines.append(_md_row([row.scenario, str(row.seed), *cells,
                              "yes" if row.differs else ""]))
    lines += ["", "Runs:", "", *(f"- {line}" for line in run_lines(comparison))]
    differences = difference_lines(comparison)
    lines += ["", "Differences:", "", *(f"- {line}" for line in differences or [NO_DIFFERENCES])]
    return "\n".join(lines) + "\n"


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"
