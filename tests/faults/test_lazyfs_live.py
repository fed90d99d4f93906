"""The lazy file system mounted for real (FUSE): ordinary file calls through the mount,
then ``lose``, then what the backing directory holds."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults.lazyfs import LazyFSError, LazyMount, fuse_unavailable, mounted, unmount_under

pytestmark = pytest.mark.skipif(fuse_unavailable() is not None,
                                reason=f"no FUSE here: {fuse_unavailable()}")


@pytest.fixture
def lazy(tmp_path: Path) -> Iterator[LazyMount]:
    (tmp_path / "backing").mkdir()
    (tmp_path / "backing" / "before").write_bytes(b"clean at mount")
    fs = LazyMount(tmp_path / "backing", tmp_path / "mnt", keep=["*.log"],
                   log_path=tmp_path / "lazyfs.log")
    fs.start()
    yield fs
    fs.stop()
    assert not mounted(fs.mount)


def write(path: Path, data: bytes, *, sync: bool = False, append: bool = False) -> None:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def test_unsynced_writes_are_lost_and_synced_ones_kept(lazy: LazyMount) -> None:
    mnt = lazy.mount
    write(mnt / "unsynced", b"gone")
    write(mnt / "synced", b"kept", sync=True)
    write(mnt / "before", b"CLOBBERED")
    write(mnt / "node.log", b"a log line\n")
    assert (lazy.backing / "unsynced").read_bytes() == b"gone"  # reads see every write
    assert lazy.lose() == 2
    assert sorted(os.listdir(mnt)) == ["before", "node.log", "synced"]
    assert (mnt / "synced").read_bytes() == b"kept"
    assert (mnt / "before").read_bytes() == b"clean at mount"
    assert (mnt / "node.log").read_bytes() == b"a log line\n"


def test_an_append_after_fsync_is_cut_back_to_the_synced_size(lazy: LazyMount) -> None:
    segment = lazy.mount / "segment"
    write(segment, b"record-1;", sync=True, append=True)
    fsync_dir(lazy.mount)
    write(segment, b"record-2;", append=True)
    assert segment.stat().st_size == 18
    lazy.lose()
    assert segment.read_bytes() == b"record-1;"
    write(segment, b"record-3;", append=True)  # appends from the reverted end
    assert segment.read_bytes() == b"record-1;record-3;"


def test_a_directory_fsync_keeps_a_new_name_but_not_its_bytes(lazy: LazyMount) -> None:
    (lazy.mount / "store").mkdir()
    write(lazy.mount / "store" / "new", b"unsynced bytes")
    fsync_dir(lazy.mount / "store")
    lazy.lose()
    assert (lazy.mount / "store" / "new").read_bytes() == b""


def test_replacing_by_rename_keeps_the_new_file_with_its_fsynced_bytes(
        lazy: LazyMount) -> None:
    mnt = lazy.mount
    write(mnt / "defs.json", b"v1", sync=True)
    write(mnt / "defs.tmp", b"v2", sync=True)
    os.replace(mnt / "defs.tmp", mnt / "defs.json")  # no directory fsync after it
    write(mnt / "peers.tmp", b"never synced")
    os.replace(mnt / "peers.tmp", mnt / "peers.json")
    lazy.lose()
    assert sorted(os.listdir(mnt)) == ["before", "defs.json", "peers.json"]
    assert (mnt / "defs.json").read_bytes() == b"v2"
    assert (mnt / "peers.json").read_bytes() == b""


def test_truncate_and_overwrite_of_a_synced_file_are_undone(lazy: LazyMount) -> None:
    path = lazy.mount / "before"
    with path.open("r+b") as handle:
        handle.truncate(5)
        handle.seek(2)
        handle.write(b"XYZW")
    with path.open("wb") as handle:  # O_TRUNC
        handle.write(b"short")
    lazy.lose()
    assert path.read_bytes() == b"clean at mount"


def test_a_dead_lazyfs_leaves_a_mount_that_unmount_under_removes(tmp_path: Path) -> None:
    fs = LazyMount(tmp_path / "backing", tmp_path / "run" / "n1")
    fs.start()
    assert fs.process is not None
    fs.process.kill()  # as when the harness and everything it started is SIGKILLed
    fs.process.wait()
    try:
        assert mounted(fs.mount)
        with pytest.raises(LazyFSError, match="does not answer"):
            fs.lose()
        assert unmount_under(tmp_path / "run") == [str(fs.mount)]
        assert not mounted(fs.mount)
    finally:
        unmount_under(tmp_path)
