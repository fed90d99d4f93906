"""The durability ledger on its own: what a power loss undoes, step by step."""

from __future__ import annotations

from faults.lazyfs import DurabilityLedger, Remove, Restore


def write(ledger: DurabilityLedger, content: bytearray, path: str, offset: int,
          data: bytes) -> None:
    """What the file system shell does for a write, on an in-memory file."""
    span = ledger.to_save(path, len(content), offset, offset + len(data))
    if span is not None:
        ledger.saved(path, span[0], bytes(content[span[0]:span[1]]))
    content[offset:offset + len(data)] = data


def apply(step: Restore, content: bytearray) -> bytes:
    for offset, old in step.undo:
        content[offset:offset + len(old)] = old
    return bytes(content[:step.size])


def test_overwrites_and_appends_are_undone_back_to_the_synced_bytes() -> None:
    ledger = DurabilityLedger()
    content = bytearray(b"0123456789")  # clean when the fs came up
    write(ledger, content, "f", 2, b"ab")
    write(ledger, content, "f", 3, b"XYZ")  # overlaps the first overwrite
    write(ledger, content, "f", 10, b"tail")
    [step] = ledger.lose()
    assert isinstance(step, Restore)
    assert apply(step, content) == b"0123456789"
    assert ledger.lose() == []  # clean afterwards


def test_fsync_makes_everything_so_far_durable() -> None:
    ledger = DurabilityLedger()
    content = bytearray(b"old")
    write(ledger, content, "f", 0, b"new")
    ledger.synced("f")
    write(ledger, content, "f", 3, b"+more")
    [step] = ledger.lose()
    assert isinstance(step, Restore)
    assert apply(step, content) == b"new"


def test_a_truncate_is_undone_from_its_saved_tail() -> None:
    ledger = DurabilityLedger()
    content = bytearray(b"abcdef")
    span = ledger.to_save("f", 6, 2, 6)
    assert span == (2, 6)
    ledger.saved("f", 2, bytes(content[2:6]))
    del content[2:]
    write(ledger, content, "f", 2, b"zz")
    [step] = ledger.lose()
    assert isinstance(step, Restore)
    assert apply(step, content) == b"abcdef"


def test_a_new_file_goes_unless_it_or_its_directory_was_synced() -> None:
    ledger = DurabilityLedger()
    for path in ("d/by-dir", "e/by-file", "e/never"):
        ledger.created(path)
    ledger.directory_synced("d")  # d/ only: e/never's name stays undurable
    ledger.synced("e/by-file")
    ledger.created("d/after-dir-sync")
    assert ledger.lose() == [
        Remove("d/after-dir-sync"), Restore("d/by-dir", (), 0), Remove("e/never")]


def test_a_rename_carries_the_record_and_makes_the_name_durable() -> None:
    ledger = DurabilityLedger()
    ledger.created("defs.tmp")
    content = bytearray()
    write(ledger, content, "defs.tmp", 0, b"{}")
    ledger.to_save("defs.json", 5, 0, 0)  # the file it replaces had changes too
    ledger.renamed("defs.tmp", "defs.json")
    # Never fsynced: the name survives, its bytes do not.
    assert ledger.lose() == [Restore("defs.json", (), 0)]

    ledger.created("defs.tmp")
    ledger.synced("defs.tmp")  # fsync, then rename: the whole new file survives
    ledger.renamed("defs.tmp", "defs.json")
    assert ledger.lose() == []


def test_renaming_a_directory_moves_its_records_without_making_new_names_durable() -> None:
    ledger = DurabilityLedger()
    ledger.created("a/new")
    ledger.renamed("a", "b")
    assert ledger.lose() == [Remove("b/new")]


def test_unlink_forgets_and_kept_names_are_never_tracked() -> None:
    ledger = DurabilityLedger(keep=["*.log", "events.jsonl"])
    ledger.created("gone")
    ledger.unlinked("gone")
    ledger.created("n1/node.log")
    ledger.created("events.jsonl")
    assert ledger.to_save("events.jsonl", 10, 0, 5) is None
    assert ledger.lose() == []
