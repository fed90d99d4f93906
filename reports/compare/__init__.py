"""``mirrorchaos compare``: the same scenarios and seeds on several targets (brokers),
side by side."""

from reports.compare.command import add_compare, compare_command, read_run_dir
from reports.compare.comparison import Comparison, Row, RunRecord, TargetRun, compare
from reports.compare.render import markdown, render_comparison

__all__ = [
    "Comparison",
    "Row",
    "RunRecord",
    "TargetRun",
    "add_compare",
    "compare",
    "compare_command",
    "markdown",
    "read_run_dir",
    "render_comparison",
]
