"""Per-message state, compact: a few bytes per message in arrays indexed by sequence.

Message ids are ``<producer>-<seq>`` with dense sequences, so each producer gets parallel
arrays (flags, delivery count, publish time, queue index) instead of a dict entry and an
object per message: 12 bytes a message whatever happened to it, and nothing else is kept
for messages that were delivered and acked.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

from harness.history.model import Event

ATTEMPTED = 1
CONFIRMED = 2  # the broker acked the publish (or committed its transaction)
NACKED = 4  # the broker nacked it
FAILED = 8  # the client knows it was never sent
INFO = 16  # an outcome was reported unknown (timeout, connection lost)
ACKED = 32  # a consumer settled a delivery of it (ack, or nack/reject without requeue)
TRANSIENT = 64  # not persistent, or its queue is not durable: a restart forgets it
UNFLAGGED = 128  # delivered without redelivered=true at least once



class ProducerLog:
    """One producer's messages; slot ``seq`` is message ``<name>-<seq>``."""

    __slots__ = ("count", "flags", "name", "queue", "sent")

    def __init__(self, name: str) -> None:
        self.name = name
        self.flags = bytearray()
        self.count = bytearray()  # deliveries seen, saturating at 255
        self.sent = array("d")  # publish invoke time
        self.queue = array("H")  # index into Ledger.queues

    def grow(self, seq: int) -> None:
        size = len(self.flags)
        extra = max(seq + 1 - size, size, 1024)  # doubling keeps appends amortised O(1)
        self.flags.extend(bytes(extra))
        self.count.extend(bytes(extra))
        self.sent.frombytes(bytes(8 * extra))
        self.queue.frombytes(bytes(2 * extra))

    def nbytes(self) -> int:
        return (len(self.flags) + len(self.count) + self.sent.itemsize * len(self.sent)
                + self.queue.itemsize * len(self.queue))


class Ledger:
    """Every published message's state, keyed by producer and sequence."""

    def __init__(self) -> None:
        self.producers: dict[str, ProducerLog] = {}
        self.queues: list[str] = []
        self._queue_index: dict[str, int] = {}

    def queue_index(self, name: str) -> int:
        index = self._queue_index.get(name)
        if index is None:
            index = self._queue_index[name] = len(self.queues)
            self.queues.append(name)
        return index

    def find(self, ev: Event) -> ProducerLog | None:
        """The log holding ``ev.msg`` if that message was published, else None."""
        log = self.producers.get(ev.producer) if ev.producer is not None else None
        if log is None or ev.seq >= len(log.flags) or not log.flags[ev.seq]:
            return None
        return log

    def attempt(self, ev: Event, queue: int, transient: bool) -> bool:
        """Record a publish invoke; False if the id was already used."""
        producer = ev.producer
        assert producer is not None  # the parser requires an id on publishes
        log = self.producers.get(producer)
        if log is None:
            log = self.producers[producer] = ProducerLog(producer)
        seq = ev.seq
        if seq >= len(log.flags):
            log.grow(seq)
        elif log.flags[seq]:
            return False
        log.flags[seq] = ATTEMPTED | TRANSIENT if transient else ATTEMPTED
        log.sent[seq] = ev.time
        log.queue[seq] = queue
        return True

    def messages(self, require: int = ATTEMPTED) -> Iterator[tuple[ProducerLog, int]]:
        """Every message whose flags include all of ``require``."""
        for log in self.producers.values():
            flags = log.flags
            for seq, value in enumerate(flags):
                if value & require == require:
                    yield log, seq

    def counts(self) -> dict[str, int]:
        """Totals over all messages (one pass over the arrays)."""
        attempted = confirmed = nacked = failed = indeterminate = delivered = acked = 0
        for log in self.producers.values():
            count = log.count
            for seq, flags in enumerate(log.flags):
                if not flags:
                    continue
                attempted += 1
                if flags & CONFIRMED:
                    confirmed += 1
                elif flags & NACKED:
                    nacked += 1
                elif flags & FAILED:
                    failed += 1
                else:
                    indeterminate += 1
                if count[seq]:
                    delivered += 1
                if flags & ACKED:
                    acked += 1
        return {"attempted": attempted, "confirmed": confirmed, "nacked": nacked,
                "failed": failed, "indeterminate": indeterminate, "delivered": delivered,
                "acked": acked}

    def nbytes(self) -> int:
        return sum(log.nbytes() for log in self.producers.values())


def message_id(log: ProducerLog, seq: int) -> str:
    return f"{log.name}-{seq}"
