"""What a harness makes that must not outlive it, written down with its owner, so that
the next harness removes what a dead one left (README, "What a killed harness leaves"):

* each process-runtime run has an entry in a ledger directory while it lives (node
  processes live in sessions of their own and outlive a SIGKILLed harness);
* each temporary directory a harness makes (an image build's, a run's data) holds a file
  naming its owner (`make_dir`), written as the directory is made.

`reap` stops the runs and removes the directories whose owner is dead, with whatever
still works in them. The Docker runtime does the same for containers with labels
(`reaper`); the owner test is the same.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import psutil

from faults.lazyfs import unmount_under

from . import reaper

OWNER_FILE = ".mirrorchaos-owner.json"
STOP_TIMEOUT = 5.0  # seconds for a process of a session to act on SIGTERM


def ledger_dir() -> Path:
    return Path(tempfile.gettempdir()) / "mirrorchaos-process-runs"


def _entry(run_id: str) -> str:
    """The run's entry name: the run id alone may repeat (the same scenario and seed
    started in the same second by two campaigns side by side), its owner's pid not."""
    return f"{run_id}.{os.getpid()}"


def _write(path: Path, doc: dict[str, Any]) -> None:
    """Whole or not at all: a reader never sees half an owner."""
    tmp = path.with_name(f"{path.name}.tmp")
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    tmp.replace(path)


def enter(run_id: str, record: dict[str, Any]) -> None:
    directory = ledger_dir()
    directory.mkdir(parents=True, exist_ok=True)
    _write(directory / f"{_entry(run_id)}.json", {**record, "owner": reaper.labels(run_id)})


def leave(run_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        (ledger_dir() / f"{_entry(run_id)}.json").unlink()


def make_dir(prefix: str, *, owned: bool = True) -> Path:
    """A new directory in the temp directory, named ``prefix`` and random characters.
    ``owned``: this process is its owner, so the next harness removes it if this one
    dies first; a detached cluster's directory is not owned (it outlives its command on
    purpose, until ``cluster down``)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if owned:
        _write(path / OWNER_FILE, reaper.owner())
    return path


def reap(stop: Callable[[dict[str, Any]], None]) -> list[str]:
    """Stop (with ``stop``) every run whose owner is dead, then remove every directory
    whose owner is dead (`remove_dir`); returns the stopped runs' ids. An entry or owner
    file that cannot be read is left alone, so nothing is removed on a guess."""
    reaped = []
    for path in sorted(ledger_dir().glob("*.json")):
        entry = _read(path)
        if entry is None or not isinstance(entry.get("owner"), dict) \
                or reaper.owner_alive(entry["owner"]):
            continue
        stop(entry)
        path.unlink(missing_ok=True)
        reaped.append(str(entry.get("run_id", path.stem)))
    for owner_file in sorted(Path(tempfile.gettempdir()).glob(f"mirrorchaos-*/{OWNER_FILE}")):
        owner = _read(owner_file)
        if owner is not None and not reaper.owner_alive(owner):
            remove_dir(owner_file.parent)
    return reaped


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def remove_dir(path: Path) -> None:
    """Remove a directory `make_dir` made, with what still works in it: first each
    process session working in it (a build's mmdebstrap or pip with all they started, a
    node), then each file system mounted in it (what a killed mmdebstrap leaves bound
    from the host's /dev, /proc and /sys; a node's lazyfs). Nothing is deleted while a
    mount stays: that would delete inside the host's /sys. The owner file goes last, so
    that a later harness tries again what could not be removed; what is left is said on
    stderr."""
    for session in _sessions_working_in(path):
        end_session(session)
    unmount_under(path)
    for point in _mounts_under(path):
        subprocess.run(["umount", "--lazy", point], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if mounted := _mounts_under(path):
        _left_behind(path, f"still mounted there: {', '.join(mounted)}")
        return
    with contextlib.suppress(FileNotFoundError):  # another harness removed it first
        for child in path.iterdir():
            if child.name == OWNER_FILE:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
        if left := sorted(child.name for child in path.iterdir() if child.name != OWNER_FILE):
            _left_behind(path, f"cannot delete {', '.join(left)}")
            return
        (path / OWNER_FILE).unlink(missing_ok=True)
        path.rmdir()


def _left_behind(path: Path, why: str) -> None:
    print(f"mirrorchaos: {path} is left for a later harness to remove: {why}",
          file=sys.stderr)


def _sessions_working_in(path: Path) -> set[int]:
    """The harness starts each build step, node, proxy and lazyfs in a session of its
    own, its leader naming its files in its command line (mmdebstrap its tarball, pip
    its wheel directory, a node its data directory). A session is found by that, or,
    once its leader is gone, by any member naming them (mmdebstrap's forks do): such a
    session is ours for sure, with no pid written down that a new process could have
    taken since. A session whose leader lives and names nothing there (a shell with a
    `less` of a file there) is not ours."""
    names = re.compile(re.escape(str(path)) + "(/|$)")
    found = set()
    for process in psutil.process_iter(["cmdline"]):
        if not any(names.search(arg) for arg in process.info["cmdline"] or []):
            continue
        # A pid is not given to a new process while it still names a session.
        session = _session(process.pid)
        if session is not None and (session == process.pid or not psutil.pid_exists(session)):
            found.add(session)
    return found


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:  # gone
        return None


def end_session(session: int) -> None:
    """End every process of ``session``, the ones its processes start meanwhile too
    (mmdebstrap's clean-up forks), until none is left or none will go."""
    ended: list[psutil.Process] = []
    while True:
        members = [process for process in psutil.process_iter(["status"])
                   if process.info["status"] != psutil.STATUS_ZOMBIE
                   and _session(process.pid) == session]
        if not members or members == ended:
            return
        end(members, STOP_TIMEOUT)
        ended = members


def end(procs: Iterable[psutil.Process], timeout: float) -> None:
    """SIGTERM, then SIGKILL what has not exited after ``timeout`` seconds."""
    procs = list(procs)
    for process in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.resume()  # a paused process must run to act on SIGTERM
            process.terminate()
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=timeout)


def _mounts_under(path: Path) -> list[str]:
    """Mount points inside ``path``, deepest first, from /proc/self/mounts."""
    prefix = str(path.resolve()) + "/"
    points = []
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            # Spaces and the like are octal escapes in this file.
            point = line.split()[1].encode().decode("unicode_escape")
            if point.startswith(prefix):
                points.append(point)
    return sorted(points, key=lambda point: point.count("/"), reverse=True)
