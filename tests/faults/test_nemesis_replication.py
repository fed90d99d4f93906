"""Faults aimed at a queue's replication, as a run records them, seen on real nodes:
a ``sync`` fault that ends only once every mirror is synchronised, and latency or a
black-hole on the node links from the master (``links: "master-out"``) that slows or
holds what the master replicates."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pika
import pytest

from faults.nemesis import LinkNemesis, Nemesis, Op, QueueAdminNemesis
from harness.checker import check
from harness.history import HistoryWriter, read_history
from harness.run.faults import ActiveFaults, RecordedNemesis
from tests.faults.cluster_support import LiveCluster, running_cluster, wait_until
from tests.ha_cases import (
    NodeAccess,
    declare_mirrored,
    publish,
    queue_info,
    synchronised_mirrors,
    unsynchronised_mirrors,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LiveCluster]:
    with running_cluster(tmp_path / "nodes") as running:
        yield running


def access(cluster: LiveCluster) -> dict[str, NodeAccess]:
    return {name: NodeAccess(f"amqp://guest:guest@{node.host}:{node.amqp_port}/%2F",
                             node.mgmt_url)
            for name, node in cluster.nodes.items()}


def recorded(cluster: LiveCluster, inner: Nemesis, writer: HistoryWriter) -> RecordedNemesis:
    """The run's recorded nemesis, with n1 as the first queue's master."""
    return RecordedNemesis(inner, writer, lambda which, queue=None: "n1", cluster.topology,
                           cluster.names, ActiveFaults())


def history(cluster: LiveCluster, path: Path) -> HistoryWriter:
    return HistoryWriter(path, run_id="r", scenario="t", seed=1, config={
        "nodes": cluster.names, "partition_handling": "pause_minority"})


def fault_lines(path: Path) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, path.read_text().splitlines()[1:])
            if e["op"] in ("fault-start", "fault-end")]


def test_a_sync_fault_ends_once_every_mirror_is_synchronised(
        cluster: LiveCluster, tmp_path: Path) -> None:
    nodes = access(cluster)
    unsynchronised_mirrors(nodes, cluster.control, master="n1", queue="ha.sync",
                           messages=2000, definition={"ha-sync-batch-size": 1})
    assert synchronised_mirrors(nodes["n1"], "ha.sync") == []
    path = tmp_path / "history.jsonl"
    admin = QueueAdminNemesis({n: cluster.mgmt(n) for n in cluster.names}, random.Random(1))
    with history(cluster, path) as writer:
        done = recorded(cluster, admin, writer).invoke(Op("sync-queue", {"queue": "ha.sync"}))
        # when the op returns, the sync is over: no waiting for it here
        assert synchronised_mirrors(nodes["n1"], "ha.sync") == ["n2", "n3"]
        writer.append("harness", "drain", "ok")
    assert done.type == "ok" and sorted(done.value["synchronised"]) == ["n2", "n3"]
    lines = fault_lines(path)
    assert [(e["op"], e["type"], e["fault"], e.get("queue")) for e in lines] == [
        ("fault-start", "invoke", "sync", "ha.sync"), ("fault-start", "ok", "sync", "ha.sync"),
        ("fault-end", "ok", "sync", None)]
    # the master finished copying (its own report) before the fault ended
    ended = [e["mono"] for e in cluster.events("n1", "sync_end") if e["queue"] == "ha.sync"]
    assert ended and max(ended) <= lines[-1]["time"]
    faults = check(read_history(path)).data["faults"]
    assert [(f["kind"], f["end"] is not None) for f in faults] == [("sync", True)]


def test_a_sync_cancelled_while_it_copies_leaves_the_mirrors_unsynchronised(
        cluster: LiveCluster, tmp_path: Path) -> None:
    """``cancel_after``: the sync is cancelled while its batches of one still go, the
    mirrors stay unsynchronised with part of the queue, and the run records the sync as
    cancelled, which the checker does not count as one."""
    nodes = access(cluster)
    unsynchronised_mirrors(nodes, cluster.control, master="n1", queue="ha.sync",
                           messages=2000, definition={"ha-sync-batch-size": 1})
    path = tmp_path / "history.jsonl"
    admin = QueueAdminNemesis({n: cluster.mgmt(n) for n in cluster.names}, random.Random(1))
    with history(cluster, path) as writer:
        done = recorded(cluster, admin, writer).invoke(
            Op("sync-queue", {"queue": "ha.sync", "node": "n1", "cancel_after": 0.0}))
        writer.append("harness", "drain", "ok")
    assert done.type == "ok" and done.value["cancelled"] is True
    assert synchronised_mirrors(nodes["n1"], "ha.sync") == []
    outcomes = [e["outcome"] for e in cluster.events("n1", "sync_end") if e["queue"] == "ha.sync"]
    assert outcomes == ["cancelled"]
    assert [(e["op"], e["type"], e.get("cancelled")) for e in fault_lines(path)] == [
        ("fault-start", "invoke", None), ("fault-start", "ok", True), ("fault-end", "ok", None)]
    faults = check(read_history(path)).data["faults"]
    assert [(f["kind"], f.get("cancelled")) for f in faults] == [("sync", True)]


def test_a_sync_to_cancel_waits_for_a_mirror_to_copy_to(cluster: LiveCluster) -> None:
    """Asked while the mirrors are still down (a step just after a restart), the sync
    starts once a mirror rejoins unsynchronised, so there is a copy to cancel."""
    nodes = access(cluster)
    declare_mirrored(nodes, "n1", "ha.later", {"ha-sync-batch-size": 1})
    for mirror in ("n2", "n3"):
        cluster.control.stop(mirror, timeout=10.0)
    publish(nodes["n1"], "ha.later", [b"m%d" % i for i in range(2000)])
    admin = QueueAdminNemesis({n: cluster.mgmt(n) for n in cluster.names}, random.Random(1))
    with ThreadPoolExecutor(1) as pool:
        asked = pool.submit(admin.invoke, Op("sync-queue", {
            "queue": "ha.later", "node": "n1", "cancel_after": 0.0}))
        for mirror in ("n2", "n3"):
            cluster.control.start(mirror)
        done = asked.result(timeout=60)
    assert done.type == "ok" and done.value["cancelled"] is True
    assert synchronised_mirrors(nodes["n1"], "ha.later") == []


def test_a_sync_the_broker_refuses_is_recorded_as_failed_with_its_queue(
        cluster: LiveCluster, tmp_path: Path) -> None:
    """A broken cluster may refuse a sync; the run records it, and its history stays
    readable."""
    path = tmp_path / "history.jsonl"
    admin = QueueAdminNemesis({n: cluster.mgmt(n) for n in cluster.names}, random.Random(1))
    with history(cluster, path) as writer:
        done = recorded(cluster, admin, writer).invoke(
            Op("sync-queue", {"queue": "no.such.queue", "node": "n1"}))
        writer.append("harness", "drain", "ok")
    assert done.type == "fail" and "404" in (done.error or "")
    assert [(e["op"], e["type"], e.get("queue")) for e in fault_lines(path)] == [
        ("fault-start", "invoke", "no.such.queue"), ("fault-start", "fail", "no.such.queue")]
    assert check(read_history(path)).valid is True


def confirm_seconds(node: NodeAccess, queue: str) -> float:
    """The median time of a few confirmed publishes through ``node`` (a lower bound is
    what the tests assert: load only makes it longer)."""
    connection = pika.BlockingConnection(pika.URLParameters(node.amqp_url))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        times = []
        for _ in range(5):
            started = time.monotonic()
            channel.basic_publish("", queue, b"x")  # returns once confirmed
            times.append(time.monotonic() - started)
    finally:
        connection.close()
    return sorted(times)[len(times) // 2]


def test_latency_on_the_links_from_the_master_delays_its_replication(
        cluster: LiveCluster, tmp_path: Path) -> None:
    nodes = access(cluster)
    declare_mirrored(nodes, "n1", "ha.rep")
    path = tmp_path / "history.jsonl"
    with history(cluster, path) as writer:
        nemesis = recorded(cluster, LinkNemesis(cluster.client, cluster.topology), writer)
        done = nemesis.invoke(Op("degrade", {"toxic": "latency", "links": "master-out",
                                             "stream": "upstream",
                                             "attributes": {"latency": 400, "jitter": 0}}))
        assert done.type == "ok" and done.value["links"] == ["link:n1->n2", "link:n1->n3"]
        # a confirm waits for the mirrors, whose copies now travel 400 ms
        assert confirm_seconds(nodes["n1"], "ha.rep") >= 0.4
        assert nemesis.invoke(Op("heal")).type == "ok"
        # healed: no toxic is left on the master's links (a lower bound on confirm time
        # is the effect; an upper bound would only measure how busy the machine is)
        assert all(not cluster.client.proxy(link).toxic_names()
                   for link in ("link:n1->n2", "link:n1->n3"))
    start = next(e for e in fault_lines(path) if e["op"] == "fault-start" and e["type"] == "ok")
    assert start["fault"] == "latency" and start["links"] == ["link:n1->n2", "link:n1->n3"]


def copies(nodes: dict[str, NodeAccess], queue: str) -> dict[str, int]:
    """How many messages each node's replica of ``queue`` holds, as it reports."""
    return {name: int(str(queue_info(node, queue)["messages"]))
            for name, node in nodes.items()}


