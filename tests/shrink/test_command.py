"""`mirrorchaos shrink` on what is not a failing stored run: a clear error naming the
file or the kind, exit 254, and no replay started."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from harness.scenarios import SCENARIOS
from harness.shrink.replay import violation_kinds
from tests.run.test_run import mirrorchaos


def stored_run(directory: Path, valid: object, violations: list[dict[str, object]]) -> Path:
    directory.mkdir(parents=True)
    scenario = dataclasses.asdict(SCENARIOS["consume-survives-kill"])
    (directory / "config.json").write_text(json.dumps(
        {"scenario": scenario, "seed": 7, "runtime": "process"}))
    (directory / "results.json").write_text(json.dumps(
        {"valid": valid, "violations": violations}))
    return directory


def test_a_directory_without_a_run_is_bad_input(tmp_path: Path) -> None:
    done = mirrorchaos("shrink", str(tmp_path / "nothing"))
    assert done.returncode == 254
    assert "no readable config.json" in done.stderr


def test_a_run_that_passed_has_nothing_to_shrink(tmp_path: Path) -> None:
    run = stored_run(tmp_path / "run", True, [])
    done = mirrorchaos("shrink", str(run))
    assert done.returncode == 254
    assert "did not fail" in done.stderr and not (run / "shrink").exists()


def test_a_kind_the_run_does_not_have_is_named(tmp_path: Path) -> None:
    run = stored_run(tmp_path / "run", False, [{"kind": "lost", "count": 3}])
    done = mirrorchaos("shrink", str(run), "--kind", "duplicate")
    assert done.returncode == 254
    assert "--kind duplicate" in done.stderr and "it has lost" in done.stderr


def test_a_broken_config_names_its_file(tmp_path: Path) -> None:
    run = stored_run(tmp_path / "run", False, [{"kind": "lost", "count": 3}])
    (run / "config.json").write_text("{not json")
    done = mirrorchaos("shrink", str(run))
    assert done.returncode == 254 and "config.json: not JSON" in done.stderr


def test_the_kind_kept_by_default_is_the_most_numerous() -> None:
    assert violation_kinds({"violations": [
        {"kind": "reordered", "count": 2}, {"kind": "lost", "count": 40},
        {"kind": "duplicate", "count": 2}, {"kind": "reordered", "count": 3}]}) == (
        "lost", "reordered", "duplicate")
    assert violation_kinds({}) == ()
