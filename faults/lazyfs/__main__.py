"""``python -m faults.lazyfs --backing DIR --mount DIR --control NAME [--keep GLOB]``:
mount the lazy file system in the foreground until SIGTERM or SIGINT, which unmount it
(the package docstring says what a power loss keeps)."""

from __future__ import annotations

import argparse
from pathlib import Path

import mfusepy

from .fs import LazyOperations, serve_control
from .ledger import DurabilityLedger
from .mount import control_address

_LOOP_ENDED = 8


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m faults.lazyfs", description=__doc__)
    parser.add_argument("--backing", type=Path, required=True,
                        help="the directory that holds the files")
    parser.add_argument("--mount", type=Path, required=True, help="where to mount it")
    parser.add_argument("--control", required=True,
                        help="name of the abstract Unix socket for the 'lose' command")
    parser.add_argument("--keep", action="append", default=[], metavar="GLOB",
                        help="file names whose writes are never lost (repeatable)")
    args = parser.parse_args(argv)
    operations = LazyOperations(args.backing.resolve(), DurabilityLedger(args.keep))
    control = serve_control(control_address(args.control), operations)
    try:
        # Nothing cached in the kernel: a revert is seen by the next read and stat.
        mfusepy.FUSE(operations, str(args.mount), foreground=True, nothreads=True,
                     fsname="lazyfs", direct_io=True, attr_timeout=0, entry_timeout=0,
                     negative_timeout=0)
    except RuntimeError as exc:
        # fuse_main's 8 is "the loop ended", which is how SIGTERM ends it (after the
        # unmount); any lower code is a failure to mount.
        if exc.args != (_LOOP_ENDED,):
            raise SystemExit(f"lazyfs: mounting {args.mount} failed (fuse_main {exc})") from None
    finally:
        control.close()


if __name__ == "__main__":
    main()
