"""The history's vocabulary: the header, one event, and the names they may use.

docs/history-format.md is the normative description; this module is its code. Events are
plain slotted objects rather than dataclasses because a checked history has millions of
them and construction cost is most of the reader's time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FORMAT = "mirrorchaos-history"
VERSION = 3
# Version 2 added the churners' ``declare`` and ``delete`` ops, version 3 the rule
# probers' ``rule``: an older file reads as a newer one without them.
READABLE_VERSIONS = frozenset({1, 2, 3})

TYPES = frozenset({"invoke", "ok", "fail", "info"})
MODES = frozenset({"ack", "no-ack"})
PARTITION_HANDLING = frozenset({"ignore", "pause_minority", "autoheal"})

CLIENT_OPS = frozenset({
    "publish", "confirm", "deliver", "get", "ack", "nack", "reject", "recover",
    "consume", "cancel", "connect", "disconnect", "drain", "cluster-state", "declare",
    "delete", "purge", "members", "unroutable", "rule",
})
# What a rule prober's ask must come to (``rule`` lines): done by the broker, or refused.
RULE_EXPECTS = frozenset({"done", "refused"})
FAULT_OPS = frozenset({"fault-start", "fault-end"})
# Reported by broker nodes (their events.jsonl), merged into the history by time.
NODE_OPS = frozenset({
    "promotion", "mirror-added", "mirror-dropped", "sync-start", "sync-end",
    "partition", "partition-healed", "restart", "node-event",
})
OPS = CLIENT_OPS | FAULT_OPS | NODE_OPS

# Node-failure fault kinds the checker reasons about (with the admin kinds policy and
# sync); any other kind (latency, bandwidth, slicer, reset_peer, limit_data,
# slow_close, timeout, ...) is kept as context for anomalies.
CRASH_FAULTS = frozenset({"kill", "power-loss", "pause", "restart"})
# graceful stops; a ``forget`` is one too, its node then forgotten (FORGET_FAULT)
FORGET_FAULT = "forget"
SHUTDOWN_FAULTS = frozenset({"stop", FORGET_FAULT})
PARTITION_FAULT = "partition"
POLICY_FAULT = "policy"


@dataclass(frozen=True)
class QueueConfig:
    """A queue as the harness set it up: where it lives and under which policy."""

    name: str
    members: tuple[str, ...]  # master first, then mirrors in join order
    durable: bool = True
    policy: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Header:
    """The first line of a history: what ran, with which seed and configuration."""

    run_id: str
    scenario: str
    seed: int
    nodes: tuple[str, ...]
    partition_handling: str
    persistent: bool
    queues: Mapping[str, QueueConfig]
    config: Mapping[str, Any]  # the configuration summary exactly as written
    time: float
    wall: float | None = None
    version: int = VERSION
    # Producers that publish through a fanout exchange -> the queues it binds, in order
    # (harness/history/fanout.py).
    fanout: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def queue(self, name: str) -> QueueConfig:
        """A queue the configuration does not describe is taken as mirrored on every
        node in configuration order, durable, under the default policy."""
        known = self.queues.get(name)
        return known if known is not None else QueueConfig(name, self.nodes)


class Event:
    """One line of the history after validation.

    The fields every checker looks at are attributes; anything else the line carried
    (``grudge``, ``definition``, ``error``, ``peer``, ...) is read with :meth:`get`.
    ``producer``/``seq`` are ``msg`` split as ``<producer>-<seq>``, or ``None``/``-1``
    when ``msg`` is absent or not of that form. Op-specific attributes keep their
    defaults unless the op has them.
    """

    __slots__ = (
        "fault", "fault_id", "line", "mode", "msg", "node", "op", "process", "producer",
        "queue", "raw", "redelivered", "requeue", "seq", "targets", "time", "type", "wall",
    )

    def __init__(self, raw: Mapping[str, Any], line: int, time: float, wall: float | None,
                 process: str, node: str | None, op: str, type: str, msg: str | None,
                 producer: str | None, seq: int, queue: str | None) -> None:
        self.raw = raw
        self.line = line
        self.time = time
        self.wall = wall
        self.process = process
        self.node = node
        self.op = op
        self.type = type
        self.msg = msg
        self.producer = producer
        self.seq = seq
        self.queue = queue
        self.redelivered = False
        self.mode: str | None = None
        self.requeue = False
        self.fault: str | None = None
        self.fault_id: str | None = None
        self.targets: tuple[str, ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    def __repr__(self) -> str:
        return f"Event(line={self.line}, {dict(self.raw)!r})"

    def copy_to(self, queue: str) -> Event:
        """This event about the copy of its message routed to ``queue``, a message of
        its own: ``<producer>.<queue>-<seq>`` (harness/history/fanout.py). ``raw`` is the
        line as written."""
        producer = f"{self.producer}.{queue}"
        copy = Event(self.raw, self.line, self.time, self.wall, self.process, self.node,
                     self.op, self.type, f"{producer}-{self.seq}", producer, self.seq, queue)
        copy.redelivered = self.redelivered
        copy.mode = self.mode
        copy.requeue = self.requeue
        copy.fault = self.fault
        copy.fault_id = self.fault_id
        copy.targets = self.targets
        return copy
