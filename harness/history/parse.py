"""Validation of decoded JSON lines into :class:`Header` and :class:`Event`.

Every rejection is a :class:`BadHistory` naming the line, the field and what was
expected. The per-event path is written for speed: one dict lookup per field and a type
check, because it runs once per line of multi-million-line histories.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from harness.history.errors import BadHistory
from harness.history.model import (
    FORMAT,
    MODES,
    NODE_OPS,
    OPS,
    PARTITION_HANDLING,
    READABLE_VERSIONS,
    RULE_EXPECTS,
    TYPES,
    Event,
    Header,
    QueueConfig,
)

_NODE_QUEUE_OPS = frozenset({"promotion", "mirror-added", "mirror-dropped", "sync-start",
                             "sync-end"})
# The ops whose ``msg`` is what a broker delivered, a message id or not.
_DELIVERY_OPS = frozenset({"deliver", "get", "ack", "nack", "reject"})
_NEG_INF, _INF = float("-inf"), float("inf")

_Check = Callable[[Event, Mapping[str, Any], int], None]
_PROMOTE_KEYS = {"ha-promote-on-failure": ("always", "when-synced"),
                 "ha-promote-on-shutdown": ("always", "when-synced")}


class Parser:
    """Turns decoded lines of one file into events; ``path`` only labels errors."""

    def __init__(self, path: str) -> None:
        self.path = path
        specific: dict[str, _Check] = {
            "publish": self._publish, "confirm": self._with_msg, "deliver": self._deliver,
            "get": self._get, "ack": self._with_msg, "nack": self._settle,
            "reject": self._settle, "recover": self._recover, "consume": self._consume,
            "cancel": self._with_queue, "connect": self._plain, "disconnect": self._plain,
            "drain": self._plain, "cluster-state": self._cluster_state,
            "declare": self._with_queue, "delete": self._with_queue,
            "purge": self._with_queue, "fault-start": self._fault, "fault-end": self._fault,
            "members": self._members, "unroutable": self._unroutable, "rule": self._rule,
        }
        specific.update((op, self._node_op) for op in NODE_OPS)
        assert specific.keys() == OPS
        self._specific = specific

    def fail(self, line: int, field: str | None, expected: str, got: object = None) -> BadHistory:
        return BadHistory(self.path, line, field, expected, got)

    # -- header ------------------------------------------------------------------------

    def header(self, obj: object, line: int = 1) -> Header:
        if not isinstance(obj, dict):
            raise self.fail(line, None, "a JSON object (the header)", obj)
        if obj.get("format") != FORMAT:
            raise self.fail(line, "format", repr(FORMAT), obj.get("format"))
        if obj.get("version") not in READABLE_VERSIONS:
            raise self.fail(line, "version", " or ".join(map(str, sorted(READABLE_VERSIONS)))
                            + " (the versions this reader knows)", obj.get("version"))
        run_id = self._str(obj, "run_id", line)
        scenario = self._str(obj, "scenario", line)
        seed = obj.get("seed")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise self.fail(line, "seed", "an integer", seed)
        time = self._number(obj, "time", line)
        wall = self._number(obj, "wall", line) if "wall" in obj else None
        config = obj.get("config")
        if not isinstance(config, dict):
            raise self.fail(line, "config", "an object", config)
        nodes = self._names(config.get("nodes"), "config.nodes", line, allow_empty=False)
        handling = config.get("partition_handling")
        if handling not in PARTITION_HANDLING:
            raise self.fail(line, "config.partition_handling",
                            "one of " + ", ".join(sorted(PARTITION_HANDLING)), handling)
        persistent = config.get("persistent", True)
        if not isinstance(persistent, bool):
            raise self.fail(line, "config.persistent", "true or false", persistent)
        queues_obj = config.get("queues", {})
        if not isinstance(queues_obj, dict):
            raise self.fail(line, "config.queues", "an object of queue name -> queue", queues_obj)
        queues = {name: self._queue(name, spec, nodes, line) for name, spec in queues_obj.items()}
        fanout_obj = config.get("fanout", {})
        if not isinstance(fanout_obj, dict):
            raise self.fail(line, "config.fanout", "an object of producer -> queues", fanout_obj)
        fanout = {producer: self._names(routed, f"config.fanout.{producer}", line,
                                        allow_empty=False)
                  for producer, routed in fanout_obj.items()}
        return Header(run_id=run_id, scenario=scenario, seed=seed, nodes=nodes,
                      partition_handling=handling, persistent=persistent, queues=queues,
                      config=config, time=time, wall=wall, fanout=fanout)

    def _queue(self, name: str, spec: object, nodes: tuple[str, ...], line: int) -> QueueConfig:
        where = f"config.queues.{name}"
        if not isinstance(spec, dict):
            raise self.fail(line, where, "an object", spec)
        durable = spec.get("durable", True)
        if not isinstance(durable, bool):
            raise self.fail(line, where + ".durable", "true or false", durable)
        policy = spec.get("policy", {})
        if not isinstance(policy, dict):
            raise self.fail(line, where + ".policy", "an object (policy definition)", policy)
        for key, allowed in _PROMOTE_KEYS.items():
            if key in policy and policy[key] not in allowed:
                raise self.fail(line, f"{where}.policy.{key}", " or ".join(allowed), policy[key])
        members = (self._names(spec["members"], where + ".members", line, allow_empty=False)
                   if "members" in spec else nodes)
        stray = [m for m in members if m not in nodes]
        if stray:
            raise self.fail(line, where + ".members", "names from config.nodes", stray)
        return QueueConfig(name, members, durable, policy)

    def _str(self, obj: Mapping[str, Any], key: str, line: int) -> str:
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            raise self.fail(line, key, "a non-empty string", value)
        return value

    def _number(self, obj: Mapping[str, Any], key: str, line: int) -> float:
        value = obj.get(key)
        if (not isinstance(value, int | float) or isinstance(value, bool)
                or not math.isfinite(value)):
            raise self.fail(line, key, "a finite number (seconds)", value)
        return float(value)

    def _names(self, value: object, key: str, line: int, allow_empty: bool) -> tuple[str, ...]:
        if (not isinstance(value, list) or not all(isinstance(v, str) and v for v in value)
                or (not value and not allow_empty)):
            kind = "a list of names" if allow_empty else "a non-empty list of names"
            raise self.fail(line, key, kind, value)
        return tuple(value)

    # -- events ------------------------------------------------------------------------

    def event(self, obj: object, line: int) -> Event:
        if type(obj) is not dict:
            raise self.fail(line, None, "a JSON object (an event)", obj)
        get = obj.get
        time = get("time")
        if (type(time) is not float and type(time) is not int) or not _NEG_INF < time < _INF:
            raise self.fail(line, "time", "a finite number (monotonic seconds)", time)
        process = get("process")
        if type(process) is not str or not process:
            raise self.fail(line, "process", "a non-empty string", process)
        op: Any = get("op")
        specific = self._specific.get(op) if type(op) is str else None
        if specific is None:
            raise self.fail(line, "op", "one of " + ", ".join(sorted(OPS)), op)
        kind = get("type")
        if kind not in TYPES:
            raise self.fail(line, "type", "one of invoke, ok, fail, info", kind)
        msg = get("msg")
        producer: str | None = None
        seq = -1
        if msg is not None:
            if type(msg) is not str or not msg:
                raise self.fail(line, "msg", "a non-empty string", msg)
            producer, dash, digits = msg.rpartition("-")
            if dash and producer and digits.isdigit() and digits.isascii():
                seq = int(digits)
            else:
                producer = None
                if op not in _DELIVERY_OPS:
                    # Deliveries carry whatever the broker handed over (a client's answer
                    # to one names it as delivered); everything else the harness made
                    # itself, so a malformed id is the producer's bug.
                    raise self.fail(line, "msg", "a message id '<producer>-<seq>'", msg)
        queue = get("queue")
        if queue is not None and (type(queue) is not str or not queue):
            raise self.fail(line, "queue", "a non-empty string", queue)
        node = get("node")
        if node is not None and (type(node) is not str or not node):
            raise self.fail(line, "node", "a non-empty string", node)
        wall = get("wall")
        if wall is not None and type(wall) is not float and type(wall) is not int:
            raise self.fail(line, "wall", "a number (seconds since the epoch)", wall)
        ev = Event(obj, line, time, wall, process, node, op, kind, msg, producer, seq, queue)
        specific(ev, obj, line)
        return ev

    # -- what each op requires beyond the common fields ---------------------------------

    # The common ops test their fields inline: these run for most lines of a history.

    def _no_msg(self, ev: Event, line: int) -> BadHistory:
        return self.fail(line, "msg", f"a message id (required for {ev.op})")

    def _no_queue(self, ev: Event, line: int) -> BadHistory:
        return self.fail(line, "queue", f"a queue name (required for {ev.op})")

    def _publish(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.msg is None:
            raise self._no_msg(ev, line)
        if ev.queue is None:
            raise self._no_queue(ev, line)
        if "persistent" in obj:
            self._bool(obj, "persistent", line, required=True)

    def _with_msg(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.msg is None:
            raise self._no_msg(ev, line)

    def _deliver(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.msg is None:
            raise self._no_msg(ev, line)
        if ev.queue is None:
            raise self._no_queue(ev, line)
        self._delivery(ev, obj, line)

    def _get(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.queue is None:
            raise self._no_queue(ev, line)
        if ev.msg is not None:
            self._delivery(ev, obj, line)
        else:
            ev.mode = self._mode(obj, line, required=False)

    def _settle(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.msg is None:
            raise self._no_msg(ev, line)
        ev.requeue = self._bool(obj, "requeue", line, required=True)

    def _recover(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        ev.requeue = self._bool(obj, "requeue", line, required=False)

    def _consume(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.queue is None:
            raise self._no_queue(ev, line)
        ev.mode = self._mode(obj, line, required=True)

    def _with_queue(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.queue is None:
            raise self._no_queue(ev, line)

    def _plain(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        pass

    def _cluster_state(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.type == "ok" and not isinstance(obj.get("queues"), dict):
            raise self.fail(line, "queues", "an object: queue name -> what the node reports",
                            obj.get("queues"))

    def _members(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.queue is None:
            raise self._no_queue(ev, line)
        self._names(obj.get("members"), "members", line, allow_empty=False)

    def _unroutable(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        self._str(obj, "probe", line)
        if ev.type == "ok" and type(obj.get("returned")) is not bool:
            raise self.fail(line, "returned", "true or false (did basic.return bring it back)",
                            obj.get("returned"))

    def _rule(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.queue is None:
            raise self._no_queue(ev, line)
        self._str(obj, "rule", line)
        if obj.get("expect") not in RULE_EXPECTS:
            raise self.fail(line, "expect", " or ".join(sorted(RULE_EXPECTS)), obj.get("expect"))

    def _node_op(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.type != "info":
            raise self.fail(line, "type", "info (node events are the broker's reports)",
                            ev.type)
        if ev.op in _NODE_QUEUE_OPS and ev.queue is None:
            raise self._no_queue(ev, line)
        if ev.op == "node-event":
            self._str(obj, "event", line)

    def _delivery(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        if ev.type != "ok":
            raise self.fail(line, "type", f"ok (a {ev.op} with a message was received)", ev.type)
        redelivered = obj.get("redelivered")
        if type(redelivered) is not bool:
            raise self.fail(line, "redelivered", "true or false", redelivered)
        ev.redelivered = redelivered
        mode = obj.get("mode")
        if mode is not None:
            if mode not in MODES:
                raise self.fail(line, "mode", "ack or no-ack", mode)
            ev.mode = mode

    def _fault(self, ev: Event, obj: Mapping[str, Any], line: int) -> None:
        ev.fault = self._str(obj, "fault", line)
        ev.fault_id = self._str(obj, "fault_id", line)
        targets = obj.get("targets", [])
        ev.targets = self._names(targets, "targets", line, allow_empty=True)
        grudge = obj.get("grudge")
        if grudge is not None and (not isinstance(grudge, dict) or not all(
                isinstance(v, list) and all(isinstance(n, str) for n in v)
                for v in grudge.values())):
            raise self.fail(line, "grudge", "an object of node -> nodes it cannot hear", grudge)
        definition = obj.get("definition")
        if definition is not None and not isinstance(definition, dict):
            raise self.fail(line, "definition", "an object (policy definition)", definition)
        if ev.fault == "policy" and ev.op == "fault-start" and definition is None:
            raise self.fail(line, "definition", "the policy definition being applied")
        if ev.fault == "sync" and ev.op == "fault-start" and ev.queue is None:
            raise self.fail(line, "queue", "the queue being synchronised")
        pattern = obj.get("pattern")
        if pattern is not None:
            try:
                re.compile(pattern)
            except (re.error, TypeError):
                raise self.fail(line, "pattern", "a regular expression", pattern) from None

    def _bool(self, obj: Mapping[str, Any], key: str, line: int, required: bool) -> bool:
        value = obj.get(key)
        if value is None and not required:
            return False
        if type(value) is not bool:
            raise self.fail(line, key, "true or false", value)
        return value

    def _mode(self, obj: Mapping[str, Any], line: int, required: bool) -> str | None:
        mode = obj.get("mode")
        if mode is None and not required:
            return None
        if mode not in MODES:
            raise self.fail(line, "mode", "ack or no-ack", mode)
        return str(mode)
