"""A fanout publisher's messages, judged as one message per queue its exchange binds
(docs/history-format.md, "Fanout"): histories that must pass and ones that must fail."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.checker import Result, check
from harness.history import BadHistory, HistoryBuilder, read_history
from tests.checker.histories import NODES, violated

QUEUES = {q: {"members": list(NODES), "policy": {"ha-mode": "all"}} for q in ("q1", "q2")}


def fanout_history() -> HistoryBuilder:
    """f1 publishes through a fanout exchange bound to q1 and q2; p1 to q1 alone."""
    b = HistoryBuilder(nodes=NODES, queues=QUEUES, fanout={"f1": ["q1", "q2"]})
    for queue in ("q1", "q2"):
        b.consume(f"c-{queue}", queue)
    b.publish("f1-1", "q1")
    b.publish("f1-2", "q1")
    b.publish("p1-1", "q1")
    return b


def settle(b: HistoryBuilder, msg: str, queue: str) -> None:
    b.deliver(msg, f"c-{queue}", queue)
    b.ack(msg, f"c-{queue}", queue)


def judged(history: HistoryBuilder) -> Result:
    history.drain()
    return check(history.build())


def delivered_from_q2(*msgs: str) -> Result:
    """f1-1 and f1-2 delivered from q1, then ``msgs`` from q2 in that order, and p1-1."""
    b = fanout_history()
    for msg in ("f1-1", "f1-2"):
        settle(b, msg, "q1")
    for msg in msgs:
        settle(b, msg, "q2")
    settle(b, "p1-1", "q1")
    return judged(b)


def test_each_bound_queue_delivering_its_copy_is_valid() -> None:
    result = delivered_from_q2("f1-1", "f1-2")
    assert result.valid is True
    # Two fanout messages to two queues and one plain message: five to deliver.
    assert result.counts["attempted"] == 5 and result.counts["delivered"] == 5
    assert result.counts["duplicated"] == 0


def test_a_copy_one_queue_never_got_is_lost_there() -> None:
    result = delivered_from_q2("f1-1")
    assert result.valid is False
    assert violated(result, "lost") == ["f1.q2-2"]


def test_copies_are_ordered_per_queue() -> None:
    assert violated(delivered_from_q2("f1-2", "f1-1"), "reordered") == ["f1.q2-1"]


def test_a_copy_from_a_queue_the_exchange_does_not_bind_is_unexpected() -> None:
    b = HistoryBuilder(nodes=NODES, queues={**QUEUES, "q3": QUEUES["q1"]},
                       fanout={"f1": ["q1"]})
    b.consume("c-q1", "q1")
    b.consume("c-q3", "q3")
    b.publish("f1-1", "q1")
    settle(b, "f1-1", "q1")
    settle(b, "f1-1", "q3")
    assert violated(judged(b), "unexpected") == ["f1.q3-1"]


def test_a_file_reads_back_as_the_copies(tmp_path: Path) -> None:
    b = fanout_history()
    path = b.write(tmp_path / "history.jsonl")
    history = read_history(path)
    assert history.header.fanout == {"f1": ("q1", "q2")}
    published = [ev.msg for ev in history if ev.op == "publish"]
    assert published == ["f1.q1-1", "f1.q2-1", "f1.q1-2", "f1.q2-2", "p1-1"]


@pytest.mark.parametrize(("fanout", "field"), [
    (["f1"], "config.fanout"),
    ({"f1": []}, "config.fanout.f1"),
    ({"f1": "q1"}, "config.fanout.f1"),
])
def test_a_malformed_fanout_map_is_refused_by_name(fanout: object, field: str,
                                                   tmp_path: Path) -> None:
    b = HistoryBuilder(nodes=NODES)
    b.header_line["config"]["fanout"] = fanout
    with pytest.raises(BadHistory, match=f"field '{field}'"):
        read_history(b.write(tmp_path / "history.jsonl"))
