"""Histories built in memory, for tests and property tests.

The builder has its own clock (each event advances it by ``step`` unless placed with
:meth:`HistoryBuilder.at`), no I/O and no randomness, so a Hypothesis strategy can turn
a list of operations into the same history every time. Every event goes through the
reader's validation, so a built history is one a file could hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.history.fanout import copies
from harness.history.model import FORMAT, VERSION, Event, Header
from harness.history.parse import Parser
from harness.history.reader import TornLine
from harness.history.writer import encode


@dataclass
class MemoryHistory:
    """A history held in a list; ``torn`` can be set to model a cut-short file."""

    header: Header
    events: list[Event]
    torn: TornLine | None = None
    source: str = field(default="<memory>")

    def __iter__(self) -> Iterator[Event]:
        return copies(self.events, self.header.fanout)


class HistoryBuilder:
    """Assemble a history event by event::

        b = HistoryBuilder()
        b.publish("p1-1")            # publish invoke + confirm ok
        b.deliver("p1-1"); b.ack("p1-1")
        b.drain()
        history = b.build()
    """

    def __init__(self, *, nodes: Sequence[str] = ("n1", "n2", "n3"),
                 partition_handling: str = "pause_minority", persistent: bool = True,
                 queues: Mapping[str, Mapping[str, Any]] | None = None,
                 fanout: Mapping[str, Sequence[str]] | None = None, scenario: str = "test",
                 seed: int = 0, run_id: str = "test-run", start: float = 0.0,
                 step: float = 0.001) -> None:
        self._parser = Parser("<builder>")
        self.now = start
        self.step = step
        config: dict[str, Any] = {"nodes": list(nodes), "partition_handling": partition_handling,
                                  "persistent": persistent}
        if queues is not None:
            config["queues"] = {name: dict(spec) for name, spec in queues.items()}
        if fanout is not None:
            config["fanout"] = {producer: list(routed) for producer, routed in fanout.items()}
        self.header_line: dict[str, Any] = {
            "format": FORMAT, "version": VERSION, "run_id": run_id, "scenario": scenario,
            "seed": seed, "time": start, "wall": 1_700_000_000.0 + start, "config": config}
        self.header = self._parser.header(self.header_line)
        self.lines: list[dict[str, Any]] = []
        self.events: list[Event] = []
        self._faults = 0

    # -- clock -------------------------------------------------------------------------

    def at(self, time: float) -> HistoryBuilder:
        """Place the next event at ``time`` (not before the previous one)."""
        if time < self.now:
            raise ValueError(f"time {time} is before the builder's clock {self.now}")
        self.now = time
        return self

    # -- any event ---------------------------------------------------------------------

    def add(self, process: str, op: str, type: str, **fields: Any) -> Event:
        line = {"time": self.now, "wall": 1_700_000_000.0 + self.now, "process": process,
                "op": op, "type": type, **{k: v for k, v in fields.items() if v is not None}}
        ev = self._parser.event(line, len(self.lines) + 2)
        self.lines.append(line)
        self.events.append(ev)
        self.now += self.step
        return ev

    # -- clients -----------------------------------------------------------------------

    def publish(self, msg: str, queue: str = "q", *, outcome: str | None = "ok",
                process: str | None = None, node: str = "n1",
                persistent: bool | None = None) -> None:
        """A publish invoke, then its outcome: ``ok`` (confirmed), ``nack`` (the broker
        nacked it), ``info`` (no answer), ``fail`` (never sent) or ``None`` (pending)."""
        who = process or msg.rpartition("-")[0]
        self.add(who, "publish", "invoke", msg=msg, queue=queue, node=node,
                 persistent=persistent)
        if outcome == "ok":
            self.add(who, "confirm", "ok", msg=msg, queue=queue, node=node)
        elif outcome == "nack":
            self.add(who, "confirm", "fail", msg=msg, queue=queue, node=node)
        elif outcome == "info":
            self.add(who, "confirm", "info", msg=msg, queue=queue, node=node)
        elif outcome == "fail":
            self.add(who, "publish", "fail", msg=msg, queue=queue, node=node)
        elif outcome is not None:
            raise ValueError(f"unknown publish outcome {outcome!r}")

    def consume(self, consumer: str = "c1", queue: str = "q", mode: str = "ack",
                node: str = "n1", *, prefetch: int | None = None,
                cancel_on_failover: bool | None = None) -> None:
        self.add(consumer, "consume", "ok", queue=queue, mode=mode, node=node,
                 prefetch=prefetch, cancel_on_failover=cancel_on_failover)

    def deliver(self, msg: str, consumer: str = "c1", queue: str = "q", *,
                redelivered: bool = False, mode: str = "ack", node: str = "n1") -> None:
        self.add(consumer, "deliver", "ok", msg=msg, queue=queue, redelivered=redelivered,
                 mode=mode, node=node)

    def get(self, msg: str | None, consumer: str = "g1", queue: str = "q", *,
            redelivered: bool = False, node: str = "n1") -> None:
        """A ``basic.get`` answered with ``msg``, or with queue-empty when ``None``."""
        self.add(consumer, "get", "ok", msg=msg, queue=queue,
                 redelivered=None if msg is None else redelivered, node=node)

    def ack(self, msg: str, consumer: str = "c1", queue: str = "q") -> None:
        self.add(consumer, "ack", "ok", msg=msg, queue=queue)

    def nack(self, msg: str, consumer: str = "c1", queue: str = "q", *,
             requeue: bool = True) -> None:
        self.add(consumer, "nack", "ok", msg=msg, queue=queue, requeue=requeue)

    def reject(self, msg: str, consumer: str = "c1", queue: str = "q", *,
               requeue: bool = True) -> None:
        self.add(consumer, "reject", "ok", msg=msg, queue=queue, requeue=requeue)

    def cancel(self, consumer: str = "c1", queue: str = "q", type: str = "ok") -> None:
        self.add(consumer, "cancel", type, queue=queue)

    def declare(self, queue: str, process: str = "k1", node: str = "n1",
                type: str = "ok", exclusive: bool = False) -> None:
        """A churner's ``queue.declare``: the invoke, then its outcome ``type``."""
        self.add(process, "declare", "invoke", queue=queue, node=node,
                 exclusive=True if exclusive else None)
        self.add(process, "declare", type, queue=queue, node=node)

    def delete(self, queue: str, process: str = "k1", node: str = "n1",
               type: str = "ok") -> None:
        """A churner's ``queue.delete``: the invoke, then its outcome ``type``."""
        self.add(process, "delete", "invoke", queue=queue, node=node)
        self.add(process, "delete", type, queue=queue, node=node)

    def connect(self, process: str, node: str = "n1") -> None:
        self.add(process, "connect", "ok", node=node)

    def disconnect(self, process: str, type: str = "ok", node: str | None = None) -> None:
        """``type="info"`` is a connection lost, ``"ok"`` one the client closed."""
        self.add(process, "disconnect", type, node=node)

    def cluster_state(self, node: str, phase: str, queues: Mapping[str, Any] | None = None,
                      type: str = "ok") -> None:
        """What ``node`` reports of every queue (``queues``), or ``type="fail"``."""
        self.add("harness", "cluster-state", type, node=node, phase=phase,
                 queues=None if queues is None else dict(queues),
                 error="unreachable" if type == "fail" else None)

    def purge(self, queue: str = "q", process: str = "u1", node: str = "n1",
              type: str = "ok", count: int | None = None) -> None:
        """A purger's ``queue.purge``: the invoke, then its outcome ``type``."""
        self.add(process, "purge", "invoke", queue=queue, node=node)
        self.add(process, "purge", type, queue=queue, node=node, count=count)

    def rule(self, rule: str, expect: str, type: str, queue: str = "churn.e1.1",
             process: str = "e1", node: str = "n1") -> None:
        """A rule prober's ask: the invoke, then its outcome ``type`` (``fail`` is a
        refusal, with its code)."""
        fields = {"rule": rule, "expect": expect, "queue": queue, "node": node}
        self.add(process, "rule", "invoke", **fields)
        self.add(process, "rule", type, **fields, **({"code": 406} if type == "fail" else {}))

    def drain(self, queue: str | None = None, type: str = "ok") -> None:
        self.add("harness", "drain", type, queue=queue)

    # -- faults and node reports -------------------------------------------------------

    def fault(self, kind: str, targets: Sequence[str] = (), type: str = "ok",
              **detail: Any) -> str:
        """Start a fault; returns its id for :meth:`heal`."""
        self._faults += 1
        fault_id = f"f{self._faults}"
        self.add("nemesis", "fault-start", type, fault=kind, fault_id=fault_id,
                 targets=list(targets), **detail)
        return fault_id

    def heal(self, fault_id: str, type: str = "ok", **detail: Any) -> None:
        start = next(line for line in self.lines
                     if line["op"] == "fault-start" and line["fault_id"] == fault_id)
        self.add("nemesis", "fault-end", type, fault=start["fault"], fault_id=fault_id,
                 targets=start["targets"], **detail)

    def node_event(self, op: str, reporter: str, **fields: Any) -> None:
        self.add(reporter, op, "info", **fields)

    # -- results -----------------------------------------------------------------------

    def build(self, torn: TornLine | None = None) -> MemoryHistory:
        return MemoryHistory(self.header, list(self.events), torn)

    def text(self) -> str:
        """The history as file contents (header line first)."""
        return "".join(encode(line) + "\n" for line in [self.header_line, *self.lines])

    def write(self, path: Path) -> Path:
        path.write_text(self.text(), encoding="utf-8")
        return path
