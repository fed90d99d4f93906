"""Finding a run in a store by its seed: the run's own directory, never another
directory that mentions the seed (a node's data directory in the run's TMPDIR), the
newest of several."""

from __future__ import annotations

from pathlib import Path

from harness.run.store import find_run_dir, new_run_dir


def test_the_run_of_a_seed_is_found_and_nothing_else_that_names_it(tmp_path: Path) -> None:
    assert find_run_dir(tmp_path, 5) is None
    # what a run's TMPDIR holds beside its store (a soak task keeps both in one place)
    (tmp_path / "tmp" / "mirrorchaos-smoke-20261127T185213-seed5-3u7op05y").mkdir(
        parents=True)
    (tmp_path / "smoke" / "20261127T185213-seed55").mkdir(parents=True)  # another seed
    assert find_run_dir(tmp_path, 5) is None
    first = new_run_dir(tmp_path, "smoke", 5)
    second = new_run_dir(tmp_path, "smoke", 5)  # the same second: a suffix, if needed
    assert find_run_dir(tmp_path, 5) == max(first, second)
    assert find_run_dir(tmp_path, 55) == tmp_path / "smoke" / "20261127T185213-seed55"
