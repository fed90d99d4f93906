"""A run's seed discipline: every random stream is derived from one root seed and
labels naming what it is for, so that a run replays.

The nemesis schedule, the harness's run and soak seeds and the toxiproxy server (whose
upstream draws jitter, slicing and toxicity from Go's global generator) all derive their
streams here: from the seed and labels (proxy, toxic, connection …), with a stable hash
rather than Python's salted ``hash()``, so two processes given the same seed and the
same labels draw the same values.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
from collections import Counter


def derive(seed: int, *labels: str | int) -> int:
    """A 64-bit seed for the stream named by ``labels`` under ``seed``."""
    blob = json.dumps([seed, *labels]).encode()
    return int.from_bytes(hashlib.blake2b(blob, digest_size=8).digest(), "big")


def stream(seed: int, *labels: str | int) -> random.Random:
    return random.Random(derive(seed, *labels))


def fresh_seed() -> int:
    """A seed for a server started without one; it is reported so the run can be replayed."""
    return secrets.randbits(63)


class Serials:
    """Counts how often a name has been used, so a re-created proxy or toxic of the
    same name gets a new stream instead of replaying its predecessor's."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, ...]] = Counter()

    def next(self, *key: str) -> int:
        serial = self._counts[key]
        self._counts[key] += 1
        return serial
