"""A real crash: SIGKILL a process that is committing, then recover in the parent."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from .crash_child import SEGMENT_BYTES, payload
from .helpers import reopen

CHILD = Path(__file__).with_name("crash_child.py")
ROOT = Path(__file__).resolve().parents[2]


def _seqs(field: str) -> list[int]:
    return [] if field == "-" else [int(s) for s in field.split(",")]


def _run_and_kill(directory: Path, first_seq: int, commits: int, linger: float) -> list[str]:
    """Returns the complete lines the child printed before SIGKILL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = subprocess.Popen([sys.executable, str(CHILD), str(directory), str(first_seq)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    assert child.stdout is not None and child.stderr is not None
    lines: list[str] = []
    try:
        while sum(line.startswith("C ") for line in lines) < commits:
            line = child.stdout.readline()
            assert line, f"child exited early: {child.stderr.read()}"
            lines.append(line)
        time.sleep(linger)  # so the kill lands at varying points of a commit
    finally:
        child.send_signal(signal.SIGKILL)
        # Not communicate(): it reads the pipe's fd and would skip what readline buffered.
        rest = child.stdout.read()
        child.wait()
        child.stdout.close()
        child.stderr.close()
    assert child.returncode == -signal.SIGKILL
    return [line for line in lines + rest.splitlines(keepends=True) if line.endswith("\n")]


def test_sigkill_loses_no_reported_commit_and_invents_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    live: dict[int, bytes] = {}  # what the store must hold, as of the last recovery
    for run in range(5):
        lines = _run_and_kill(tmp_path, run * 1_000_000, rng.randint(30, 400),
                              rng.random() * 0.02)
        in_flight: tuple[list[int], list[int]] = ([], [])
        expected = dict(live)
        for line in lines:
            kind, *fields = line.split()
            if kind == "S":
                in_flight = (_seqs(fields[0]), _seqs(fields[1]))
            else:  # the iteration announced last is committed
                appends, removes = in_flight
                expected.update((seq, payload(seq)) for seq in appends)
                for seq in removes:
                    del expected[seq]
                in_flight = ([], [])
        # The interrupted iteration may have reached the disk wholly, partly or not at all.
        maybe_added, maybe_removed = in_flight

        store, recovery = reopen(tmp_path, segment_bytes=SEGMENT_BYTES)
        assert set(recovery.queues) <= {"q"}
        recovered = dict(recovery.queues.get("q", []))
        missing = set(expected) - set(recovered) - set(maybe_removed)
        assert not missing, f"run {run}: reported commits lost: {sorted(missing)[:10]}"
        invented = set(recovered) - set(expected) - set(maybe_added)
        assert not invented, f"run {run}: unexpected messages: {sorted(invented)[:10]}"
        assert all(recovered[seq] == payload(seq) for seq in recovered)
        store.close()
        live = recovered
