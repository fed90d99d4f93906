"""The queue state machine against a model, with Hypothesis: delivery order by sequence
id (requeued messages go back to their original position), redelivered flags, purge,
and recovery of persistent messages through the real store after a crash."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cluster.core.message import Message
from cluster.core.queue import Queue
from cluster.store import MessageStore
from tests.examples import examples


class QueueAgainstModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="queue-model-"))
        self.store = MessageStore(self.directory)
        self.store.recover()
        self.queue = self._new_queue()
        self.ready: list[int] = []
        self.unacked: set[int] = set()
        self.delivered: set[int] = set()
        self.bodies: dict[int, bytes] = {}
        self.next_seq = 1

    def _new_queue(self) -> Queue:
        return Queue("/", "q", durable=True, log=self.store)

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    @rule(body=st.binary(max_size=20))
    def publish(self, body: bytes) -> None:
        self.queue.enqueue(Message("", "q", b"\x00\x3c\x00\x00" + bytes(10), body, True))
        self.ready.append(self.next_seq)
        self.bodies[self.next_seq] = body
        self.next_seq += 1

    @precondition(lambda self: self.ready)
    @rule(no_ack=st.booleans())
    def take(self, no_ack: bool) -> None:
        taken = self.queue.take_next(no_ack)
        assert taken is not None
        entry, redelivered = taken
        expected = min(self.ready)
        assert entry.seq == expected, "delivery must follow sequence order"
        assert entry.message.body == self.bodies[expected]
        assert redelivered == (expected in self.delivered)
        self.ready.remove(expected)
        if no_ack:
            del self.bodies[expected]
        else:
            self.unacked.add(expected)
            self.delivered.add(expected)

    @precondition(lambda self: self.unacked)
    @rule(data=st.data(), requeue=st.booleans())
    def settle(self, data: st.DataObject, requeue: bool) -> None:
        chosen = data.draw(st.sets(st.sampled_from(sorted(self.unacked)), min_size=1))
        self.unacked -= chosen
        if requeue:
            self.queue.requeue(sorted(chosen, reverse=True))
            self.ready.extend(chosen)
        else:
            self.queue.settle(chosen)
            for seq in chosen:
                del self.bodies[seq]

    @rule()
    def purge(self) -> None:
        assert self.queue.purge() == len(self.ready)
        for seq in self.ready:
            del self.bodies[seq]
        self.ready = []

    @rule()
    def crash_and_recover(self) -> None:
        """Commit what is staged, drop the in-memory queue, recover from disk: every
        message not yet acked comes back, flagged as possibly delivered."""
        self.store.commit()
        self.store.close()
        self.store = MessageStore(self.directory)
        recovered = self.store.recover().queues.get(self.queue.key, [])
        self.queue = self._new_queue()
        self.queue.restore((seq, Message.decode(payload)) for seq, payload in recovered)
        self.ready = sorted(self.ready + list(self.unacked))
        self.unacked = set()
        self.delivered = set(self.ready)
        # Numbering resumes after the highest recovered sequence id.
        self.next_seq = max(self.ready, default=0) + 1

    @invariant()
    def counts_match(self) -> None:
        assert self.queue.ready_count == len(self.ready)
        assert set(self.queue.unacked) == self.unacked
        assert self.queue.message_bytes == sum(len(b) for b in self.bodies.values())


QueueAgainstModel.TestCase.settings = settings(max_examples=examples(200), stateful_step_count=30,
                                               deadline=None)
TestQueueAgainstModel = QueueAgainstModel.TestCase
