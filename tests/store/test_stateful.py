"""MessageStore against a dict model, under random operations, commits and reopens."""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from cluster.store import MessageStore
from tests.examples import examples

from .helpers import segments

# Tiny segments, a record or two each, so that rolling, reclamation and compaction happen
# all the time.
SEGMENT_BYTES = 64

Model = dict[str, dict[int, bytes]]

queues = st.sampled_from(["a", "b", "/\x00c"])
seqs = st.one_of(st.integers(-2, 12), st.sampled_from([-(2**63), 2**63 - 1]))
payloads = st.binary(max_size=48)


def _as_recovered(model: Model) -> dict[str, list[tuple[int, bytes]]]:
    return {queue: sorted(messages.items()) for queue, messages in model.items() if messages}


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="store-machine-"))
        self.store = MessageStore(self.directory, segment_bytes=SEGMENT_BYTES)
        assert self.store.recover().queues == {}
        self.staged: Model = {}  # every operation so far
        self.durable: Model = {}  # operations up to the last commit

    @rule(queue=queues, seq=seqs, payload=payloads)
    def append(self, queue: str, seq: int, payload: bytes) -> None:
        self.store.stage_append(queue, seq, payload)
        self.staged.setdefault(queue, {})[seq] = payload

    @rule(queue=queues, batch=st.lists(st.tuples(seqs, payloads), min_size=1, max_size=12))
    def append_many(self, queue: str, batch: list[tuple[int, bytes]]) -> None:
        for seq, payload in batch:
            self.append(queue, seq, payload)

    @rule(queue=queues, removed=st.lists(seqs, max_size=8))
    def remove(self, queue: str, removed: list[int]) -> None:
        self.store.stage_remove(queue, iter(removed))  # any iterable will do
        for seq in removed:
            self.staged.get(queue, {}).pop(seq, None)

    @rule(queue=queues)
    def drop(self, queue: str) -> None:
        self.store.stage_drop_queue(queue)
        self.staged.pop(queue, None)

    @rule()
    def commit(self) -> None:
        assert self.store.commit() == self.store.staged_lsn
        self.durable = copy.deepcopy(self.staged)

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = MessageStore(self.directory, segment_bytes=SEGMENT_BYTES)
        recovery = self.store.recover()
        assert recovery.truncated == []
        assert recovery.queues == _as_recovered(self.durable)
        self.staged = copy.deepcopy(self.durable)

    @precondition(lambda self: bool(segments(self.directory)))
    @rule(garbage=st.binary(min_size=1, max_size=24))
    def reopen_after_a_torn_write(self, garbage: bytes) -> None:
        self.store.close()
        newest = segments(self.directory)[-1]
        size = newest.stat().st_size
        with open(newest, "ab") as f:
            f.write(garbage)
        self.store = MessageStore(self.directory, segment_bytes=SEGMENT_BYTES)
        recovery = self.store.recover()
        assert [(t.file, t.offset, t.bytes_cut) for t in recovery.truncated] == [
            (newest, size, len(garbage))
        ]
        assert recovery.queues == _as_recovered(self.durable)
        self.staged = copy.deepcopy(self.durable)

    @invariant()
    def lsns_are_ordered(self) -> None:
        assert self.store.durable_lsn <= self.store.staged_lsn

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.directory)


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=examples(200), stateful_step_count=50,
                                     deadline=None)
