"""Every event a node reports, one frozen dataclass each, and the log that writes them.

This module is the one schema of the nodes' event logs: the broker emits these classes,
the harness's RabbitMQ poller writes them for RabbitMQ's nodes, and the history reader
(harness/history/node_events.py) decodes every line back through :func:`decode`, which
refuses a line that does not fit. A field added, renamed or dropped here changes both
sides at once.

A line is one JSON object: ``ts`` (wall clock, seconds), ``mono`` (monotonic seconds),
``node`` (the reporting node), ``event`` (the class's ``kind``) and the class's fields.
Lines are flushed as they are written, so the harness collects them even after the node
is SIGKILLed. In a run's history (docs/history-format.md) an event with an ``op`` becomes
that op, any other a ``node-event``; its ``node`` is the node the event is about
(:meth:`NodeEvent.subject`), which is the reporting node unless the event names another.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal, TextIO

log = logging.getLogger("mirrorchaos.node")


class EventSchemaError(ValueError):
    """A node event line that does not fit its class; ``field`` names the key."""

    def __init__(self, field: str, expected: str, got: object) -> None:
        super().__init__(f"{field}: expected {expected}, got {got!r}")
        self.field = field
        self.expected = expected
        self.got = got


@dataclass(frozen=True)
class NodeEvent:
    kind: ClassVar[str]
    op: ClassVar[str] = "node-event"  # the history op it becomes

    def subject(self) -> str | None:
        """The node the event is about, when it is not the reporting node."""
        return None

    def fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def _member_node(member: str) -> str:
    # a GM member is "node/incarnation#n"; RabbitMQ's reports name the node alone
    return member.partition("/")[0]


# -- a node's life ------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeStarted(NodeEvent):
    kind = "node_started"
    amqp_port: int
    mgmt_port: int | None  # None: no management API


@dataclass(frozen=True)
class BootWaiting(NodeEvent):
    kind = "boot_waiting"
    saw_us_stop: tuple[str, ...]  # peers that outlived us: their state is newer


@dataclass(frozen=True)
class StoreTailTruncated(NodeEvent):
    kind = "store_tail_truncated"
    file: str
    offset: int
    bytes_cut: int


@dataclass(frozen=True)
class AppStarted(NodeEvent):
    kind = "app_started"
    recovered_messages: int
    incarnation: str


@dataclass(frozen=True)
class ClusterWaitTimeout(NodeEvent):
    kind = "cluster_wait_timeout"
    peers: tuple[str, ...]


@dataclass(frozen=True)
class AppStopped(NodeEvent):
    kind = "app_stopped"


@dataclass(frozen=True)
class NodeStopped(NodeEvent):
    kind = "node_stopped"


@dataclass(frozen=True)
class StoreFailure(NodeEvent):
    kind = "store_failure"
    error: str


@dataclass(frozen=True)
class MemoryAlarm(NodeEvent):
    kind = "memory_alarm"
    state: Literal["set", "cleared"]
    used: int
    limit: int


# -- peers and partitions -----------------------------------------------------------------


@dataclass(frozen=True)
class PeerUp(NodeEvent):
    kind = "peer_up"
    peer: str
    incarnation: str
    restarted: bool


@dataclass(frozen=True)
class PeerDown(NodeEvent):
    kind = "peer_down"
    peer: str
    reason: str


@dataclass(frozen=True)
class PeerAppStarted(NodeEvent):
    kind = "peer_app_started"
    peer: str


@dataclass(frozen=True)
class PeerAppStopped(NodeEvent):
    kind = "peer_app_stopped"
    peer: str


@dataclass(frozen=True)
class PartitionDetected(NodeEvent):
    """We and ``peer`` each thought the other down: the sides ran apart."""

    kind = "partition_detected"
    op = "partition"
    peer: str

    def subject(self) -> str | None:
        return self.peer


@dataclass(frozen=True)
class PartitionHealed(NodeEvent):
    """A partition with ``peer`` no longer stands: one side restarted."""

    kind = "partition_healed"
    op = "partition-healed"
    peer: str

    def subject(self) -> str | None:
        return self.peer


@dataclass(frozen=True)
class PartialPartition(NodeEvent):
    kind = "partial_partition"
    lost: str
    via: str


@dataclass(frozen=True)
class Restart(NodeEvent):
    """The node restarts its app: its side lost an autoheal (``winners``), or ``peer``
    came back before its loss settled under pause_minority."""

    kind = "restart"
    op = "restart"
    reason: str
    peer: str | None = None
    winners: tuple[str, ...] = ()


@dataclass(frozen=True)
class Paused(NodeEvent):
    kind = "paused"
    reason: Literal["minority", "partial partition"]
    reachable: int
    nodes: int


@dataclass(frozen=True)
class Resumed(NodeEvent):
    kind = "resumed"
    reachable: int
    nodes: int


# -- client errors and policies ----------------------------------------------------------


@dataclass(frozen=True)
class ConnectionErrorReported(NodeEvent):
    """A client's connection closed with an error (``channel`` 0)."""

    kind = "connection_error"
    connection: int
    peer: str
    channel: int
    code: int
    text: str