def publish_one(node: NodeAccess, queue: str, body: bytes) -> None:
    """One message without confirms; the close makes sure the node has read it."""
    connection = pika.BlockingConnection(pika.URLParameters(node.amqp_url))
    connection.channel().basic_publish("", queue, body)
    connection.close()


def test_a_black_hole_on_the_links_from_the_master_holds_its_replication(
        cluster: LiveCluster, tmp_path: Path) -> None:
    nodes = access(cluster)
    declare_mirrored(nodes, "n1", "ha.hole")
    publish_one(nodes["n1"], "ha.hole", b"replicated")
    wait_until(lambda: copies(nodes, "ha.hole") == {"n1": 1, "n2": 1, "n3": 1},
               "the first message on every replica")
    path = tmp_path / "history.jsonl"
    with history(cluster, path) as writer:
        nemesis = recorded(cluster, LinkNemesis(cluster.client, cluster.topology), writer)
        done = nemesis.invoke(Op("degrade", {"toxic": "timeout", "links": "master-out",
                                             "stream": "upstream"}))
        assert done.type == "ok" and done.value["attributes"] == {"timeout": 0}
        publish_one(nodes["n1"], "ha.hole", b"held")
        time.sleep(0.3)  # ample for a copy to reach the mirrors, were it sent
        # the master has it; what it sends its mirrors is held
        assert copies(nodes, "ha.hole") == {"n1": 2, "n2": 1, "n3": 1}
        assert nemesis.invoke(Op("heal")).type == "ok"
    cluster.wait_formed()


