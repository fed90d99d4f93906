"""MessageStore: round trips, torn tails, corruption, reclamation, concurrent commits."""

from __future__ import annotations

import os
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import pytest

from cluster.store import MessageStore, Recovery, StoreCorrupted, StoreError
from cluster.store.records import HEADER, MAGIC

from .helpers import reopen, segments


def test_round_trip_keeps_exactly_the_live_messages(tmp_path: Path) -> None:
    store, recovery = reopen(tmp_path)
    assert recovery == Recovery({}, [])
    lsns = [store.stage_append("/\x00orders", seq, f"order {seq}".encode())
            for seq in (5, 1, 3, 2, 4)]
    lsns.append(store.stage_append("/\x00audit", -10, b""))
    lsns.append(store.stage_remove("/\x00orders", [2, 4, 99]))  # 99 never existed
    lsns.append(store.stage_append("/\x00gone", 1, b"dropped"))
    lsns.append(store.stage_drop_queue("/\x00gone"))
    lsns.append(store.stage_append("/\x00again", 7, b"old life"))
    lsns.append(store.stage_drop_queue("/\x00again"))
    # Redeclared: seqs restart, one of them equal to a dropped message's.
    lsns.append(store.stage_append("/\x00again", 1, b"new life"))
    lsns.append(store.stage_append("/\x00again", 7, b"new seven"))
    lsns.append(store.stage_append("caf\u00e9\x00\udcff", 2**63 - 1, b"odd key"))
    assert lsns == sorted(set(lsns))
    assert store.commit() == store.staged_lsn == lsns[-1]
    store.close()

    _, recovery = reopen(tmp_path)
    assert recovery.truncated == []
    assert recovery.queues == {
        "/\x00orders": [(1, b"order 1"), (3, b"order 3"), (5, b"order 5")],
        "/\x00audit": [(-10, b"")],
        "/\x00again": [(1, b"new life"), (7, b"new seven")],
        "caf\u00e9\x00\udcff": [(2**63 - 1, b"odd key")],
    }


def test_uncommitted_records_are_lost_and_committed_ones_kept(tmp_path: Path) -> None:
    store, _ = reopen(tmp_path)
    store.stage_append("q", 1, b"one")
    store.stage_append("q", 2, b"two")
    store.commit()
    store.stage_remove("q", [1])
    store.stage_append("q", 3, b"three")
    store.close()
    _, recovery = reopen(tmp_path)
    assert recovery.queues == {"q": [(1, b"one"), (2, b"two")]}


def test_appending_a_live_seq_again_replaces_it(tmp_path: Path) -> None:
    store, _ = reopen(tmp_path)
    store.stage_append("q", 1, b"first")
    store.stage_append("q", 1, b"second")
    store.commit()
    store.close()
    _, recovery = reopen(tmp_path)
    assert recovery.queues == {"q": [(1, b"second")]}


def test_misuse_is_refused(tmp_path: Path) -> None:
    store = MessageStore(tmp_path)
    with pytest.raises(StoreError, match="recover"):
        store.stage_append("q", 1, b"too early")
    with pytest.raises(StoreError, match="in use"):
        MessageStore(tmp_path)
    store.recover()
    with pytest.raises(StoreError, match="once"):
        store.recover()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.stage_remove("q", [1])
    with pytest.raises(StoreError, match="closed"):
        store.commit()
    reopen(tmp_path)[0].close()  # the lock went with close()


# -- torn tails ----------------------------------------------------------------------------

FIRST_TWO = [(1, b"first"), (2, b"second")]
THIRD = (3, b"third message, the one torn")


def _segment_with_three_records(directory: Path) -> tuple[str, bytes, int]:
    """Returns the segment's name, its bytes, and where the third record starts."""
    store, _ = reopen(directory)
    for seq, payload in FIRST_TWO:
        store.stage_append("q", seq, payload)
    store.commit()
    (segment,) = segments(directory)
    third_at = segment.stat().st_size
    store.stage_append("q", *THIRD)
    store.commit()
    store.close()
    return segment.name, segment.read_bytes(), third_at


