"""Link degradation measured on the traffic it degrades: AMQP handshakes and
publishes through a client's link, and heartbeats on a node link."""

from __future__ import annotations

import socket
import statistics
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest

from faults.client import split_address
from faults.nemesis import LinkNemesis, Op
from tests.faults.cluster_support import LiveCluster, running_cluster

HEADER = b"AMQP\x00\x00\x09\x01"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LiveCluster]:
    with running_cluster(tmp_path, ("n1", "n2"), clients=[("c1", "n1")]) as running:
        yield running


def handshake(address: str) -> tuple[float, list[bytes]]:
    """Seconds from connecting to holding the whole connection.start frame, and the
    reads it arrived in."""
    started = time.monotonic()
    reads: list[bytes] = []
    with socket.create_connection(split_address(address), timeout=5) as sock:
        sock.sendall(HEADER)
        need = 7
        while sum(map(len, reads)) < need:
            data = sock.recv(65536)
            if not data:
                break
            reads.append(data)
            if need == 7 and sum(map(len, reads)) >= 7:
                need = 7 + struct.unpack(">I", b"".join(reads)[3:7])[0] + 1
    return time.monotonic() - started, reads


def median_handshake(address: str) -> float:
    return statistics.median(handshake(address)[0] for _ in range(3))


def client_link(cluster: LiveCluster) -> str:
    return cluster.topology.client_address("c1", "n1")


def test_latency_and_jitter_add_to_a_handshake_and_an_update_changes_them(
    cluster: LiveCluster,
) -> None:
    nemesis = LinkNemesis(cluster.client, cluster.topology)
    address = client_link(cluster)
    baseline = median_handshake(address)
    result = nemesis.invoke(Op("degrade", {"toxic": "latency", "links": ["client:c1->n1"],
                                           "attributes": {"latency": 200, "jitter": 50}}))
    assert result.type == "ok" and result.value["stream"] == "both"
    added = median_handshake(address) - baseline
    assert 0.3 <= added <= 1.5, added  # 200 ± 50 ms each way
    # Degrading again updates the toxics in place.
    nemesis.invoke(Op("degrade", {"toxic": "latency", "links": ["client:c1->n1"],
                                  "attributes": {"latency": 0, "jitter": 0}}))
    assert median_handshake(address) - baseline < 0.15
    healed = nemesis.invoke(Op("heal"))
    assert healed.value["healed"] == {"client:c1->n1": "direct"}
    assert cluster.client.proxy("client:c1->n1").toxics == ()


def test_bandwidth_limits_a_publish_to_the_rate(cluster: LiveCluster) -> None:
    host, port = split_address(client_link(cluster))
    connection = pika.BlockingConnection(pika.ConnectionParameters(host, port))
    try:
        channel = connection.channel()
        channel.confirm_delivery()
        channel.queue_declare("bandwidth")
        nemesis = LinkNemesis(cluster.client, cluster.topology)
        nemesis.invoke(Op("degrade", {"toxic": "bandwidth", "links": "clients",
                                      "stream": "upstream", "attributes": {"rate": 80}}))
        body = bytes(160_000)
        started = time.monotonic()
        channel.basic_publish("", "bandwidth", body)  # returns once confirmed
        throttled = time.monotonic() - started
        assert len(body) / throttled <= 1.2 * 80_000, throttled  # no faster than the rate
        assert nemesis.invoke(Op("heal")).type == "ok"
        assert cluster.client.proxy("client:c1->n1").toxics == ()
        channel.basic_publish("", "bandwidth", body)  # still confirmed once healed
    finally:
        connection.close()


def test_a_slicer_splits_what_the_node_sends(cluster: LiveCluster) -> None:
    nemesis = LinkNemesis(cluster.client, cluster.topology)
    assert len(handshake(client_link(cluster))[1]) <= 2
    nemesis.invoke(Op("degrade", {"toxic": "slicer", "links": "clients", "stream": "downstream",
                                  "attributes": {"average_size": 50, "size_variation": 20,
                                                 "delay": 20_000}}))
    _, reads = handshake(client_link(cluster))
    # About ten slices 20 ms apart; a busy reader may still find two at once.
    assert len(reads) >= 4, [len(read) for read in reads]
    nemesis.teardown()
    assert cluster.client.proxy("client:c1->n1").toxics == ()


def test_limit_data_closes_after_the_allowed_bytes(cluster: LiveCluster) -> None:
    nemesis = LinkNemesis(cluster.client, cluster.topology)
    nemesis.invoke(Op("degrade", {"toxic": "limit_data", "links": ["client:c1->n1"],
                                  "stream": "downstream", "attributes": {"bytes": 100}}))
    _, reads = handshake(client_link(cluster))
    assert sum(map(len, reads)) == 100  # then the proxy closed the connection
    nemesis.teardown()
    _, reads = handshake(client_link(cluster))
    assert sum(map(len, reads)) > 100


def test_reset_peer_on_a_node_link_silences_that_direction(cluster: LiveCluster) -> None:
    nemesis = LinkNemesis(cluster.client, cluster.topology)
    result = nemesis.invoke(Op("degrade", {"toxic": "reset_peer", "links": ["link:n1->n2"],
                                           "stream": "upstream"}))
    assert result.value["attributes"] == {"timeout": 0}
    # Every connection n1 dials to n2 is reset, while n2's heartbeats still reach n1,
    # saying it no longer hears n1: each loses the other.
    cluster.wait_views({"n2": {"n2"}, "n1": {"n1"}})
    assert [e["reason"] for e in cluster.events("n1", "peer_down")] == ["it no longer hears us"]
    link = split_address(cluster.topology.node_link("n1", "n2").address)
    with pytest.raises(ConnectionResetError), socket.create_connection(link, timeout=2) as sock:
        sock.sendall(b"anything")
        sock.recv(1)
    assert nemesis.invoke(Op("heal")).type == "ok"
    cluster.wait_formed()
