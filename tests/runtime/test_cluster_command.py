"""`mirrorchaos cluster up|status|down` with the process runtime, each a command of
its own: the cluster outlives `up` and `down` removes it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil

from faults.process.node import amqp_answers

ROOT = Path(__file__).resolve().parents[2]


def mirrorchaos(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reports.cli", "cluster", "--store",
                           str(store), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=False)


def test_up_status_down(tmp_path: Path) -> None:
    up = mirrorchaos(tmp_path, "up", "--runtime", "process", "--nodes", "2")
    assert up.returncode == 0, up.stderr
    state = json.loads((tmp_path / "cluster.json").read_text())
    pids = [identity["pid"] for identity in state["processes"].values()]
    try:
        assert all(psutil.pid_exists(pid) for pid in pids), "the cluster outlives `up`"
        for address in state["nodes"].values():
            host, _, port = address["amqp"].rpartition(":")
            assert amqp_answers(host, int(port))
        status = mirrorchaos(tmp_path, "status")
        assert status.returncode == 0, status.stdout + status.stderr
        assert "n1: amqp" in status.stdout and "link:n2->n1:" in status.stdout
        again = mirrorchaos(tmp_path, "up")
        assert again.returncode == 1 and "already up" in again.stderr
    finally:
        down = mirrorchaos(tmp_path, "down")
    assert down.returncode == 0, down.stderr
    assert not any(psutil.pid_exists(pid) for pid in pids)
    assert not (tmp_path / "cluster.json").exists()
    assert not Path(state["base_dir"]).exists()
    gone = mirrorchaos(tmp_path, "status")
    assert gone.returncode == 1 and "no cluster recorded" in gone.stderr
