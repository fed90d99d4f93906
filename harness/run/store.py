"""The store: ``store/<scenario>/<timestamp>-seed<N>/`` per run, with
``store/latest`` pointing at the newest."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any

_STAMP = "%Y%m%dT%H%M%S"


def new_run_dir(store: Path, scenario: str, seed: int) -> Path:
    """Make the run's directory (a second run in the same second gets a suffix) and
    point ``store/latest`` at it."""
    stamp = time.strftime(_STAMP)
    base = store / scenario
    base.mkdir(parents=True, exist_ok=True)
    for attempt in range(1000):
        name = f"{stamp}-seed{seed}" + (f"-{attempt}" if attempt else "")
        try:
            (base / name).mkdir()
        except FileExistsError:
            continue
        run_dir = base / name
        _point_latest(store, run_dir)
        return run_dir
    raise FileExistsError(f"no free run directory for {base / stamp}-seed{seed}")


def find_run_dir(store: Path, seed: int) -> Path | None:
    """The newest run of ``seed`` in ``store``, as `new_run_dir` named it (nothing
    else under the store that mentions the seed, such as a node's data directory)."""
    name = re.compile(rf"\d{{8}}T\d{{6}}-seed{seed}(-\d+)?")
    found = sorted(p for p in store.glob("*/*") if name.fullmatch(p.name) and p.is_dir()
                   and not p.parent.is_symlink())
    return found[-1] if found else None


def new_campaign_dir(base: Path) -> Path:
    """Make ``base/<timestamp>/`` for a campaign (a suffix when taken) and point
    ``base/latest`` at it."""
    stamp = time.strftime(_STAMP)
    base.mkdir(parents=True, exist_ok=True)
    for attempt in range(1000):
        path = base / (stamp + (f"-{attempt}" if attempt else ""))
        try:
            path.mkdir()
        except FileExistsError:
            continue
        _point_latest(base, path)
        return path
    raise FileExistsError(f"no free campaign directory for {base / stamp}")


def _point_latest(store: Path, run_dir: Path) -> None:
    # Made beside and renamed over, so readers never see it missing.
    link = store / "latest"
    tmp = store / f".latest-{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    tmp.symlink_to(run_dir.relative_to(store))
    tmp.replace(link)


def write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")
