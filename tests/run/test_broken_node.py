"""The harness catches a broken broker: the same failover scenario on nodes that drop
the redelivered flag (``--break unflagged-redelivery``) turns invalid with exactly that
violation, while the correct build passes with the same seed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.run.test_run import mirrorchaos

pytestmark = pytest.mark.campaign  # the campaign-tests session: two runs, a minute


def run(tmp_path: Path, scenario: str) -> tuple[int, dict[str, Any]]:
    store = tmp_path / "store"
    done = mirrorchaos("run", scenario, "--runtime", "process", "--seed", "7",
                       "--time-limit", "12", "--store", str(store), timeout=110)
    results = json.loads(((store / "latest").resolve() / "results.json").read_text())
    return done.returncode, results


def test_dropping_the_redelivered_flag_is_a_violation_the_correct_node_has_not(
    tmp_path: Path,
) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text('base = "consume-survives-kill"\n'
                      'node_args = ["--break", "unflagged-redelivery"]\n')
    code, results = run(tmp_path / "broken", str(broken))
    assert code == 1 and results["valid"] is False
    kinds = {v["kind"] for v in results["violations"]}
    assert kinds == {"duplicate"}
    assert results["counts"]["duplicated_unflagged"] > 0

    code, results = run(tmp_path / "correct", "consume-survives-kill")
    assert code == 0 and results["valid"] is True
    counts = results["counts"]
    assert counts["redelivered"] > 0 and counts["duplicated_unflagged"] == 0
