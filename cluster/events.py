"""The node's structured event log: one JSON object per line.

Every line has ``ts`` (wall clock, seconds), ``mono`` (monotonic seconds), ``node`` and
``event``; the other keys depend on the event. Lines are flushed as they are written
so the harness can collect them even after the node is SIGKILLed.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, TextIO

log = logging.getLogger("mirrorchaos.node")


class EventLog:
    def __init__(self, path: Path, node: str) -> None:
        self.path = path
        self.node = node
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO = path.open("a", encoding="utf-8")

    def emit(self, event: str, **fields: Any) -> None:
        record = {"ts": time.time(), "mono": time.monotonic(), "node": self.node,
                  "event": event, **fields}
        self._file.write(json.dumps(record, default=str) + "\n")
        self._file.flush()
        log.info("%s %s", event, json.dumps(fields, default=str))

    def close(self) -> None:
        self._file.close()
