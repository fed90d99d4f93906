"""Run by test_crash: stage and commit until SIGKILLed, reporting each step on stdout.

Before staging an iteration it prints ``S <appended seqs> <removed seqs>`` (``-`` for
none); after that iteration's commit returns, ``C <lsn>``. Payloads derive from seqs.
"""

from __future__ import annotations

import sys
from pathlib import Path

from cluster.store import MessageStore

SEGMENT_BYTES = 16 * 1024


def payload(seq: int) -> bytes:
    return f"message {seq};".encode() * (1 + seq % 13)


def main() -> None:
    directory, seq = Path(sys.argv[1]), int(sys.argv[2])
    store = MessageStore(directory, segment_bytes=SEGMENT_BYTES)
    store.recover()
    appended: list[list[int]] = []
    while True:
        appends = list(range(seq, seq + 1 + len(appended) % 9))
        seq = appends[-1] + 1
        # Ack some messages of an earlier iteration, so segments die and get reclaimed.
        removes = [s for s in appended[-3] if s % 3] if len(appended) >= 3 else []
        print("S", ",".join(map(str, appends)), ",".join(map(str, removes)) or "-", flush=True)
        for s in appends:
            store.stage_append("q", s, payload(s))
        if removes:
            store.stage_remove("q", removes)
        print("C", store.commit(), flush=True)
        appended.append(appends)


if __name__ == "__main__":
    main()
