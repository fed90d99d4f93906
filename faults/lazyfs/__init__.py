"""A lazy file system: a FUSE passthrough over a backing directory that can forget every
write not yet made durable, as a power loss would (the ``power-loss`` process fault).

Every call reaches the backing directory at once, so the running program sees a normal
file system. Beside it, `DurabilityLedger` keeps per file what it takes to put the file
back as of its last fsync; the control command ``lose`` does that. Of the outcomes a
real disk allows after a power loss, it picks the one that loses the most, except where
the rules below keep more (keeping more is always a legal outcome too):

* a file's bytes and size are durable at its fsync or fdatasync: after ``lose`` it has
  the contents and size it had then (writes are undone, appends cut off, truncates
  restored);
* a new file's name is durable once the file or its directory is fsynced; a file
  whose name never became durable is removed by ``lose``;
* rename and unlink are durable at once (as if the journal committed them), and a
  renamed file's name is durable from then on, at its new name: replacing a file by a
  rename leaves the new file there after ``lose``, with only its fsynced bytes (so a
  temporary file renamed over the real one without an fsync comes back empty);
* directories and symlinks are durable at once; hard links are not supported;
* files whose names match a ``--keep`` glob are never reverted (the harness's logs kept
  in a node's data directory, which record what happened rather than what is tested).

The process: ``python -m faults.lazyfs --backing DIR --mount DIR --control NAME
[--keep GLOB]...``, in the foreground until SIGTERM, which unmounts. The control socket
(NAME in the abstract Unix socket namespace, so a killed fs leaves no file behind)
takes one line a connection: ``lose`` answers ``ok N`` (N files reverted) or ``error
...``. `LazyMount` runs and drives it; `unmount_under` removes what a dead harness left
mounted.
"""

from .ledger import DurabilityLedger, Remove, Restore
from .mount import LazyFSError, LazyMount, fuse_unavailable, mounted, unmount_under

__all__ = [
    "DurabilityLedger",
    "LazyFSError",
    "LazyMount",
    "Remove",
    "Restore",
    "fuse_unavailable",
    "mounted",
    "unmount_under",
]
