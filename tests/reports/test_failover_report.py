"""The failover table of the terminal report: one row per node fault, from results.json."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from reports import render
from tests.reports.runs import read_results, troubled_history, write_run


def test_each_node_fault_has_a_row_with_its_confirm_gap_at_80_columns(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", troubled_history())
    console = Console(record=True, width=80, file=io.StringIO())
    render(run, console)
    text = console.export_text()
    gaps = read_results(run)["failover"]
    assert gaps, "the fixture run has a kill while publishers confirm"
    assert max(map(len, text.splitlines())) <= 80
    for gap in gaps:
        assert gap["pause"] is not None
        row = (f"{gap['kind']} {gap['fault']} → {', '.join(gap['targets'])}",
               f"{gap['start']:.3f}", f"{gap['pause']:.3f}", f"{gap['pause_from']:+.3f}",
               f"{gap['publisher_pause']:.3f} {gap['publisher']}")
        assert re.search(r" +│ +".join(map(re.escape, row)) + " │", text), text
