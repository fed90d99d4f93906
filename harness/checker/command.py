"""``mirrorchaos check PATH``: re-check a stored run and write its results.json.

PATH is a run directory (``history.jsonl`` and ``nodes/*.events.jsonl``) or a history
file. Exit codes: 0 valid, 1 invalid, 2 unknown, 254 bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, TextIO

from harness.checker.checkers import check
from harness.checker.result import EXIT_BAD_INPUT, exit_code
from harness.checker.results import results_json
from harness.history.errors import BadHistory
from harness.history.node_events import read_run
from harness.history.reader import History, read_history


def check_path(path: str | Path) -> dict[str, Any]:
    """Check a run directory or history file; raises :class:`BadHistory` on bad input."""
    target = Path(path)
    history: History = read_run(target) if target.is_dir() else read_history(target)
    return results_json(check(history), history.header)


def check_command(path: str | Path, *, write: bool = True, out: TextIO = sys.stdout,
                  err: TextIO = sys.stderr) -> int:
    """Check, write ``results.json`` beside the history (unless ``write`` is false),
    print the verdict and counts as one JSON line, and return the exit code."""
    target = Path(path)
    try:
        results = check_path(target)
    except BadHistory as error:
        print(f"bad input: {error}", file=err)
        return EXIT_BAD_INPUT
    if write:
        folder = target if target.is_dir() else target.parent
        (folder / "results.json").write_text(json.dumps(results, indent=2) + "\n",
                                             encoding="utf-8")
    print(json.dumps({"valid": results["valid"], "counts": results["counts"]}), file=out)
    return exit_code(results["valid"])