def test_a_black_hole_from_the_master_to_its_youngest_mirror_holds_only_that_node(
        cluster: LiveCluster, tmp_path: Path) -> None:
    """``links: "master-to-youngest"``: a consumer on the youngest mirror's node gets
    nothing, while the eldest mirror still takes in every message."""
    nodes = access(cluster)
    declare_mirrored(nodes, "n1", "ha.drop")
    connection = pika.BlockingConnection(pika.URLParameters(nodes["n3"].amqp_url))
    received: list[bytes] = []
    channel = connection.channel()
    channel.basic_consume("ha.drop", lambda ch, method, props, body: received.append(body))
    path = tmp_path / "history.jsonl"
    roles = {"master": "n1", "youngest": "n3"}
    try:
        publish_one(nodes["n1"], "ha.drop", b"before")
        connection.process_data_events(time_limit=0.5)
        assert received == [b"before"]
        with history(cluster, path) as writer:
            nemesis = RecordedNemesis(LinkNemesis(cluster.client, cluster.topology), writer,
                                      lambda which: roles.get(which, "n2"), cluster.topology,
                                      cluster.names, ActiveFaults())
            done = nemesis.invoke(Op("degrade", {"toxic": "timeout",
                                                 "links": "master-to-youngest"}))
            assert done.type == "ok" and done.value["links"] == ["link:n1->n3"]
            publish_one(nodes["n1"], "ha.drop", b"held")
            wait_until(lambda: copies(nodes, "ha.drop")["n2"] == 2,
                       "the eldest mirror takes in the message")
            connection.process_data_events(time_limit=0.5)
            assert received == [b"before"]  # its delivery to n3 is held
            assert nemesis.invoke(Op("heal")).type == "ok"
    finally:
        connection.close()
    cluster.wait_formed()


def test_a_black_hole_into_the_youngest_mirror_leaves_it_behind(
        cluster: LiveCluster, tmp_path: Path) -> None:
    """``links: "to-youngest"``: the master's publishes and the eldest mirror's
    broadcasts reach the eldest mirror, not the youngest."""
    nodes = access(cluster)
    declare_mirrored(nodes, "n1", "ha.behind")
    publish_one(nodes["n1"], "ha.behind", b"before")
    wait_until(lambda: copies(nodes, "ha.behind") == {"n1": 1, "n2": 1, "n3": 1},
               "the first message on every replica")
    roles = {"master": "n1", "youngest": "n3"}
    with history(cluster, tmp_path / "history.jsonl") as writer:
        nemesis = RecordedNemesis(LinkNemesis(cluster.client, cluster.topology), writer,
                                  lambda which: roles.get(which, "n2"), cluster.topology,
                                  cluster.names, ActiveFaults())
        done = nemesis.invoke(Op("degrade", {"toxic": "timeout", "links": "to-youngest"}))
        assert done.type == "ok" and done.value["links"] == ["link:n1->n3", "link:n2->n3"]
        publish_one(nodes["n1"], "ha.behind", b"held")
        wait_until(lambda: copies(nodes, "ha.behind")["n2"] == 2,
                   "the eldest mirror takes in the message")
        assert copies(nodes, "ha.behind")["n3"] == 1
        assert nemesis.invoke(Op("heal")).type == "ok"
    cluster.wait_formed()
