"""The checker benchmark runs and reports; memory stays a few bytes per message.

No timing is asserted (performance is measured by the bench, not by tests).
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from harness.checker import check
from harness.checker.bench import generate, main
from harness.history import read_history


def test_the_bench_prints_its_figures_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--ops", "3000", "--tracemalloc"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["ops"] >= 3000 and figures["valid"] is True
    for key in ("check_s", "ops_per_s", "peak_rss_mib", "check_tracemalloc_peak_mib",
                "ledger_bytes_per_message"):
        assert figures[key] is not None
    assert figures["counts"]["lost"] == 0 and figures["counts"]["redelivered"] >= 0


def _check_peak(path: Path) -> tuple[int, int]:
    tracemalloc.start()
    result = check(read_history(path))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert result.valid is True
    return peak, result.counts["attempted"]


def test_memory_grows_by_a_few_bytes_per_acked_message(tmp_path: Path) -> None:
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    generate(small, 10_000, seed=3)
    generate(large, 40_000, seed=3)
    small_peak, small_messages = _check_peak(small)
    large_peak, large_messages = _check_peak(large)
    per_message = (large_peak - small_peak) / (large_messages - small_messages)
    # the ledger's 12 bytes a message, doubled at worst by array growth; nothing else
    assert per_message < 40, per_message
