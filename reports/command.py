"""``mirrorchaos report DIR``: the terminal report of a stored run, and its report.html
and junit.xml written beside its history. The checker runs first when results.json is
missing or older than the history. Exit codes are the verdict's, as for ``check``:
0 valid, 1 invalid, 2 unknown, 254 bad input."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from rich.console import Console

from harness.checker import EXIT_BAD_INPUT, exit_code
from harness.history import BadHistory
from reports.html import write_html
from reports.junit import write_junit
from reports.load import load
from reports.terminal import render


def add_report_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "report",
        help="re-render the reports of a stored run (terminal, report.html, junit.xml)",
        description="Print the terminal report of a run directory (or history file) and "
        "write report.html (and junit.xml with --junit) beside it, checking the history "
        "first when results.json is missing or outdated. Exit 0 valid, 1 invalid, "
        "2 unknown, 254 bad input.")
    p.add_argument("path", metavar="DIR", help="run directory or history.jsonl")
    p.add_argument("--html", action=argparse.BooleanOptionalAction, default=True,
                   help="write report.html (default: yes)")
    p.add_argument("--junit", action="store_true", help="also write junit.xml")
    p.set_defaults(handler=lambda args: report_command(args.path, html=args.html,
                                                      junit=args.junit))


def report_command(path: str | Path, *, html: bool = True, junit: bool = False,
                   console: Console | None = None, err: TextIO | None = None) -> int:
    out = console or Console()
    try:
        report = load(path)
    except BadHistory as error:
        print(f"bad input: {error}", file=err or sys.stderr)
        return EXIT_BAD_INPUT
    render(report, out)
    written = []
    if html:
        written.append(write_html(report))
    if junit:
        written.append(write_junit(report))
    for target in written:
        out.print(f"wrote {target}", soft_wrap=True)  # a path must stay copyable
    return exit_code(report.results.get("valid", "unknown"))


def report_run(run_dir: Path, console: Console) -> None:
    """A run's full report as ``mirrorchaos run`` ends: the terminal report, and
    report.html and junit.xml written into the run directory."""
    report = load(run_dir)
    render(report, console)
    write_html(report)
    write_junit(report)
