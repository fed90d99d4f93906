"""``over-prefetch``: a consumer held more unanswered deliveries than its prefetch.

``basic.qos`` (a prefetch count, per consumer as RabbitMQ applies it) bounds how many
deliveries in ack mode a consumer has unanswered: the broker sends the next one only
once an answer has freed a slot, on whichever node the queue's master runs. The
record's count per consumer session is its deliveries in ack mode less those it
answered (ack, nack or reject, each message of a ``multiple`` ack on its own line),
started again by its ``consume ok`` and emptied by ``basic.recover``, its cancel and
its disconnect. A delivery that takes the count past prefetch + ``SLACK`` is a
violation: the slack covers answers the client wrote down only after the broker had
already freed their slots.

The bound holds across a failover too: the prefetch is the channel's to enforce, and
the channel still counts what it delivered for the old master, so the promoted
master's redeliveries of messages the consumer holds wait for their answers (each
copy counts until answered). Sessions without a prefetch (unlimited), no-ack
consumers and ``basic.get`` are not judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from harness.checker.anomalies import Grouper
from harness.checker.compose import Streaming
from harness.checker.protocol import Handler, Observer
from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event

SLACK = 2
KIND = "over-prefetch"


class OverPrefetch(Streaming):
    name = KIND

    def start(self, run: Run) -> Observer:
        return _OverPrefetch(run)


class _OverPrefetch:
    def __init__(self, run: Run) -> None:
        self.run = run
        # (process, queue) -> its deliveries in ack mode not answered yet (a message
        # the consumer got twice, a redelivery of one it still held, counts twice until
        # both are answered)
        self.held: dict[tuple[str, str], Counter[str]] = {}
        self.violations = Grouper()
        self.judged = 0

    def handlers(self) -> Mapping[str, Handler]:
        return {"consume": self.consume, "deliver": self.delivery, "ack": self.answer,
                "nack": self.answer, "reject": self.answer, "recover": self.end_process,
                "cancel": self.cancel, "disconnect": self.end_process}

    def consume(self, ev: Event) -> None:
        if ev.type == "ok" and ev.queue is not None:
            self.held.pop((ev.process, ev.queue), None)

    def cancel(self, ev: Event) -> None:
        if ev.type in ("ok", "info") and ev.queue is not None:
            self.held.pop((ev.process, ev.queue), None)

    def end_process(self, ev: Event) -> None:
        """A disconnect, or a ``basic.recover`` that gives back all the channel held."""
        if ev.type == "invoke" or ev.type == "fail":
            return
        for key in [k for k in self.held if k[0] == ev.process]:
            del self.held[key]

    def answer(self, ev: Event) -> None:
        if ev.type == "ok" and ev.msg is not None and ev.queue is not None:
            held = self.held.get((ev.process, ev.queue))
            if held is not None and held[ev.msg]:
                held[ev.msg] -= 1

    def delivery(self, ev: Event) -> None:
        msg, queue = ev.msg, ev.queue
        if ev.type != "ok" or msg is None or queue is None:
            return
        session = self.run.timeline.open_session(ev.process, queue)
        if session is None or session.mode != "ack" or not session.prefetch:
            return
        held = self.held.setdefault((ev.process, queue), Counter())
        held[msg] += 1
        self.judged += 1
        if held.total() > session.prefetch + SLACK:
            self.violations.add(
                KIND, msg, f"delivered to {ev.process} while it already held "
                f"{session.prefetch + SLACK} or more unanswered deliveries of {queue} "
                f"(prefetch {session.prefetch}, {SLACK} more allowed for answers recorded "
                "late)", ev.time, ev.time, queue)

    def finish(self) -> Result:
        counts = {"over_prefetch": len(self.violations), "prefetch_judged": self.judged}
        return Result(OverPrefetch.name, not self.violations, counts,
                      self.violations.anomalies(self.run.timeline), [])
