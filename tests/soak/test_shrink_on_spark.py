"""`mirrorchaos shrink --spark-master`: the candidates replayed as Spark tasks (each
run's scenario file sent with its task, the run sent back and stored on the driver)
shrink a real failing run as the local replays do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.run.test_run import mirrorchaos

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "broken-redelivery.toml"


def test_candidates_replayed_on_spark_shrink_a_failing_run(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = mirrorchaos("run", str(EXAMPLE), "--seed", "5", "--store", str(store),
                       "--no-live", timeout=150)
    assert done.returncode == 1, done.stderr
    run = (store / "latest").resolve()

    done = mirrorchaos("shrink", str(run), "--spark-master", "local[2]", "--jobs", "2",
                       "--max-replays", "5", timeout=800)
    assert done.returncode == 0, done.stderr
    assert "executor driver" in done.stderr  # each replay's progress line, from Spark
    (work,) = (run / "shrink").iterdir()
    record = json.loads((work / "shrink.json").read_text())
    assert record["original"]["faults"] == 2 and record["shrunk"]["faults"] == 1
    replays = record["replays"]
    assert replays[0]["still_fails"] and len(replays) <= 5
    for replay in replays:  # stored on the driver from the tasks' rows
        assert Path(replay["log"]).stat().st_size > 0
        assert (Path(replay["run_dir"]) / "results.json").exists()
