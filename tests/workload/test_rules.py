"""The rule prober against a real three-node cluster: on a correct one every rule is
asked, from the prober's own node and from the two others, and kept; on nodes
planted with a bug in one rule, the checker's ``rule-broken`` names that rule."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import aio_pika
import pytest

from faults.management import Management
from faults.process.node import NodeProcess, linked_nodes, start_all
from harness.checker import check
from harness.checker.rules import RuleBroken
from harness.history import HistoryWriter, read_history
from harness.workload import Recorder, Workload, WorkloadSpec
from harness.workload.client import Address, ClientContext, ConnectionLost
from harness.workload.rules import RuleProber
from tests.workload.test_workload import lines

NAMES = ["n1", "n2", "n3"]
RULES = {"delete-if-empty": "refused", "consume-exclusive-held": "refused",
         "delete-if-unused": "refused", "consume-exclusive-shared": "refused",
         "delete-if-unused-elsewhere": "refused",
         "consume-shared": "done", "auto-delete-kept": "done",
         "auto-delete-after-last": "refused", "exclusive-queue-locked": "refused"}


@contextmanager
def cluster(tmp_path: Path, breaks: tuple[str, ...]) -> Iterator[dict[str, NodeProcess]]:
    nodes = linked_nodes(tmp_path / "nodes", NAMES, tick=0.25,
                         extra_args=[arg for name in breaks for arg in ("--break", name)])
    try:
        start_all(list(nodes.values()))
        yield nodes
    finally:
        for node in nodes.values():
            node.stop()


def to(nodes: dict[str, NodeProcess]) -> Address:
    async def address(client_id: str, name: str) -> tuple[str, int]:
        return nodes[name].host, nodes[name].amqp_port
    return address


@pytest.mark.parametrize(("breaks", "broken"), [
    ((), set()),
    (("exclusive-consumer-ignored",), {"consume-exclusive-held", "consume-exclusive-shared"}),
    (("delete-ignores-if-empty",), {"delete-if-empty"}),
    (("delete-ignores-if-unused",), {"delete-if-unused", "delete-if-unused-elsewhere"}),
    (("auto-delete-kept",), {"auto-delete-after-last"}),
    (("auto-delete-per-node",), {"auto-delete-kept"}),
    (("exclusive-queue-shared",), {"exclusive-queue-locked"}),
])
async def test_every_rule_is_kept_or_named(tmp_path: Path, breaks: tuple[str, ...],
                                           broken: set[str]) -> None:
    spec = WorkloadSpec(queues=("q1",), publishers=0, consumers=0, rule_probers=1,
                        rule_interval=0.1)
    config = {"nodes": NAMES, "partition_handling": "ignore", "persistent": True,
              "queues": {"q1": {"members": NAMES}}}
    with cluster(tmp_path, breaks) as nodes, HistoryWriter(
            tmp_path / "history.jsonl", run_id="t", scenario="rules-test", seed=1,
            config=config) as history:
        recorder = Recorder(history)
        workload = Workload(spec, recorder, NAMES, {"q1": "n1"}, to(nodes))
        workload.start()
        # Three cycles ask from n2, n3 and n1 (the prober's own node) in turn; a loaded
        # machine takes longer, and the test's timeout ends one that never gets there.
        while recorder.figures.ops["delete ok"] < 3 * 3:
            await asyncio.sleep(0.1)
        await workload.stop()
        left = await asyncio.to_thread(Management(nodes["n1"].mgmt_url).call, "GET",
                                       "/api/queues/%2F")
    asked = [e for e in lines(tmp_path / "history.jsonl") if e["op"] == "rule"]
    answers = [e for e in asked if e["type"] != "invoke"]
    assert {(e["rule"], e["expect"]) for e in answers} <= set(RULES.items())
    assert all(e["type"] in ("ok", "fail") for e in answers)
    if not breaks:  # (a queue deleted against its rule ends that cycle there)
        assert {e["rule"] for e in answers} == set(RULES)
        assert {e["node"] for e in answers} == set(NAMES)
    breaking = {e["rule"] for e in answers
                if (e["type"] == "fail") != (e["expect"] == "refused")}
    assert breaking == broken
    assert not [q["name"] for q in left if q["name"].startswith("churn.")]
    result = check(read_history(tmp_path / "history.jsonl"), [RuleBroken()])
    assert result.valid is (not broken), (result.error, result.violations)
    named = {m.split(":")[1] for v in result.violations for m in v.messages}
    assert named == broken


async def test_a_channel_asked_of_a_closed_connection_ends_the_session(
        node: NodeProcess, tmp_path: Path) -> None:
    """The library raises a bare RuntimeError for a channel of a connection that just
    closed; a client takes it for the lost connection it is, not for a bug of ours."""
    spec = WorkloadSpec(publishers=0, consumers=0)
    with HistoryWriter(tmp_path / "history.jsonl", run_id="t", scenario="rules-test", seed=1,
                       config={"nodes": ["n1"], "partition_handling": "ignore"}) as history:
        ctx = ClientContext(spec, Recorder(history), ["n1"], to({"n1": node}),
                            asyncio.Event(), asyncio.Event())
        client = RuleProber("e1", "q1", "n1", ctx)
        connection = await aio_pika.connect(node.amqp_url)
        await connection.close()
        with pytest.raises(ConnectionLost, match="RuntimeError"):
            await client.channel(connection)
