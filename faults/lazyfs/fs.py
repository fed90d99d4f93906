"""The FUSE shell around `DurabilityLedger`: a passthrough file system over a backing
directory (every write reaches the backing file at once, so reads see it) that tells
the ledger what each call changes, and a control socket whose ``lose`` command reverts
the backing directory to its last fsyncs.

FUSE calls come on one thread (the mount is single-threaded); a lock keeps the control
thread's revert from interleaving with a call that changes files. fsync is not passed
on to the backing file: the power loss is simulated, the host's disk is not what is
under test.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import mfusepy

from .ledger import DurabilityLedger, Remove, Restore

_STAT_FIELDS = ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime", "st_nlink",
                "st_size", "st_uid", "st_ino", "st_blocks", "st_blksize")
_STATVFS_FIELDS = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                   "f_files", "f_flag", "f_frsize", "f_namemax")

P = ParamSpec("P")
R = TypeVar("R")


def _locked(method: Callable[P, R]) -> Callable[P, R]:
    @functools.wraps(method)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        with args[0]._lock:  # type: ignore[attr-defined]
            return method(*args, **kwargs)
    return call


class LazyOperations(mfusepy.Operations):
    use_ns = True

    def __init__(self, backing: Path, ledger: DurabilityLedger) -> None:
        self.backing = backing
        self.ledger = ledger
        self._lock = threading.Lock()

    def _real(self, path: str) -> str:
        return str(self.backing) + path

    @staticmethod
    def _key(path: str) -> str:
        return path.lstrip("/")

    # -- the power loss ------------------------------------------------------------------

    @_locked
    def lose(self) -> int:
        """Revert every file to its last fsync; returns how many files changed."""
        steps = self.ledger.lose()
        for step in steps:
            real = self._real("/" + step.path)
            if isinstance(step, Remove):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(real)
                continue
            assert isinstance(step, Restore)
            fd = os.open(real, os.O_WRONLY)
            try:
                for offset, old in step.undo:
                    os.pwrite(fd, old, offset)
                os.ftruncate(fd, step.size)
            finally:
                os.close(fd)
        return len(steps)

    # -- reads and metadata: passthrough ---------------------------------------------------

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = os.fstat(fh) if fh is not None else os.lstat(self._real(path))
        found = {key: getattr(st, key) for key in _STAT_FIELDS}
        for key in ("st_atime", "st_ctime", "st_mtime"):
            found[key] = getattr(st, key + "_ns")
        return found

    def readdir(self, path: str, fh: int) -> list[str]:
        return [".", "..", *os.listdir(self._real(path))]

    def readlink(self, path: str) -> str:
        return os.readlink(self._real(path))

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self._real(path))
        return {key: getattr(st, key) for key in _STATVFS_FIELDS}

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            os.utime(self._real(path))
        else:
            os.utime(self._real(path), ns=times)
        return 0

    @_locked
    def open(self, path: str, flags: int) -> int:
        # Readable, so a write can save the bytes it overwrites; an O_TRUNC open is a
        # truncate the ledger must see.
        if flags & os.O_ACCMODE == os.O_WRONLY:
            flags = flags & ~os.O_ACCMODE | os.O_RDWR
        fd = os.open(self._real(path), flags & ~os.O_TRUNC)
        if flags & os.O_TRUNC:
            self._truncate(path, 0, fd)
        return fd

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    # -- what a power loss can undo -------------------------------------------------------

    @_locked
    def create(self, path: str, mode: int, fi: int | None = None) -> int:
        fd = os.open(self._real(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)
        self.ledger.created(self._key(path))
        return fd

    @_locked
    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        size = os.fstat(fh).st_size
        if fcntl.fcntl(fh, fcntl.F_GETFL) & os.O_APPEND:
            offset = size  # pwrite on an O_APPEND fd appends, whatever offset it is given
        self._save(path, size, offset, offset + len(data), fh)
        return os.pwrite(fh, data, offset)

    @_locked
    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if fh is not None:
            self._truncate(path, length, fh)
            return 0
        fd = os.open(self._real(path), os.O_RDWR)
        try:
            self._truncate(path, length, fd)
        finally:
            os.close(fd)
        return 0

    def _truncate(self, path: str, length: int, fd: int) -> None:
        size = os.fstat(fd).st_size
        self._save(path, size, length, size, fd)
        os.ftruncate(fd, length)

    def _save(self, path: str, size: int, start: int, end: int, fd: int) -> None:
        key = self._key(path)
        span = self.ledger.to_save(key, size, start, end)
        if span is not None:
            self.ledger.saved(key, span[0], os.pread(fd, span[1] - span[0], span[0]))

    @_locked
    def fsync(self, path: str, datasync: int, fh: int) -> int:
        self.ledger.synced(self._key(path))
        return 0

    @_locked
    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        self.ledger.directory_synced(self._key(path))
        return 0

    @_locked
    def rename(self, old: str, new: str) -> int:
        os.rename(self._real(old), self._real(new))
        self.ledger.renamed(self._key(old), self._key(new))
        return 0

    @_locked
    def unlink(self, path: str) -> int:
        os.unlink(self._real(path))
        self.ledger.unlinked(self._key(path))
        return 0

    # Directories and symlinks are durable at once (the package docstring).
    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._real(path))
        return 0

    def symlink(self, target: str, source: str) -> int:
        os.symlink(source, self._real(target))
        return 0


def serve_control(address: str, operations: LazyOperations) -> socket.socket:
    """A Unix socket at ``address``, one command a connection: ``lose`` answers
    ``ok N`` (N files reverted), anything else ``error ...``. Served by a daemon
    thread until the process exits."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(address)
    server.listen()

    def answer(command: bytes) -> str:
        if command != b"lose":
            return f"error unknown command {command!r}"
        try:
            return f"ok {operations.lose()}"
        except OSError as exc:
            return f"error {exc}"

    def serve() -> None:
        while True:
            connection, _ = server.accept()
            # A client that hangs up (the readiness probe sends nothing) ends only its
            # own connection.
            with connection, contextlib.suppress(OSError):
                command = connection.recv(64).strip()
                if command:
                    connection.sendall(answer(command).encode() + b"\n")

    threading.Thread(target=serve, name="lazyfs-control", daemon=True).start()
    return server
