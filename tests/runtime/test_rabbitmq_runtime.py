"""Real RabbitMQ nodes in containers (`./dev -s rabbitmq`): the cluster formed over
toxiproxy, judged by what the nodes see of each other when the proxies cut them apart;
node names in the harness's terms; forget_cluster_node done through rabbitmqctl; the
node reports the event poller writes."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator

import pika
import pytest

from faults.nemesis import Op, PartitionNemesis
from harness.runtime import ClusterSpec
from harness.runtime.rabbitmq import RabbitMQCluster, RabbitMQRuntime

pytestmark = pytest.mark.rabbitmq


@pytest.fixture(scope="module")
def cluster() -> Iterator[RabbitMQCluster]:
    with RabbitMQRuntime().start(ClusterSpec.of(3, tick=0.5)) as running:
        yield running


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(0.2)


def running(cluster: RabbitMQCluster, node: str) -> set[str]:
    return cluster.management(node).running_nodes()


def test_nodes_are_named_as_the_harness_names_them(cluster: RabbitMQCluster) -> None:
    assert {n: running(cluster, n) for n in cluster.nodes} == \
        {n: {"n1", "n2", "n3"} for n in cluster.nodes}


def test_erlang_distribution_goes_through_the_proxies(cluster: RabbitMQCluster) -> None:
    # Cut n1 off: if any node reached another around toxiproxy, it would keep it.
    nemesis = PartitionNemesis(cluster.toxiproxy, cluster.topology, random.Random(1))
    cut = nemesis.invoke(Op("partition", {"kind": "isolate", "node": "n1"}))
    assert cut.type == "ok", cut.error
    try:
        wait_until(lambda: running(cluster, "n2") == {"n2", "n3"}, 30, "n2 loses n1")
    finally:
        healed = nemesis.invoke(Op("heal"))
    assert healed.type == "ok", healed.error
    # RabbitMQ tells a partition once the nodes meet again, and under its default
    # partition handling (ignore) keeps telling it until a node restarts.
    wait_until(lambda: sorted(_partitions(cluster, "n1")) == ["n2", "n3"], 60,
               "n1 reports the partition")
    cluster.process_control().stop("n1", 30)
    cluster.process_control().start("n1")
    wait_until(lambda: all(running(cluster, n) == {"n1", "n2", "n3"} for n in cluster.nodes),
               60, "every node sees every node again")
    assert _partitions(cluster, "n1") == []


def test_a_promotion_is_reported_by_the_new_master(cluster: RabbitMQCluster) -> None:
    cluster.management("n1").put_policy("/", "all", {
        "pattern": "^watched$", "definition": {"ha-mode": "all"}, "apply-to": "queues"})
    host, port = cluster.amqp_address("n1")
    with pika.BlockingConnection(pika.ConnectionParameters(host, port)) as connection:
        connection.channel().queue_declare("watched", durable=True)
    mirrors = ["n2", "n3"]
    wait_until(lambda: sorted(_queue(cluster, "n2")["slave_nodes"]) == mirrors, 30,
               "both mirrors listed")
    time.sleep(1)  # the poller's baseline
    cluster.process_control().kill("n1")
    wait_until(lambda: _queue(cluster, "n2")["node"] in mirrors, 30, "a mirror promoted")
    master = _queue(cluster, "n2")["node"]

    def reported() -> list[dict[str, object]]:
        path = cluster.base_dir / master / "events.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return [r for r in map(json.loads, lines)
                if r["event"] == "promotion" and r["queue"] == "watched"]

    wait_until(lambda: len(reported()) == 1, 10, f"{master} reports its promotion")
    assert reported()[0]["master"] == master
    cluster.process_control().start("n1")
    assert cluster.poller.errors == []


def test_forget_cluster_node_through_rabbitmqctl(cluster: RabbitMQCluster) -> None:
    cluster.process_control().stop("n3", 30)
    cluster.management("n1").forget_node("n1", "n3")
    names = {node["name"] for node in cluster.management("n1").call("GET", "/api/nodes")}
    assert names == {"n1", "n2"}


def _partitions(cluster: RabbitMQCluster, node: str) -> list[str]:
    entries = cluster.management(node).call("GET", "/api/nodes")
    return [p for entry in entries if entry["name"] == node for p in entry.get("partitions", [])]


def _queue(cluster: RabbitMQCluster, node: str) -> dict[str, object]:
    return dict(cluster.management(node).call("GET", "/api/queues/%2F/watched"))
