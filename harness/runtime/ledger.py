"""The process runtime's reaper: each run is written down, with its owner, in a ledger
directory, so that the next `ProcessRuntime` removes what a dead harness left running
(node processes live in sessions of their own and outlive a SIGKILLed harness). The
Docker runtime does the same with labels (`reaper`); the owner test is the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import reaper


def ledger_dir() -> Path:
    return Path(tempfile.gettempdir()) / "mirrorchaos-process-runs"


def _entry(run_id: str) -> str:
    """The run's entry name: the run id alone may repeat (the same scenario and seed
    started in the same second by two campaigns side by side), its owner's pid not."""
    return f"{run_id}.{os.getpid()}"


def enter(run_id: str, record: dict[str, Any]) -> None:
    directory = ledger_dir()
    directory.mkdir(parents=True, exist_ok=True)
    entry = {**record, "owner": reaper.labels(run_id)}
    tmp = directory / f"{_entry(run_id)}.tmp"
    tmp.write_text(json.dumps(entry), encoding="utf-8")
    tmp.replace(directory / f"{_entry(run_id)}.json")


def leave(run_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        (ledger_dir() / f"{_entry(run_id)}.json").unlink()


def reap(stop: Callable[[dict[str, Any]], None]) -> list[str]:
    """Stop (with ``stop``) every run whose owner is dead; returns their run ids. An
    entry that cannot be read is left alone, so nothing is stopped on a guess."""
    reaped = []
    for path in sorted(ledger_dir().glob("*.json")):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            owner = entry["owner"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if reaper.owner_alive(owner):
            continue
        stop(entry)
        path.unlink(missing_ok=True)
        reaped.append(str(entry.get("run_id", path.stem)))
    return reaped
