"""Run the lazy file system as a process of its own (`LazyMount`), say whether FUSE can
be used here at all (`fuse_unavailable`), and unmount what a dead harness left mounted
(`unmount_under`)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

FSNAME = "lazyfs"


class LazyFSError(RuntimeError):
    """The lazy file system could not be mounted, or did not answer a command."""


def fuse_unavailable() -> str | None:
    """Why a lazy file system cannot be mounted here, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist (no FUSE in this kernel or container)"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed (Debian package fuse3)"
    try:
        os.close(os.open("/dev/fuse", os.O_RDWR))
    except OSError as exc:
        return f"/dev/fuse cannot be opened: {exc.strerror}"
    try:
        import mfusepy  # noqa: F401  (loads libfuse3 through ctypes)
    except (ImportError, OSError, AttributeError) as exc:
        return f"the FUSE binding (mfusepy over libfuse3) does not load: {exc}"
    return None


def mounted(path: Path) -> bool:
    return str(path) in _lazy_mounts()


def _lazy_mounts() -> list[str]:
    """Mount points of every lazy file system, from /proc/self/mounts."""
    found = []
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            source, point, kind = line.split()[:3]
            if source == FSNAME and kind.startswith("fuse"):
                # Spaces and the like are octal escapes in this file.
                found.append(point.encode().decode("unicode_escape"))
    return found


def unmount(path: Path) -> None:
    """Lazily (-z): a mount whose process died ('transport endpoint is not connected')
    or that a process still uses goes now, and the kernel lets go when it can."""
    subprocess.run(["fusermount3", "-u", "-z", str(path)], check=False,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def unmount_under(directory: Path) -> list[str]:
    """Unmount every lazy file system mounted inside ``directory``; returns them."""
    prefix = str(directory.resolve()) + "/"
    leftovers = [point for point in _lazy_mounts() if point.startswith(prefix)]
    for point in leftovers:
        unmount(Path(point))
    return leftovers


def control_address(name: str) -> str:
    """The control socket lives in the abstract namespace: no file to clean up after a
    SIGKILL, and no path-length limit however deep the run directory is."""
    return "\0" + name


@dataclass
class LazyMount:
    """``keep``: file names (globs) whose writes are never lost; ``control``: the name of
    the control socket."""

    backing: Path
    mount: Path
    keep: Sequence[str] = ()
    control: str = field(default_factory=lambda: f"mirrorchaos-lazyfs-{uuid.uuid4().hex}")
    log_path: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "faults.lazyfs", "--backing", str(self.backing),
                   "--mount", str(self.mount), "--control", self.control]
        return command + [arg for pattern in self.keep for arg in ("--keep", pattern)]

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float = 10.0) -> None:
        """Mount it; returns once the mount and the control socket answer."""
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mount.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab") if self.log_path is not None else subprocess.DEVNULL
        try:
            # A session of its own, like the nodes: a Ctrl-C reaches only the harness,
            # which unmounts after the nodes are gone.
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            if not isinstance(log, int):
                log.close()
        deadline = time.monotonic() + timeout
        while not (mounted(self.mount) and self._answers()):
            if self.process.poll() is not None:
                raise LazyFSError(f"lazyfs on {self.mount} exited with code "
                                  f"{self.process.returncode}; {self._log_tail()}")
            if time.monotonic() >= deadline:
                self.stop()
                raise LazyFSError(f"lazyfs on {self.mount} not mounted after {timeout:g}s; "
                                  f"{self._log_tail()}")
            time.sleep(0.02)

    def lose(self) -> int:
        """Revert every file to its last fsync (the caller has killed whatever wrote
        them); returns how many files it changed."""
        # A round trip through the mount first: the fs serves requests in order on one
        # thread, so a write the killed process had queued is done before the revert.
        try:
            os.stat(self.mount)
        except OSError as exc:
            raise LazyFSError(f"lazyfs on {self.mount} does not answer: {exc}") from exc
        answer = self._command(b"lose")
        if not answer.startswith("ok "):
            raise LazyFSError(f"lazyfs on {self.mount}: lose failed: {answer}")
        return int(answer.split()[1])

    def stop(self, timeout: float = 5.0) -> None:
        """SIGTERM, which unmounts; a mount still there afterwards is unmounted lazily."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if mounted(self.mount):
            unmount(self.mount)

    def _answers(self) -> bool:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(control_address(self.control))
            return True
        except OSError:
            return False

    def _command(self, command: bytes, timeout: float = 30.0) -> str:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                sock.connect(control_address(self.control))
                sock.sendall(command + b"\n")
                answer = b""
                while not answer.endswith(b"\n"):
                    chunk = sock.recv(256)
                    if not chunk:
                        break
                    answer += chunk
        except OSError as exc:
            raise LazyFSError(f"lazyfs on {self.mount} did not answer {command!r}: {exc}") from exc
        return answer.decode().strip()

    def _log_tail(self, lines: int = 20) -> str:
        if self.log_path is None:
            return "(no log)"
        with contextlib.suppress(FileNotFoundError):
            text = self.log_path.read_text("utf-8", "replace")
            return "log tail:\n" + "\n".join(text.splitlines()[-lines:])
        return "(no log written)"
