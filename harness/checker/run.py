"""The shared state of one pass over a history: the ledger and the timeline.

Checkers see each event *before* the run applies it, so "the state" a checker reads is
that of everything earlier (e.g. how many times this message was delivered before now).
``Run.log`` is the ledger entry of the event's message, looked up once per event for
every checker (None when the event has no message or it was never published before).
Lines that contradict earlier ones are :class:`InconsistentHistory`: the producer's
fault, like a malformed line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from harness.checker.ledger import (
    ACKED,
    CONFIRMED,
    FAILED,
    INFO,
    NACKED,
    UNFLAGGED,
    Ledger,
    ProducerLog,
)
from harness.checker.timeline import Timeline
from harness.history.errors import InconsistentHistory
from harness.history.model import NODE_OPS, Event, Header
from harness.history.reader import TornLine

_OUTCOME_FLAGS = {("confirm", "ok"): CONFIRMED, ("confirm", "fail"): NACKED,
                  ("confirm", "info"): INFO, ("publish", "fail"): FAILED,
                  ("publish", "info"): INFO}


class Run:
    def __init__(self, header: Header, source: str) -> None:
        self.header = header
        self.source = source
        self.ledger = Ledger()
        self.timeline = Timeline(source)
        self.log: ProducerLog | None = None
        # set by the pass as it goes and when it reaches the end
        self.events = 0
        self.first: float | None = None
        self.last: float | None = None
        self.first_publish: float | None = None
        self.torn: TornLine | None = None
        self._durable = {name: q.durable for name, q in header.queues.items()}
        # Queues the workload's churners declared or deleted: their membership is not
        # in the header, so the replay of the record cannot judge them.
        self.churned: set[str] = set()

    def appliers(self) -> dict[str, Callable[[Event], None]]:
        """Op -> how the run's state takes in an event of that op."""
        timeline = self.timeline
        table: dict[str, Callable[[Event], None]] = {
            "publish": self._publish, "confirm": self._outcome, "deliver": self._deliver,
            "get": self._get, "ack": self._ack, "nack": self._refuse,
            "reject": self._refuse, "recover": timeline.requeue,
            "consume": timeline.consume, "cancel": timeline.cancel,
            "connect": timeline.connect, "disconnect": timeline.disconnect,
            "drain": timeline.drain, "fault-start": timeline.fault_start,
            "fault-end": timeline.fault_end, "declare": self._churn, "delete": self._churn,
            "purge": timeline.purge, "members": self._members,
        }
        table.update((op, timeline.node_report) for op in NODE_OPS)
        return table

    def _members(self, ev: Event) -> None:
        """A queue's join order as the harness read it from a broker that chose it
        itself (RabbitMQ starts a new queue's mirrors at once): it takes the header's
        place, for the same master and members, if no fault has started yet."""
        assert ev.queue is not None
        config = self.header.queue(ev.queue)
        order = tuple(ev.get("members"))
        if self.timeline.faults():
            raise InconsistentHistory(self.source, ev.line, "members",
                                      "a join order read before any fault started", order)
        if order[0] != config.members[0] or sorted(order) != sorted(config.members):
            raise InconsistentHistory(
                self.source, ev.line, "members",
                f"the header's members of {ev.queue}, its master {config.members[0]} first, "
                f"in some order: {list(config.members)}", list(order))
        queues = {**self.header.queues, ev.queue: dataclasses.replace(config, members=order)}
        self.header = dataclasses.replace(self.header, queues=queues)

    def _churn(self, ev: Event) -> None:
        assert ev.queue is not None
        self.churned.add(ev.queue)

    def _publish(self, ev: Event) -> None:
        if ev.type != "invoke":
            self._outcome(ev)
            return
        queue = ev.queue
        assert queue is not None
        durable = self._durable.get(queue, True)
        transient = not durable or not ev.get("persistent", self.header.persistent)
        if not self.ledger.attempt(ev, self.ledger.queue_index(queue), transient):
            raise InconsistentHistory(self.source, ev.line, "msg",
                                      "an id no earlier publish used", ev.msg)
        if self.first_publish is None:
            self.first_publish = ev.time

    def _outcome(self, ev: Event) -> None:
        flag = _OUTCOME_FLAGS.get((ev.op, ev.type))
        if flag is None:
            return
        if flag == NACKED and ev.get("rolled_back") is True:
            flag = FAILED  # a rolled-back transaction's messages were never published
        log = self.log
        if log is None:
            raise InconsistentHistory(self.source, ev.line, "msg",
                                      f"the id of a message published earlier (for {ev.op})",
                                      ev.msg)
        log.flags[ev.seq] |= flag

    def _deliver(self, ev: Event) -> None:
        log = self.log
        if log is not None:
            count = log.count[ev.seq]
            if count < 255:  # saturating: "more than once" is what matters
                log.count[ev.seq] = count + 1
            if not ev.redelivered:
                log.flags[ev.seq] |= UNFLAGGED
            if self.delivery_mode(ev) == "no-ack":
                log.flags[ev.seq] |= ACKED  # settled as it is sent
        self.timeline.consumed(ev)

    def delivery_mode(self, ev: Event) -> str | None:
        """``ack`` or ``no-ack``: the delivery's own ``mode``, else its consumer
        session's; None when neither says."""
        if ev.mode is None and ev.op == "deliver":
            assert ev.queue is not None
            session = self.timeline.open_session(ev.process, ev.queue)
            return session.mode if session is not None else None
        return ev.mode

    def _get(self, ev: Event) -> None:
        if ev.msg is not None:
            self._deliver(ev)
        elif ev.type == "info" and ev.mode == "no-ack" and ev.queue is not None:
            self.timeline.lost_no_ack_get(ev)

    def _ack(self, ev: Event) -> None:
        log = self.log
        if ev.type != "fail" and log is not None:
            log.flags[ev.seq] |= ACKED

    def _refuse(self, ev: Event) -> None:
        """A nack or reject: a requeue point, or without requeue a settle like an ack."""
        if ev.requeue:
            self.timeline.requeue(ev)
        else:
            self._ack(ev)