@dataclass(frozen=True)
class ChannelErrorReported(ConnectionErrorReported):
    """One of a client's channels closed with an error."""

    kind = "channel_error"


@dataclass(frozen=True)
class ClientErrorsSuppressed(NodeEvent):
    kind = "client_errors_suppressed"
    host: str
    count: int
    window: float
    burst: int


@dataclass(frozen=True)
class PolicySet(NodeEvent):
    kind = "policy_set"
    vhost: str
    name: str
    pattern: str
    apply_to: str
    definition: dict[str, Any]
    priority: int


@dataclass(frozen=True)
class PolicyCleared(NodeEvent):
    kind = "policy_cleared"
    vhost: str
    name: str


# -- mirrored queues ------------------------------------------------------------------------
# ``member`` is a GM member, "node/incarnation#n" (only the node for RabbitMQ's nodes).


@dataclass(frozen=True)
class QueueEvent(NodeEvent):
    """An event of one queue."""

    vhost: str
    queue: str


@dataclass(frozen=True)
class MemberEvent(QueueEvent):
    """An event of one member of a queue's group, which names the node it is about."""

    member: str

    def subject(self) -> str | None:
        return _member_node(self.member)


@dataclass(frozen=True)
class QueueMaster(MemberEvent):
    """This node masters the queue: declared here, or ``reclaimed`` on recovery."""

    kind = "queue_master"
    provisional: bool = False
    reclaimed: bool = False


@dataclass(frozen=True)
class MirrorAdded(MemberEvent):
    kind = "mirror_added"
    op = "mirror-added"


@dataclass(frozen=True)
class MirrorDropped(MemberEvent):
    """Reported by the master: the policy no longer wants ``member``, or it is down."""

    kind = "mirror_dropped"
    op = "mirror-dropped"
    reason: Literal["policy", "down"] | None = None  # None: the node does not say


@dataclass(frozen=True)
class MirrorSynchronised(MemberEvent):
    """Reported by the master: ``member`` holds everything the master holds (by a
    completed sync or by draining what is older than its join)."""

    kind = "mirror_synchronised"


@dataclass(frozen=True)
class Promotion(MemberEvent):
    """``member`` (this node) became the master; ``previous``: the master it took over
    from, and ``synchronised`` whether it was, when the node knows."""

    kind = "promotion"
    op = "promotion"
    synchronised: bool | None = None
    previous: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PromotionRefused(MemberEvent):
    kind = "promotion_refused"
    setting: str


@dataclass(frozen=True)
class SyncStart(QueueEvent):
    kind = "sync_start"
    op = "sync-start"
    mirrors: tuple[str, ...]


