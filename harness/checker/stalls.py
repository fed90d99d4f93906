"""``stalled``: a consumer with room left idles while its queue holds ready messages.

An ack-mode consumer with prefetch P that holds fewer than P unacked deliveries must be
given a ready message. It has room from its latest delivery, its consume, or the settle
that left it room, whichever is latest; it stalled when, for more than B seconds of
that time, a message of its queue was confirmed and undelivered and was delivered
later (so it was ready, not lost), while no fault was in force or had ended within the
settle time before, and the record shows the queue's master up. B is generous: clients
and brokers share a loaded machine.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.ledger import ProducerLog, message_id
from harness.checker.membership import changes_from, replayed
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event

BOUND_S = 5.0
SETTLE_S = 3.0
_WITNESSES = 16  # undelivered messages kept per idle interval as evidence


class Stalls(Streaming):
    name = "stalled"

    def __init__(self, bound_s: float = BOUND_S, settle_s: float = SETTLE_S) -> None:
        self.bound_s = bound_s
        self.settle_s = settle_s

    def start(self, run: Run) -> Observer:
        return _Stalls(run, self.bound_s, self.settle_s)


@dataclass
class _Consumer:
    prefetch: int
    unacked: int
    free_since: float | None  # since when it holds fewer than ``prefetch``


@dataclass(frozen=True)
class _Idle:
    process: str
    queue: str
    begin: float
    end: float
    witnesses: tuple[tuple[ProducerLog, int], ...]


class _Stalls:
    def __init__(self, run: Run, bound_s: float, settle_s: float) -> None:
        self.run = run
        self.bound = bound_s
        self.settle = settle_s
        self.consumers: dict[tuple[str, str], _Consumer] = {}
        # queue -> (confirm time, log, seq) in confirm order, delivered ones dropped
        # from the front as they are passed
        self.confirmed: dict[str, deque[tuple[float, ProducerLog, int]]] = {}
        self.idle: list[_Idle] = []

    def handlers(self) -> Mapping[str, Handler]:
        return {"consume": self.consume, "confirm": self.confirm, "deliver": self.delivery,
                "get": self.delivery,
                "ack": self.settled, "nack": self.settled, "reject": self.settled,
                "cancel": self.cancel, "disconnect": self.disconnect}

    def consume(self, ev: Event) -> None:
        prefetch = ev.get("prefetch")
        if ev.type != "ok" or ev.mode != "ack" or type(prefetch) is not int or prefetch < 1:
            return
        assert ev.queue is not None
        key = (ev.process, ev.queue)
        known = self.consumers.get(key)  # a consume again on the same channel
        unacked = known.unacked if known is not None else 0
        self.consumers[key] = _Consumer(prefetch, unacked,
                                        ev.time if unacked < prefetch else None)

    def confirm(self, ev: Event) -> None:
        log = self.run.log
        # only once a consumer can be judged: earlier messages are not kept as evidence
        if ev.type == "ok" and log is not None and self.consumers:
            queue = self.run.ledger.queues[log.queue[ev.seq]]
            pending = self.confirmed.get(queue)
            if pending is None:
                pending = self.confirmed[queue] = deque()
            pending.append((ev.time, log, ev.seq))

    def delivery(self, ev: Event) -> None:
        if not self.consumers or ev.msg is None:
            return
        log = self.run.log
        if log is not None:
            pending = self.confirmed.get(self.run.ledger.queues[log.queue[ev.seq]])
            while pending and pending[0][1].count[pending[0][2]]:
                pending.popleft()
        assert ev.queue is not None
        consumer = self.consumers.get((ev.process, ev.queue))
        if consumer is None:
            return
        self._idle_until(ev.process, ev.queue, consumer, ev.time)
        consumer.unacked += 1
        consumer.free_since = ev.time if consumer.unacked < consumer.prefetch else None

    def settled(self, ev: Event) -> None:
        log = self.run.log
        if not self.consumers or ev.type != "ok" or log is None:
            return
        consumer = self.consumers.get((ev.process, self.run.ledger.queues[log.queue[ev.seq]]))
        if consumer is None:
            return
        consumer.unacked = max(consumer.unacked - 1, 0)
        if consumer.free_since is None and consumer.unacked < consumer.prefetch:
            consumer.free_since = ev.time

    def cancel(self, ev: Event) -> None:
        if ev.type in ("ok", "info") and ev.queue is not None:
            self._end(ev.process, ev.queue, ev.time)

    def disconnect(self, ev: Event) -> None:
        if ev.type != "invoke":
            for key in [k for k in self.consumers if k[0] == ev.process]:
                self._end(key[0], key[1], ev.time)
                del self.consumers[key]

    def _end(self, process: str, queue: str, time: float) -> None:
        consumer = self.consumers.get((process, queue))
        if consumer is not None:
            self._idle_until(process, queue, consumer, time)
            consumer.free_since = None  # no longer consuming: room is not idleness

    def _idle_until(self, process: str, queue: str, consumer: _Consumer, end: float) -> None:
        """Record the idle time up to ``end`` if a message was ready for more than the
        bound of it: confirmed more than the bound before ``end`` and still undelivered."""
        begin = consumer.free_since
        if begin is None or end - begin <= self.bound:
            return
        ready = [(confirmed, log, seq)
                 for confirmed, log, seq in islice(self.confirmed.get(queue, ()), _WITNESSES)
                 if confirmed < end - self.bound and not log.count[seq]]
        if ready:
            self.idle.append(_Idle(process, queue, max(begin, ready[0][0]), end,
                                   tuple((log, seq) for _, log, seq in ready)))

    def finish(self) -> Result:
        run = self.run
        if run.last is not None:
            for (process, queue), consumer in self.consumers.items():
                self._idle_until(process, queue, consumer, run.last)
        timeline, header = run.timeline, run.header
        faults = [f for f in timeline.faults() if f.applied]
        changes = changes_from(faults, timeline.syncs, header.nodes, header.partition_handling)
        outages = {q: replayed(header, changes, q).outages for q in {i.queue for i in self.idle}}
        stalls = Grouper()
        for idle in self.idle:
            ready = [message_id(log, seq) for log, seq in idle.witnesses if log.count[seq]]
            quiet = not any(f.overlaps(idle.begin - self.settle, idle.end) for f in faults)
            up = not any(down <= idle.end and back > idle.begin
                         for down, back in outages[idle.queue])
            if ready and quiet and up:
                stalls.add("stalled", idle.process,
                           f"{idle.process} had room for more but got nothing for "
                           f"{idle.end - idle.begin:.1f} s while {ready[0]} was ready in "
                           f"{idle.queue}", idle.begin, idle.end, idle.queue)
        return Result(Stalls.name, not stalls, {"stalled": len(stalls)},
                      stalls.anomalies(timeline))
