"""Throughput of the message store: ``python -m cluster.store.bench`` prints JSON.

For each batch size, stages that many 1 KiB appends and commits them (a real fsync),
over and over for a fixed time, in a fresh store; ``stage_us_per_message`` is the Python
cost of stage_append alone. Figures depend on the disk: the JSON names the file system.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from cluster.store.log import MessageStore

PAYLOAD = os.urandom(1024)
QUEUE = "/\x00bench"


def _filesystem(directory: Path) -> str:
    """The type of the file system holding ``directory``, from /proc/mounts."""
    best, kind = "", "unknown"
    try:
        with open("/proc/mounts") as mounts:
            for line in mounts:
                _, mount_point, fs_type, *_ = line.split()
                inside = str(directory).startswith(mount_point.rstrip("/") + "/")
                if inside and len(mount_point) >= len(best):
                    best, kind = mount_point, fs_type
    except OSError:
        pass
    return kind


def _run(directory: Path, batch: int, seconds: float) -> dict[str, Any]:
    store = MessageStore(directory)
    store.recover()
    seq = commits = 0
    commit_time = stage_time = 0.0
    start = time.perf_counter()
    deadline = start + seconds
    while (staged := time.perf_counter()) < deadline:
        for _ in range(batch):
            store.stage_append(QUEUE, seq, PAYLOAD)
            seq += 1
        committing = time.perf_counter()
        store.commit()
        commit_time += time.perf_counter() - committing
        stage_time += committing - staged
        commits += 1
    elapsed = time.perf_counter() - start
    store.close()
    return {
        "batch": batch,
        "messages": seq,
        "commits": commits,
        "seconds": round(elapsed, 3),
        "messages_per_s": round(seq / elapsed),
        "mean_commit_ms": round(commit_time / commits * 1000, 3),
        "stage_us_per_message": round(stage_time / seq * 1e6, 3),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m cluster.store.bench",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where to create the scratch stores (default: the temp dir)")
    parser.add_argument("--seconds", type=float, default=2.0, help="duration per batch size")
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 10, 100])
    args = parser.parse_args(argv)
    base = args.dir.resolve()
    results = []
    with tempfile.TemporaryDirectory(prefix="store-bench-", dir=base) as scratch:
        for batch in args.batches:
            results.append(_run(Path(scratch) / f"batch-{batch}", batch, args.seconds))
    print(json.dumps({
        "payload_bytes": len(PAYLOAD),
        "sync": "fdatasync per commit",
        "directory": str(base),
        "filesystem": _filesystem(base),
        "results": results,
    }, indent=2))


if __name__ == "__main__":
    main()