@dataclass(frozen=True)
class SyncEnd(QueueEvent):
    """``synchronised``: every mirror in ``mirrors`` now holds what the master holds;
    ``cancelled``: none of them is synchronised by it."""

    kind = "sync_end"
    op = "sync-end"
    outcome: Literal["synchronised", "cancelled"]
    mirrors: tuple[str, ...] = ()


EVENTS: Mapping[str, type[NodeEvent]] = {
    cls.kind: cls for cls in (
        NodeStarted, BootWaiting, StoreTailTruncated, AppStarted, ClusterWaitTimeout,
        AppStopped, NodeStopped, StoreFailure, MemoryAlarm, PeerUp, PeerDown,
        PeerAppStarted, PeerAppStopped, PartitionDetected, PartitionHealed,
        PartialPartition, Restart, Paused, Resumed, ConnectionErrorReported,
        ChannelErrorReported, ClientErrorsSuppressed, PolicySet, PolicyCleared,
        QueueMaster, MirrorAdded, MirrorDropped, MirrorSynchronised, Promotion,
        PromotionRefused, SyncStart, SyncEnd)}


# -- lines ----------------------------------------------------------------------------------

LINE_KEYS = ("ts", "mono", "node", "event")


def line(event: NodeEvent, node: str, mono: float, wall: float) -> dict[str, Any]:
    """The JSON object of one event line."""
    return {"ts": wall, "mono": mono, "node": node, "event": event.kind, **event.fields()}


def decode(record: Mapping[str, Any]) -> NodeEvent:
    """The event of a line (its ``ts``, ``mono`` and ``node`` are left to the caller);
    :class:`EventSchemaError` names the first key that does not fit."""
    kind = record.get("event")
    cls = EVENTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise EventSchemaError("event", f"one of {', '.join(sorted(EVENTS))}", kind)
    hints = _hints(cls)
    given = {k: v for k, v in record.items() if k not in LINE_KEYS}
    unknown = sorted(set(given) - set(hints))
    if unknown:
        raise EventSchemaError(unknown[0], f"no such field in {kind}", given[unknown[0]])
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in given:
            if f.default is dataclasses.MISSING:
                raise EventSchemaError(f.name, f"present in {kind}", None)
            continue
        values[f.name] = _value(f.name, hints[f.name], given[f.name])
    return cls(**values)


_HINTS: dict[type[NodeEvent], dict[str, Any]] = {}


def _hints(cls: type[NodeEvent]) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = {name: hint for name, hint in typing.get_type_hints(cls).items()
                       if typing.get_origin(hint) is not ClassVar and hint is not ClassVar}
    return _HINTS[cls]


def _value(name: str, hint: Any, value: object) -> Any:
    """``value`` as the field's type says (JSON lists back to tuples), or an error."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is types.UnionType or origin is typing.Union:
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _value(name, inner, value)
    if origin is Literal:
        if value not in args:
            raise EventSchemaError(name, f"one of {', '.join(map(str, args))}", value)
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise EventSchemaError(name, "a list of names", value)
        return tuple(value)
    if origin is dict:
        if not isinstance(value, dict):
            raise EventSchemaError(name, "an object", value)
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise EventSchemaError(name, "a number", value)
        return value
    if type(value) is not hint:  # bool is no int here, nor int a bool
        raise EventSchemaError(name, _EXPECTED[hint], value)
    return value


_EXPECTED = {str: "a string", int: "a whole number", bool: "true or false"}


class EventLog:
    """A node's event log file, one line per emitted event."""

    def __init__(self, path: Path, node: str) -> None:
        self.path = path
        self.node = node
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO = path.open("a", encoding="utf-8")

    def emit(self, event: NodeEvent) -> None:
        record = line(event, self.node, time.monotonic(), time.time())
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()
        log.info("%s %s", event.kind, json.dumps(event.fields()))

    def close(self) -> None:
        self._file.close()
