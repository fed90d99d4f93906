"""`mirrorchaos shrink` on a real failing run: nodes that drop the redelivered flag,
killed twice; the shrunk schedule is one kill, still failing with `duplicate` when
`mirrorchaos run` replays the file it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.run.test_run import mirrorchaos

pytestmark = [pytest.mark.campaign,  # the campaign-tests session: about six runs
              pytest.mark.timeout(1200)]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "broken-redelivery.toml"


def test_a_failing_run_shrinks_to_one_kill_that_still_fails_the_same_way(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store"
    done = mirrorchaos("run", str(EXAMPLE), "--seed", "5", "--store", str(store),
                       "--no-live", timeout=150)
    assert done.returncode == 1, done.stderr
    run = (store / "latest").resolve()

    done = mirrorchaos("shrink", str(run), "--max-replays", "8", timeout=900)
    assert done.returncode == 0, done.stderr
    (work,) = (run / "shrink").iterdir()
    record = json.loads((work / "shrink.json").read_text())
    assert record["kind"] == "duplicate"
    assert record["original"]["faults"] == 2 and record["shrunk"]["faults"] == 1
    assert len(record["replays"]) <= 8 and record["replays"][0]["still_fails"]
    # the shrunk schedule is one that a replay saw fail
    shrunk_file = Path(record["scenario_file"])
    kept = [r for r in record["replays"] if r["still_fails"]]
    assert shrunk_file.read_text() == Path(kept[-1]["scenario_file"]).read_text()

    again = mirrorchaos("run", str(shrunk_file), "--seed", "5", "--store",
                        str(tmp_path / "again"), "--no-live", timeout=150)
    assert again.returncode == 1, again.stderr
    results = json.loads(((tmp_path / "again" / "latest").resolve() / "results.json")
                         .read_text())
    assert "duplicate" in {v["kind"] for v in results["violations"]}
    assert len(results["faults"]) == 1
