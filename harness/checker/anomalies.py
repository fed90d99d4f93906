"""Grouping anomalies: messages that went wrong the same way, in the same fault context,
become one entry with a list of ids (a kill can lose thousands of messages at once).

Entries are collected during the pass and grouped at the end, when every fault's end is
known, so an anomaly's context shows the faults as they finally were.
"""

from __future__ import annotations

from typing import NamedTuple

from harness.checker.result import Anomaly
from harness.checker.timeline import Timeline


class _Entry(NamedTuple):
    kind: str
    message: str
    explanation: str
    begin: float  # the message's publish (or -inf when unknown)
    until: float  # when the anomaly was seen
    queue: str | None
    caveat: str | None


class Grouper:
    def __init__(self) -> None:
        self._entries: list[_Entry] = []

    def add(self, kind: str, message: str, explanation: str, begin: float, until: float,
            queue: str | None = None, caveat: str | None = None) -> None:
        self._entries.append(_Entry(kind, message, explanation, begin, until, queue, caveat))

    def anomalies(self, timeline: Timeline) -> list[Anomaly]:
        groups: dict[tuple[object, ...], Anomaly] = {}
        for e in self._entries:
            faults = timeline.faults_during(e.begin, e.until)
            key = (e.kind, e.caveat, e.queue, e.explanation, tuple(f.id for f in faults))
            group = groups.get(key)
            if group is None:
                group = groups[key] = Anomaly(e.kind, [], e.explanation, faults, e.queue,
                                              e.caveat)
            group.messages.append(e.message)
        return list(groups.values())

    def __len__(self) -> int:
        return len(self._entries)