def _recover_from(directory: Path, name: str, content: bytes) -> tuple[MessageStore, Recovery]:
    directory.mkdir()
    (directory / name).write_bytes(content)
    return reopen(directory)


def _assert_appending_still_works(directory: Path, before: list[tuple[int, bytes]],
                                  store: MessageStore) -> None:
    store.stage_append("q", 4, b"after the crash")
    store.commit()
    store.close()
    _, recovery = reopen(directory)
    assert recovery.truncated == []
    assert recovery.queues == {"q": [*before, (4, b"after the crash")]}


def test_torn_tail_is_cut_at_every_offset_of_the_last_record(tmp_path: Path) -> None:
    name, content, third_at = _segment_with_three_records(tmp_path / "original")
    for cut in range(third_at, len(content)):
        directory = tmp_path / f"cut-{cut}"
        store, recovery = _recover_from(directory, name, content[:cut])
        assert recovery.queues == {"q": FIRST_TWO}, cut
        expected = [] if cut == third_at else [(directory / name, third_at, cut - third_at)]
        assert [(t.file, t.offset, t.bytes_cut) for t in recovery.truncated] == expected, cut
        assert (directory / name).stat().st_size == third_at
        _assert_appending_still_works(directory, FIRST_TWO, store)


def test_a_flipped_byte_in_the_last_record_cuts_it(tmp_path: Path) -> None:
    name, content, third_at = _segment_with_three_records(tmp_path / "original")
    for position in range(third_at, len(content)):
        directory = tmp_path / f"flip-{position}"
        damaged = bytearray(content)
        damaged[position] ^= 0xFF
        store, recovery = _recover_from(directory, name, bytes(damaged))
        assert recovery.queues == {"q": FIRST_TWO}, position
        assert [(t.offset, t.bytes_cut) for t in recovery.truncated] == [
            (third_at, len(content) - third_at)
        ], position
        _assert_appending_still_works(directory, FIRST_TWO, store)


@pytest.mark.parametrize("garbage", [
    b"\x00",
    bytes(64),  # a file extended with zeros
    b"\xff" * 5,
    struct.pack("<II", 1 << 30, 0),  # a frame claiming a huge body
    struct.pack("<II", 3, 0) + b"abc",  # a whole frame with a wrong CRC
    bytes(range(256)),
])
def test_garbage_after_the_last_record_is_cut(tmp_path: Path, garbage: bytes) -> None:
    name, content, _ = _segment_with_three_records(tmp_path / "original")
    directory = tmp_path / "garbage"
    store, recovery = _recover_from(directory, name, content + garbage)
    assert recovery.queues == {"q": [*FIRST_TWO, THIRD]}
    assert [(t.file, t.offset, t.bytes_cut) for t in recovery.truncated] == [
        (directory / name, len(content), len(garbage))
    ]
    _assert_appending_still_works(directory, [*FIRST_TWO, THIRD], store)


@pytest.mark.parametrize("cut", range(len(HEADER)))
def test_a_torn_header_of_the_newest_segment_is_rewritten(tmp_path: Path, cut: int) -> None:
    store, recovery = _recover_from(tmp_path / "torn", "00000001.seg", HEADER[:cut])
    assert recovery.queues == {}
    assert [(t.offset, t.bytes_cut) for t in recovery.truncated] == [(0, cut)]
    _assert_appending_still_works(tmp_path / "torn", [], store)


# -- corruption ----------------------------------------------------------------------------

def _several_segments(directory: Path) -> list[Path]:
    store, _ = reopen(directory, segment_bytes=256)
    for seq in range(30):
        store.stage_append("q", seq, bytes(40))
    store.commit()
    store.close()
    files = segments(directory)
    assert len(files) >= 3
    return files


