"""The workload against a real node: every client kind records a history the checker
accepts, a connection dropped under the clients is recorded and survived, and the
final drain empties the queue."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from faults.management import Management
from faults.process.node import NodeProcess
from harness.checker import check
from harness.history import HistoryWriter, read_history
from harness.workload import Recorder, Workload, WorkloadSpec, drain
from harness.workload.client import Address
from harness.workload.spec import EVERY_QUEUE_EXCHANGE, EVERY_QUEUE_KEY, FANOUT_EXCHANGE
from tests.faults.cluster_support import running_cluster
from tests.ha_cases import NodeAccess, declare_mirrored

NODE = "n1"


def writer(tmp_path: Path, spec: WorkloadSpec) -> HistoryWriter:
    config = {"nodes": [NODE], "partition_handling": "ignore", "persistent": spec.persistent,
              "queues": {q: {"members": [NODE], "durable": spec.durable} for q in spec.queues},
              "fanout": spec.fanout_routes()}
    return HistoryWriter(tmp_path / "history.jsonl", run_id="t", scenario="workload-test",
                         seed=1, config=config)


def direct(node: NodeProcess) -> Address:
    async def address(client_id: str, name: str) -> tuple[str, int]:
        assert name == NODE
        return node.host, node.amqp_port
    return address


async def run_workload(node: NodeProcess, spec: WorkloadSpec, recorder: Recorder,
                       seconds: float, *, until: Counter[str] | None = None) -> bool:
    """Run for ``seconds``, then on until the record holds at least ``until``'s counts
    of its ops ("purge ok": 3): a loaded machine does fewer in the same time."""
    workload = Workload(spec, recorder, [NODE], {q: NODE for q in spec.queues}, direct(node))
    workload.start()
    await asyncio.sleep(seconds)
    # No deadline of its own: one that never gets there is ended by the test's timeout.
    while until and not recorder.figures.ops >= until:
        await asyncio.sleep(0.1)
    await workload.stop_publishing()
    await asyncio.sleep(0.3)
    await workload.stop()
    return await drain(spec, recorder, {q: [NODE] for q in spec.queues}, direct(node), 20.0)


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:]]


async def test_every_client_kind_records_a_valid_history(node: NodeProcess,
                                                         tmp_path: Path) -> None:
    spec = WorkloadSpec(queues=("q1", "q2"), publishers=2, consumers=1, no_ack_consumers=1,
                        getters=1, tx_publishers=1, multiple_ackers=1, rate=100, get_rate=50,
                        tx_batch=4, ack_delay=0.05, large_every=4, transient_every=3)
    with writer(tmp_path, spec) as history:
        recorder = Recorder(history)
        assert await run_workload(node, spec, recorder, 1.5,
                                  until=Counter({"confirm ok": 101}))
    events = lines(tmp_path / "history.jsonl")
    by = {(e["process"], e["op"], e["type"]) for e in events}
    for process in ("p1", "p2", "t1"):
        assert (process, "publish", "invoke") in by and (process, "confirm", "ok") in by
    assert ("t1", "publish", "ok") in by  # written inside the transaction before commit
    assert ("c1", "deliver", "ok") in by and ("c1", "ack", "ok") in by
    assert ("a1", "deliver", "ok") in by and ("a1", "ack", "ok") not in by
    assert ("g1", "get", "ok") in by
    # m1 acks with multiple=true, a line for each message an ack covered
    m1_acks = [e for e in events if e["process"] == "m1" and e["op"] == "ack"]
    assert len(m1_acks) >= 2 and all(e["type"] == "ok" and e["multiple"] for e in m1_acks)
    assert ("drain", "get", "ok") in by or ("drain", "get", "invoke") in by
    assert {("harness", "drain", "ok")} <= by
    # payloads are the ids: the message ids a consumer saw were all published
    published = {e["msg"] for e in events if e["op"] == "publish" and e["type"] == "invoke"}
    delivered = {e["msg"] for e in events if e["op"] in ("deliver", "get") and "msg" in e}
    assert delivered and delivered <= published
    # every fourth message of a publisher went in several frames, and came back whole
    assert any(int(m.rpartition("-")[2]) % 4 == 0 for m in delivered)
    assert not [e for e in events if "corrupt" in e]
    # every third message of a publisher was transient, and its publish line says so
    transient = {e["msg"] for e in events if e["op"] == "publish" and e["type"] == "invoke"
                 and e.get("persistent") is False}
    assert transient == {m for m in published if int(m.rpartition("-")[2]) % 3 == 0}
    assert transient & delivered
    result = check(read_history(tmp_path / "history.jsonl"))
    assert result.valid is True, (result.error, result.violations)
    assert result.counts["lost"] == 0 and result.counts["corrupted"] == 0
    assert result.counts["confirmed"] == recorder.figures.confirmed > 100
    assert result.counts["delivered"] == len(published)


async def test_publishers_reconnect_after_the_node_drops_their_connections(
        node_factory: Callable[..., NodeProcess], tmp_path: Path) -> None:
    n = node_factory(name=NODE)
    spec = WorkloadSpec(publishers=1, consumers=1, multiple_ackers=1, rate=200,
                        reconnect_delay=0.2)
    with writer(tmp_path, spec) as history:
        recorder = Recorder(history)
        workload = Workload(spec, recorder, [NODE], {"q1": NODE}, direct(n))
        workload.start()
        await asyncio.sleep(0.8)
        await asyncio.to_thread(n.restart)  # SIGTERM: the node closes every connection
        await asyncio.sleep(1.5)
        await workload.stop_publishing()
        await workload.stop()
        assert await drain(spec, recorder, {"q1": [NODE]}, direct(n), 20.0)
    events = lines(tmp_path / "history.jsonl")
    losses = [e for e in events if e["op"] == "disconnect" and e["type"] == "info"]
    assert {e["process"] for e in losses} == {"p1", "c1", "m1"}
    connects = [e for e in events if e["process"] == "p1" and e["op"] == "connect"
                and e["type"] == "ok"]
    assert len(connects) >= 2
    # sequences go on across the reconnection: ids stay unique and dense
    seqs = [int(str(e["msg"]).split("-")[1]) for e in events
            if e["process"] == "p1" and e["op"] == "publish"]
    assert seqs == list(range(1, len(seqs) + 1))
    last_loss = max(e["time"] for e in losses)
    assert any(e["op"] == "confirm" and e["type"] == "ok" and e["time"] > last_loss
               for e in events)
    result = check(read_history(tmp_path / "history.jsonl"))
    assert result.valid is True, (result.error, result.violations)


async def test_a_publisher_follows_a_killed_node_to_the_next_at_once(
        node_factory: Callable[..., NodeProcess], tmp_path: Path) -> None:
    """A session that outlived the reconnect delay is followed at once, and the
    connection's loss wakes the publisher between two publishes. The delay and the
    publish interval are an hour each, and the clients' clock moves an hour on when the
    node is killed: waiting out either would hold the publisher past the test's
    timeout."""
    nodes = {"n1": node_factory(name="n1"), "n2": node_factory(name="n2")}
    hour = 3600.0
    spec = WorkloadSpec(publishers=1, consumers=0, rate=1 / hour, reconnect="next",
                        reconnect_delay=hour)
    skipped = 0.0

    async def address(client_id: str, name: str) -> tuple[str, int]:
        return nodes[name].host, nodes[name].amqp_port

    with writer(tmp_path, spec) as history:
        recorder = Recorder(history)
        workload = Workload(spec, recorder, list(nodes), {"q1": "n1"}, address)
        workload.ctx.clock = lambda: time.monotonic() + skipped
        workload.start()
        while not recorder.figures.ops["confirm ok"]:
            await asyncio.sleep(0.1)
        skipped = hour
        nodes["n1"].kill()
        # No deadline of its own: a publisher waiting out the delay meets the test's timeout.
        while not any(e["process"] == "p1" and e["op"] == "confirm" and e["type"] == "ok"
                      and e.get("node") == "n2" for e in lines(tmp_path / "history.jsonl")):
            await asyncio.sleep(0.2)
        await workload.stop_publishing()
        await workload.stop()
    events = [e for e in lines(tmp_path / "history.jsonl") if e["process"] == "p1"]
    lost = next(e["time"] for e in events if e["op"] == "disconnect" and e["type"] == "info")
    after = [(e["op"], e["type"], e.get("node")) for e in events if e["time"] > lost]
    assert after[:2] == [("connect", "invoke", "n2"), ("connect", "ok", "n2")], after


def test_backlog_queues_get_publishers_only_and_the_spread_is_deterministic() -> None:
    spec = WorkloadSpec(queues=("q1", "b1", "q2"), backlog_queues=("b1",), publishers=3,
                        consumers=3, getters=1, requeuers=2, cancel_consumers=1)
    queues = spec.client_queues()
    assert queues == spec.client_queues()
    assert [queues[p] for p in ("p1", "p2", "p3")] == ["q1", "b1", "q2"]
    assert [queues[c] for c in ("c1", "c2", "c3")] == ["q1", "q2", "q1"]
    assert [queues[c] for c in ("r1", "r2", "x1", "g1")] == ["q1", "q2", "q1", "q1"]
    assert {client for client, queue in queues.items() if queue == "b1"} == {"p2"}


async def test_requeuers_cancel_consumers_and_a_backlog_queue(node: NodeProcess,
                                                              tmp_path: Path) -> None:
    """Requeuers answer every third delivery with a nack, a reject (both requeue) or a
    reject without requeue, in turn: the broker delivers the requeued ones again
    flagged and never the discarded ones; every consume says whether it asked for
    x-cancel-on-ha-failover and its prefetch; the backlog queue is only drained."""
    spec = WorkloadSpec(queues=("q1", "b1"), backlog_queues=("b1",), publishers=2,
                        consumers=1, requeuers=1, cancel_consumers=1, rate=60, prefetch=7)
    with writer(tmp_path, spec) as history:
        assert await run_workload(node, spec, Recorder(history), 1.5,
                                  until=Counter({"nack ok": 1, "reject ok": 2}))
    events = lines(tmp_path / "history.jsonl")
    consumes = {e["process"]: (e["cancel_on_failover"], e["prefetch"], e["queue"])
                for e in events if e["op"] == "consume" and e["type"] == "ok"}
    assert consumes == {"c1": (False, 7, "q1"), "r1": (False, 1, "q1"), "x1": (True, 7, "q1")}
    settled = [e for e in events if e["process"] == "r1" and e["op"] in ("ack", "nack", "reject")]
    refused = [e for e in settled if e["op"] != "ack"]
    assert [(e["op"], e["requeue"]) for e in refused][:3] == [
        ("nack", True), ("reject", True), ("reject", False)]
    assert all(e["type"] == "ok" for e in refused)
    assert [e["op"] != "ack" for e in settled[:6]] == [False, False, True] * 2
    # what came back was delivered again, flagged as a redelivery; what was dropped not
    deliveries = Counter(e["msg"] for e in events if e["op"] in ("deliver", "get")
                         and "msg" in e)
    again = {e["msg"] for e in events if e["op"] in ("deliver", "get") and e.get("redelivered")}
    assert {e["msg"] for e in refused if e["requeue"]} <= again
    dropped = [e["msg"] for e in refused if not e["requeue"]]
    assert dropped and all(deliveries[m] == 1 for m in dropped)
    backlog = {e["process"] for e in events if e.get("queue") == "b1"
               and e["op"] in ("deliver", "get") and "msg" in e}
    assert backlog == {"drain"}
    result = check(read_history(tmp_path / "history.jsonl"))
    assert result.valid is True, (result.error, result.violations)


async def test_churners_declare_and_delete_queues_leaving_none_behind(
        node: NodeProcess, tmp_path: Path) -> None:
    """Each churned queue lives until ``churn_keep`` newer ones exist, in declare order,
    every other one exclusive; the node lists none once the churner stopped."""
    spec = WorkloadSpec(publishers=1, consumers=1, churners=1, churn_rate=20, churn_keep=3)
    with writer(tmp_path, spec) as history:
        assert await run_workload(node, spec, Recorder(history), 1.0,
                                  until=Counter({"declare ok": 11}))
    churned = [e for e in lines(tmp_path / "history.jsonl") if e["process"] == "k1"
               and e["op"] in ("declare", "delete")]
    events = [e for e in churned if e["type"] == "ok"]
    declared = [e["queue"] for e in events if e["op"] == "declare"]
    assert len(declared) > 10 and declared == [f"churn.k1.{i}" for i in
                                              range(1, len(declared) + 1)]
    exclusive = [e["queue"] for e in churned if e["op"] == "declare" and e.get("exclusive")]
    assert exclusive == declared[1::2]
    assert [e["queue"] for e in events if e["op"] == "delete"] == declared
    live = list(itertools.accumulate(1 if e["op"] == "declare" else -1 for e in events))
    assert max(live) == spec.churn_keep + 1 and live[-1] == 0
    listing = await asyncio.to_thread(Management(node.mgmt_url).call, "GET", "/api/queues/%2F")
    assert not [q["name"] for q in listing if q["name"].startswith("churn.")]


async def test_only_cancel_consumers_hear_of_a_failover(tmp_path: Path) -> None:
    """x1 asked for x-cancel-on-ha-failover, c1 did not: when the master dies under
    them (both on a mirror's node), the broker cancels x1 alone, and x1 consumes again."""
    with running_cluster(tmp_path / "nodes") as cluster:
        nodes = {name: NodeAccess(f"amqp://guest:guest@{n.host}:{n.amqp_port}/%2F",
                                  n.mgmt_url) for name, n in cluster.nodes.items()}
        await asyncio.to_thread(declare_mirrored, nodes, "n1", "ha.q")

        async def on_n2(client_id: str, name: str) -> tuple[str, int]:
            return cluster.nodes["n2"].host, cluster.nodes["n2"].amqp_port

        spec = WorkloadSpec(queues=("ha.q",), publishers=1, consumers=1, cancel_consumers=1,
                            rate=50)
        with writer(tmp_path, spec) as history:
            workload = Workload(spec, Recorder(history), cluster.names, {"ha.q": "n2"}, on_n2)
            workload.start()
            await asyncio.sleep(1.0)
            await asyncio.to_thread(cluster.control.kill, "n1")
            await asyncio.sleep(3.0)
            await workload.stop_publishing()
            await workload.stop()
    events = lines(tmp_path / "history.jsonl")
    cancelled = {e["process"] for e in events if e["op"] == "cancel" and e["type"] == "info"}
    assert cancelled == {"x1"}
    consumes = [e["process"] for e in events if e["op"] == "consume" and e["type"] == "ok"]
    assert consumes.count("x1") == 2 and consumes.count("c1") == 1


async def test_purgers_purge_the_backlog_and_publishes_go_through_the_exchange(
        node: NodeProcess, tmp_path: Path) -> None:
    """Publishers route through the workload's exchange, bound to each queue by its
    name (a spy queue bound with q1's key sees every q1 publish: they went through the
    exchange); the purger empties the backlog queue while they publish, and the checker
    finds nothing a purge removed delivered again nor anything lost."""
    spec = WorkloadSpec(queues=("q1", "b1"), backlog_queues=("b1",), publishers=2,
                        consumers=1, purgers=1, purge_interval=0.3, rate=60,
                        exchange="x.direct")
    url = f"amqp://guest:guest@{node.host}:{node.amqp_port}/"
    async with await aio_pika.connect(url) as connection:
        channel = await connection.channel()
        exchange = await channel.declare_exchange("x.direct", aio_pika.ExchangeType.DIRECT,
                                                  durable=True)
        for queue, key in (("q1", "q1"), ("b1", "b1"), ("spy", "q1")):
            declared = await channel.declare_queue(queue, durable=True)
            await declared.bind(exchange, routing_key=key)
    with writer(tmp_path, spec) as history:
        assert await run_workload(node, spec, Recorder(history), 1.5,
                                  until=Counter({"purge ok": 3}))
    events = lines(tmp_path / "history.jsonl")
    async with await aio_pika.connect(url) as connection:
        spy = await (await connection.channel()).declare_queue("spy", passive=True)
    q1_confirmed = [e for e in events if e["op"] == "confirm" and e["type"] == "ok"
                    and e["queue"] == "q1"]
    assert q1_confirmed and spy.declaration_result.message_count >= len(q1_confirmed)
    purges = [e for e in events if e["op"] == "purge" and e["type"] == "ok"]
    assert len(purges) >= 3 and {e["queue"] for e in purges} == {"b1"}
    assert sum(e["count"] for e in purges) > 0
    confirmed = {e["msg"] for e in events if e["op"] == "confirm" and e["type"] == "ok"}
    delivered = {e["msg"] for e in events if e["op"] in ("deliver", "get") and "msg" in e}
    q1 = {e["msg"] for e in events if e["op"] == "publish" and e["queue"] == "q1"}
    assert q1 and q1 & confirmed <= delivered  # routed, not dropped
    result = check(read_history(tmp_path / "history.jsonl"))
    assert result.valid is True, (result.error, result.violations)
    assert next(p for p in result.parts if p.checker == "lost").counts["maybe_purged"] > 0


@pytest.mark.parametrize(("breaks", "lost_in_q2"), [
    ((), set()), (("fanout-one-queue",), {0}), (("direct-one-queue",), {1})])
async def test_a_fanout_publishers_messages_reach_every_queue(
        tmp_path: Path, breaks: tuple[str, ...], lost_in_q2: set[int]) -> None:
    """A fanout publisher's exchanges bind q1 and q2 (the direct one by one key), one
    consumer each: every message confirmed must come from both, each queue's copy judged
    on its own; a node whose fanout (direct) exchange routes to one queue loses the q2
    copy of every message that went through it (even (odd) ones)."""
    node = NodeProcess(NODE, tmp_path / NODE,
                       extra_args=[arg for name in breaks for arg in ("--break", name)])
    spec = WorkloadSpec(queues=("q1", "q2"), publishers=0, fanout_publishers=1,
                        consumers=2, rate=100)
    try:
        node.start()
        async with await aio_pika.connect(node.amqp_url) as connection:
            channel = await connection.channel()
            fanout = await channel.declare_exchange(FANOUT_EXCHANGE,
                                                    aio_pika.ExchangeType.FANOUT, durable=True)
            direct = await channel.declare_exchange(EVERY_QUEUE_EXCHANGE,
                                                    aio_pika.ExchangeType.DIRECT, durable=True)
            for queue in spec.queues:
                declared = await channel.declare_queue(queue, durable=True)
                await declared.bind(fanout)
                await declared.bind(direct, routing_key=EVERY_QUEUE_KEY)
        with writer(tmp_path, spec) as history:
            assert await run_workload(node, spec, Recorder(history), 1.0,
                                      until=Counter({"confirm ok": 50}))
    finally:
        node.kill()
    events = lines(tmp_path / "history.jsonl")
    confirmed = {e["msg"] for e in events if e["op"] == "confirm" and e["type"] == "ok"}
    from_queue = {queue: {e["msg"] for e in events if e["op"] in ("deliver", "get")
                          and e.get("queue") == queue and "msg" in e}
                  for queue in spec.queues}
    result = check(read_history(tmp_path / "history.jsonl"))
    assert confirmed and confirmed <= from_queue["q1"]
    missing = {m for m in confirmed if int(m.rpartition("-")[2]) % 2 in lost_in_q2}
    assert from_queue["q2"] & confirmed == confirmed - missing
    lost = {m for v in result.violations if v.kind == "lost" for m in v.messages}
    assert lost == {f"f1.q2-{m.rpartition('-')[2]}" for m in missing}
    assert result.valid is (not breaks), (result.error, result.violations)
    if not breaks:
        assert result.counts["delivered"] == 2 * len(confirmed)


@pytest.mark.parametrize(("breaks", "kind"), [((), None),
                                              (("tx-rollback-kept",), "unexpected"),
                                              (("recover-drops",), "lost-unacked"),
                                              (("no-requeue-on-close",), "lost-unacked")])
async def test_rollbacks_recovers_and_leavers(tmp_path: Path, breaks: tuple[str, ...],
                                              kind: str | None) -> None:
    """Every second transaction is rolled back (its messages recorded as never
    published), the recoverer answers every third delivery with basic.recover and the
    leaver closes its connection at every tenth, holding it (both must come again,
    redelivered): valid on a correct node; on a node that keeps rolled-back publishes,
    or drops what a recover or a close should give back, the checker says so (one node:
    no promotion ever gives back what a close kept)."""
    node = NodeProcess(NODE, tmp_path / NODE,
                       extra_args=[arg for name in breaks for arg in ("--break", name)])
    spec = WorkloadSpec(publishers=0, tx_publishers=1, tx_rollback_every=2, consumers=0,
                        recoverers=1, leavers=1, rate=100, tx_batch=3)
    try:
        node.start()
        with writer(tmp_path, spec) as history:
            assert await run_workload(node, spec, Recorder(history), 1.5, until=Counter({
                "confirm fail": 6, "confirm ok": 6, "recover ok": 2, "disconnect ok": 2}))
    finally:
        node.kill()
    events = lines(tmp_path / "history.jsonl")
    rolled_back = {e["msg"] for e in events if e["op"] == "confirm" and e["type"] == "fail"}
    committed = {e["msg"] for e in events if e["op"] == "confirm" and e["type"] == "ok"}
    assert len(rolled_back) >= 6 and len(committed) >= 6
    recovers = [e for e in events if e["process"] == "v1" and e["op"] == "recover"]
    assert len(recovers) >= 2 and all(e["type"] == "ok" for e in recovers)
    leaves = [e for e in events if e["process"] == "l1" and e["op"] == "disconnect"]
    assert len(leaves) >= 2 and all(e["type"] == "ok" for e in leaves)
    result = check(read_history(tmp_path / "history.jsonl"))
    kinds = {v.kind for v in result.violations}
    if kind is None:
        delivered = [e for e in events if e["op"] in ("deliver", "get") and "msg" in e]
        assert not rolled_back & {e["msg"] for e in delivered}
        assert any(e["redelivered"] for e in delivered if e["process"] == "v1")
        held: dict[str, int] = {}  # what l1 held when it left -> where l1 got it
        holding: dict[str, int] = {}
        for i, e in enumerate(events):
            if e["process"] == "l1" and e["op"] == "deliver":
                holding[e["msg"]] = i
            elif e["process"] == "l1" and e["op"] == "ack" and e["type"] == "ok":
                holding.pop(e["msg"], None)
            elif e["process"] == "l1" and e["op"] == "disconnect":
                held.update(holding)
                holding.clear()
        assert held
        for msg, got in held.items():  # each came again
            assert any(e.get("msg") == msg for e in events[got + 1:]
                       if e["op"] in ("deliver", "get")), msg
        assert result.valid is True, (result.error, result.violations)
    else:
        assert result.valid is False and kind in kinds, kinds
