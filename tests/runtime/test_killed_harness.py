"""What a killed harness leaves (node processes, proxies, its run's data directory, an
image build's directory and the processes working in it) is gone once the next harness
has started; an interrupted build removes its own. Real harness processes, killed, and
the next harness a real `mirrorchaos` command."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.runtime import ledger

ROOT = Path(__file__).resolve().parents[2]

# An image build's step (mmdebstrap, pip) in a harness of its own: a shell with a child,
# naming its output in the build's directory as the real steps do. It takes Ctrl-C as a
# harness in a terminal does, also when started from a background job, whose
# processes inherit SIGINT ignored (a test run in a script's background hung on it).
BUILD_STEP = """
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
from harness.runtime import image
with image._scratch("rootfs") as scratch:
    image._run("step", ["sh", "-c", "sleep 600 & echo started; wait", "step",
                        str(scratch / "rootfs.tar")], scratch,
               echo=lambda line: print(line, flush=True))
"""


def harness_env(tmp_path: Path) -> dict[str, str]:
    """A temp directory of the test's own: its ledger and its leftovers only."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}


def start_next_harness(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "reports.cli", "scenarios"], cwd=ROOT,
                   env=harness_env(tmp_path), check=True, stdout=subprocess.DEVNULL)


@contextlib.contextmanager
def killed_at_the_end(processes: list[psutil.Process]) -> Iterator[None]:
    """A failing test leaves none of them running."""
    try:
        yield
    finally:
        for process in processes:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


def wait_gone(processes: list[psutil.Process]) -> None:
    """Until none runs (a zombie is gone too: it waits only for its new parent to
    collect it)."""
    def running(process: psutil.Process) -> bool:
        try:
            return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    while any(running(process) for process in processes):
        time.sleep(0.05)


def naming(text: str) -> list[str]:
    """Command lines of the running processes that name ``text``, from /proc."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        command = " ".join(process.info["cmdline"] or [])
        if text in command and process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(command)
    return found


@pytest.mark.campaign  # a scenario run up to its cluster, then the next harness's reaping
def test_a_run_killed_mid_way_leaves_only_its_history_once_the_next_harness_starts(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    killed = subprocess.Popen(
        [sys.executable, "-m", "reports.cli", "run", "smoke", "--runtime", "process",
         "--store", str(store), "--no-live"],
        cwd=ROOT, env=harness_env(tmp_path), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True)
    assert killed.stderr is not None
    told = []
    for line in killed.stderr:
        told.append(line)
        if "phase setting up" in line:  # the cluster is up
            break
    else:
        pytest.fail(f"the run ended before its cluster was up: {''.join(told)}")
    started = psutil.Process(killed.pid).children(recursive=True)
    killed.kill()
    killed.wait()
    killed.stderr.close()
    run_dir = (store / "latest").resolve()
    run_id = json.loads((run_dir / "config.json").read_text())["run_id"]
    with killed_at_the_end(started):
        assert naming(run_id), "a SIGKILLed harness leaves its nodes running"
        start_next_harness(tmp_path)
        wait_gone(started)  # the nodes and the toxiproxy
    assert naming(run_id) == []
    assert [p.name for p in tmp_path.glob(f"mirrorchaos-{run_id}-*")] == []
    assert (run_dir / "history.jsonl").read_text().strip(), "the run's history is kept"


def hold_build_step(tmp_path: Path) -> tuple[subprocess.Popen[str], list[psutil.Process]]:
    """A harness in a build step, and the step's processes."""
    holder = subprocess.Popen([sys.executable, "-c", BUILD_STEP], cwd=ROOT,
                              env=harness_env(tmp_path), stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "step: started"
    step = psutil.Process(holder.pid).children(recursive=True)
    assert len(step) == 2, "the shell and its sleep"
    assert len(list(tmp_path.glob("mirrorchaos-rootfs-*"))) == 1
    return holder, step


def test_an_interrupted_build_ends_its_step_and_removes_its_directory(
        tmp_path: Path) -> None:
    holder, step = hold_build_step(tmp_path)
    with killed_at_the_end(step):
        holder.send_signal(signal.SIGINT)
        assert holder.wait() != 0
        wait_gone(step)
    assert list(tmp_path.glob("mirrorchaos-rootfs-*")) == []


def test_a_killed_builds_step_and_directory_go_as_the_next_harness_starts(
        tmp_path: Path) -> None:
    holder, step = hold_build_step(tmp_path)
    with killed_at_the_end(step):
        holder.kill()
        holder.wait()
        assert all(process.is_running() for process in step), "the step outlives its harness"
        start_next_harness(tmp_path)
        wait_gone(step)
    assert list(tmp_path.glob("mirrorchaos-rootfs-*")) == []


def test_a_directory_whose_owner_lives_is_left_alone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    mine = ledger.make_dir("mirrorchaos-mine-")
    detached = ledger.make_dir("mirrorchaos-detached-", owned=False)
    start_next_harness(tmp_path)
    assert mine.is_dir() and detached.is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts need root (mmdebstrap's are root's)")
def test_nothing_is_deleted_through_a_mount_left_in_a_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A killed mmdebstrap leaves the host's /dev, /proc and /sys bound into its chroot:
    removing the chroot must unmount them, not delete inside them."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    host = tmp_path / "host"
    host.mkdir()
    (host / "kept").write_text("a file of the host")
    build = ledger.make_dir("mirrorchaos-rootfs-")
    bound = build / "chroot" / "sys"
    bound.mkdir(parents=True)
    mount = subprocess.run(["mount", "--bind", str(host), str(bound)],
                           capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {mount.stderr.strip()}")
    try:
        ledger.remove_dir(build)
    finally:  # a failure must not leave the mount behind
        subprocess.run(["umount", "--quiet", str(bound)], check=False, capture_output=True)
    assert (host / "kept").read_text() == "a file of the host"
    assert not build.exists()