def _flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_damage_to_an_older_segment_raises(tmp_path: Path, damage: str) -> None:
    files = _several_segments(tmp_path)
    older = files[1]
    before = older.read_bytes()
    if damage == "flip":
        _flip(older, len(HEADER) + 20)
    elif damage == "truncate":
        older.write_bytes(before[:len(HEADER) + 20])
    else:
        older.write_bytes(before + b"\x00\x00\x00")
    damaged = older.read_bytes()
    store = MessageStore(tmp_path, segment_bytes=256)
    with pytest.raises(StoreCorrupted, match=older.name) as caught:
        store.recover()
    assert caught.value.path == older
    assert caught.value.offset == (len(before) if damage == "garbage" else len(HEADER))
    assert older.read_bytes() == damaged  # nothing is cut outside the newest segment
    store.close()


def test_a_missing_middle_segment_raises(tmp_path: Path) -> None:
    files = _several_segments(tmp_path)
    files[1].unlink()
    store = MessageStore(tmp_path)
    with pytest.raises(StoreCorrupted, match=files[1].name):
        store.recover()
    store.close()


@pytest.mark.parametrize(("content", "message"), [
    (b"PK\x03\x04 not a segment at all", "not a mirrorchaos store segment"),
    (b"abc", "not a mirrorchaos store segment"),  # too short, and no torn header either
    (MAGIC + struct.pack("<I", 99), "version 99"),
])
def test_a_foreign_file_is_rejected_not_cut(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "00000001.seg"
    path.write_bytes(content)
    store = MessageStore(tmp_path)
    with pytest.raises(StoreCorrupted, match=message) as caught:
        store.recover()
    assert caught.value.path == path
    assert path.read_bytes() == content
    store.close()


# -- segments and reclamation --------------------------------------------------------------

def test_publish_ack_workload_keeps_disk_bounded_despite_a_pinned_message(
        tmp_path: Path) -> None:
    store, _ = reopen(tmp_path, segment_bytes=4096)
    store.stage_append("pinned", 0, b"long-lived")
    store.commit()
    first = segments(tmp_path)[0]
    unacked: deque[int] = deque()
    most = 0
    for seq in range(4000):
        store.stage_append("work", seq, bytes(200))
        unacked.append(seq)
        if len(unacked) > 25:
            store.stage_remove("work", [unacked.popleft()])
        if seq % 8 == 0:
            store.commit()
            most = max(most, len(segments(tmp_path)))
    store.commit()
    # About 900 KiB went through 4 KiB segments; live data is under 6 KiB.
    assert most <= 8
    assert not first.exists()  # the pinned message was moved and its segment reclaimed
    store.close()
    _, recovery = reopen(tmp_path, segment_bytes=4096)
    assert recovery.queues == {
        "pinned": [(0, b"long-lived")],
        "work": [(seq, bytes(200)) for seq in unacked],
    }


def test_a_live_backlog_is_not_rewritten(tmp_path: Path) -> None:
    store, _ = reopen(tmp_path, segment_bytes=1024)
    for seq in range(100):
        store.stage_append("backlog", seq, bytes(100))
        store.commit()
    sealed = segments(tmp_path)[:-1]
    contents = [f.read_bytes() for f in sealed]
    for seq in range(100, 120):  # a little garbage must not trigger copying the backlog
        store.stage_append("other", seq, bytes(100))
        store.stage_remove("other", [seq])
        store.commit()
    assert [f.read_bytes() for f in sealed] == contents
    store.close()


def test_dropping_a_queue_reclaims_its_segments(tmp_path: Path) -> None:
    store, _ = reopen(tmp_path, segment_bytes=1024)
    for seq in range(100):
        store.stage_append("q", seq, bytes(100))
    store.commit()
    assert len(segments(tmp_path)) > 5
    store.stage_drop_queue("q")
    store.commit()
    assert len(segments(tmp_path)) == 1
    store.close()
    assert reopen(tmp_path, segment_bytes=1024)[1].queues == {}


def test_a_dead_segment_is_kept_while_an_older_one_needs_its_removals(tmp_path: Path) -> None:
    # Segment 1: a big long-lived message and one acked later; segment 2: nothing live,
    # but the REMOVE of the acked one. Deleting segment 2 would resurrect that message.
    store, _ = reopen(tmp_path, segment_bytes=512)
    store.stage_append("q", 1, bytes(460))
    store.stage_append("q", 2, b"acked")
    store.commit()
    store.stage_remove("q", [2])
    for seq in (3, 4):
        store.stage_append("q", seq, bytes(300))
        store.stage_remove("q", [seq])
    store.commit()
    assert len(segments(tmp_path)) == 3
    store.close()
    _, recovery = reopen(tmp_path, segment_bytes=512)
    assert recovery.queues == {"q": [(1, bytes(460))]}


# -- concurrency ---------------------------------------------------------------------------

def test_commits_from_another_thread_while_staging_lose_nothing(tmp_path: Path) -> None:
    # Small segments: rolling to a new segment is where unlocked staging breaks first.
    store, _ = reopen(tmp_path, segment_bytes=2048)
    done = threading.Event()
    durable: list[int] = []
    failures: list[BaseException] = []

    def commit_until_done() -> None:
        try:
            while not done.is_set():
                durable.append(store.commit())
        except BaseException as error:
            failures.append(error)

    expected: dict[int, bytes] = {}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible to expose races
    committer = threading.Thread(target=commit_until_done)
    committer.start()
    try:
        for seq in range(30000):
            if seq % 4 == 0:
                time.sleep(0)  # where an event loop would wait for sockets
            payload = seq.to_bytes(4, "little") * 8
            store.stage_append("q", seq, payload)
            expected[seq] = payload
            if seq % 4 == 3:
                store.stage_remove("q", [seq - 3, seq - 1])
                del expected[seq - 3], expected[seq - 1]
    finally:
        done.set()
        committer.join()
        sys.setswitchinterval(interval)
    assert failures == []
    assert len(durable) > 10 and durable == sorted(durable)
    assert store.commit() == store.staged_lsn
    store.close()
    _, recovery = reopen(tmp_path, segment_bytes=2048)
    assert recovery.queues == {"q": sorted(expected.items())}


def _stage_during_next_fsync(monkeypatch: pytest.MonkeyPatch,
                             stage: Callable[[], object]) -> None:
    """Run ``stage`` while the next commit waits in fdatasync, as the event loop would."""
    real = os.fdatasync
    pending = [stage]

    def fdatasync(fd: int) -> None:
        if pending:
            pending.pop()()
        real(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)


def test_a_segment_is_not_deleted_before_what_killed_it_is_durable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = reopen(tmp_path, segment_bytes=256)
    store.stage_append("q", 1, bytes(300))  # fills segment 1 alone
    store.stage_append("q", 2, b"two")
    store.commit()
    _stage_during_next_fsync(monkeypatch, lambda: store.stage_remove("q", [1]))
    store.stage_append("q", 3, b"three")
    store.commit()
    store.close()  # the removal was staged after the commit began, so it is not durable
    _, recovery = reopen(tmp_path, segment_bytes=256)
    assert recovery.queues == {"q": [(1, bytes(300)), (2, b"two"), (3, b"three")]}


def test_compaction_waits_until_the_oldest_segment_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store, _ = reopen(tmp_path, segment_bytes=256)
    store.stage_append("q", 1, b"pinned")
    store.commit()

    def stage_into_segment_one_and_make_garbage() -> None:
        store.stage_append("q", 3, bytes(250))  # lands in segment 1, then seals it
        for seq in range(4, 10):
            store.stage_append("q", seq, bytes(300))
            store.stage_remove("q", [seq])

    _stage_during_next_fsync(monkeypatch, stage_into_segment_one_and_make_garbage)
    store.stage_append("q", 2, b"two")
    store.commit()  # must not copy record 3 of segment 1: it is not written yet
    store.commit()
    store.close()
    _, recovery = reopen(tmp_path, segment_bytes=256)
    assert recovery.queues == {"q": [(1, b"pinned"), (2, b"two"), (3, bytes(250))]}
