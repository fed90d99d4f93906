"""Partitions against a running 3-node cluster, judged by traffic: what each node
reports running (whom it hears) and whether raw bytes cross each link's proxy."""

from __future__ import annotations

import random
import socket
import socketserver
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults.client import HealVerifier, ToxiproxyClient, split_address
from faults.nemesis import Op, PartitionNemesis, grudges
from faults.nemesis.partition import Mode
from faults.topology import NodeAddress, Topology
from tests.faults.cluster_support import LiveCluster, running_cluster, wait_until
from tests.faults.toxiproxy_support import ServerThread


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LiveCluster]:
    with running_cluster(tmp_path) as running:
        yield running


def nemesis_for(cluster: LiveCluster, mode: Mode = "black-hole") -> PartitionNemesis:
    return PartitionNemesis(cluster.client, cluster.topology, random.Random(5), mode=mode)


def expected_views(cluster: LiveCluster, grudge: dict[str, list[str]]) -> dict[str, set[str]]:
    """A node counts a peer running only while each hears the other."""
    return {observer: {n for n in cluster.names if grudges.hears(grudge, observer, n)
                       and grudges.hears(grudge, n, observer)}
            for observer in cluster.names}


def bytes_cross(cluster: LiveCluster, source: str, target: str) -> bool:
    return cluster.topology.probe(cluster.topology.node_link(source, target), timeout=0.5)


def test_random_halves_cut_the_sides_apart_until_healed(cluster: LiveCluster) -> None:
    nemesis = nemesis_for(cluster)
    result = nemesis.invoke(Op("partition", {"kind": "halves"}))
    assert result.type == "ok", result.error
    grudge = result.value["grudge"]
    small = [n for n in cluster.names if len(grudge[n]) == 2]
    big = [n for n in cluster.names if n not in small]
    assert len(small) == 1 and len(big) == 2
    cluster.wait_views({**{n: set(big) for n in big}, small[0]: set(small)})
    for inside in big:
        assert not bytes_cross(cluster, small[0], inside)
        assert not bytes_cross(cluster, inside, small[0])
    assert bytes_cross(cluster, big[0], big[1]) and bytes_cross(cluster, big[1], big[0])

    healed = nemesis.invoke(Op("heal"))
    assert healed.type == "ok", healed.error
    assert set(healed.value["healed"]) == set(result.value["links"])
    assert set(healed.value["healed"].values()) == {"direct"}
    cluster.wait_formed()
    # Nobody restarted, so each side concludes it was partitioned from the other.
    assert {e["peer"] for e in cluster.events(small[0], "partition_detected")} == set(big)
    for inside in big:
        assert [e["peer"] for e in cluster.events(inside, "partition_detected")] == small
        assert not any(e["restarted"] for e in cluster.events(inside, "peer_up"))
    assert all(cluster.topology.probe(link) for link in cluster.topology.node_links)


def test_a_one_way_cut_stops_one_direction_only(cluster: LiveCluster) -> None:
    nemesis = nemesis_for(cluster)
    result = nemesis.invoke(Op("partition", {"kind": "one-way", "from": "n1", "to": "n2"}))
    assert result.value["grudge"] == {"n2": ["n1"]}
    # Bytes stop one way only, but n2 tells n1 it no longer hears it: each loses the
    # other, and n3 still sees both.
    cluster.wait_views({"n1": {"n1", "n3"}, "n2": {"n2", "n3"}, "n3": {"n1", "n2", "n3"}})
    assert not bytes_cross(cluster, "n1", "n2")
    assert bytes_cross(cluster, "n2", "n1")
    assert [e["reason"] for e in cluster.events("n1", "peer_down")][:1] \
        == ["it no longer hears us"]
    # n3 still hears the peer each lost: a partial partition. The first end to learn
    # of it disconnects from n3 (the cluster runs under ignore), which makes it full:
    # n3 then sees that end come back partitioned, and no longer vouches for it.
    partial = {node: [(e["lost"], e["via"]) for e in cluster.events(node, "partial_partition")]
               for node in ("n1", "n2")}
    assert partial["n1"] in ([], [("n2", "n3")]) and partial["n2"] in ([], [("n1", "n3")])
    made_full = [node for node in ("n1", "n2") if partial[node]]
    assert made_full
    wait_until(lambda: set(made_full) <= set(cluster.partitions("n3")),
               "n3 to see the disconnected side back as partitioned")
    assert nemesis.invoke(Op("heal")).type == "ok"
    cluster.wait_formed()
    assert "n1" in {e["peer"] for e in cluster.events("n2", "partition_detected")}
    assert "n2" in {e["peer"] for e in cluster.events("n1", "partition_detected")}


@pytest.mark.parametrize("kind", ["bridge", "majority-ring"])
def test_bridge_and_majority_ring_give_exactly_the_grudges_reachability(
    cluster: LiveCluster, kind: str
) -> None:
    nemesis = nemesis_for(cluster)
    result = nemesis.invoke(Op("partition", {"kind": kind}))
    grudge = result.value["grudge"]
    if kind == "bridge":  # one pair cut both ways; the third node hears and is heard by all
        (a, hated_a), (b, hated_b) = sorted(grudge.items())
        assert (hated_a, hated_b) == ([b], [a])
    else:  # each node deaf to exactly one other, each to a different one: a directed ring
        assert sorted(grudge) == cluster.names
        assert sorted(h for hated in grudge.values() for h in hated) == cluster.names
    cluster.wait_views(expected_views(cluster, grudge))
    for speaker in cluster.names:
        for listener in cluster.names:
            if speaker != listener:
                assert bytes_cross(cluster, speaker, listener) == grudges.hears(
                    grudge, listener, speaker), (speaker, listener)
    assert nemesis.invoke(Op("heal")).type == "ok"
    cluster.wait_formed()


def test_isolation_by_resets_disables_the_links_and_heal_enables_them(
    cluster: LiveCluster,
) -> None:
    nemesis = nemesis_for(cluster, mode="reset")
    result = nemesis.invoke(Op("partition", {"kind": "isolate", "node": "n1"}))
    assert result.value["mode"] == "reset"
    cut = {"link:n1->n2", "link:n1->n3", "link:n2->n1", "link:n3->n1"}
    assert set(result.value["links"]) == cut
    proxies = cluster.client.proxies()
    assert {name for name, proxy in proxies.items() if not proxy.enabled} == cut
    cluster.wait_views({"n1": {"n1"}, "n2": {"n2", "n3"}, "n3": {"n2", "n3"}})
    assert not bytes_cross(cluster, "n1", "n2") and not bytes_cross(cluster, "n3", "n1")
    nemesis.teardown()
    assert all(proxy.enabled for proxy in cluster.client.proxies().values())
    cluster.wait_formed()
    assert {e["peer"] for e in cluster.events("n1", "partition_detected")} == {"n2", "n3"}


class Greeter(socketserver.ThreadingTCPServer):
    """Stands for a node that also speaks on links it accepts (as Erlang distribution
    does): it greets every connection and records what it receives."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, name: str) -> None:
        self.name = name
        self.received: list[bytes] = []
        super().__init__(("127.0.0.1", 0), _GreeterHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])


class _GreeterHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server = self.server
        assert isinstance(server, Greeter)
        self.request.sendall(f"hello from {server.name}".encode())
        while data := self.request.recv(1024):
            server.received.append(data)


def exchange(address: str, payload: bytes) -> bytes:
    """Send ``payload`` and return what the far end said within half a second."""
    with socket.create_connection(split_address(address), timeout=0.5) as sock:
        sock.sendall(payload)
        try:
            return sock.recv(1024)
        except TimeoutError:
            return b""


def test_a_duplex_topology_also_cuts_what_the_listener_sends_back(
    threaded: ServerThread,
) -> None:
    servers = {name: Greeter(name) for name in ("a", "b")}
    client = ToxiproxyClient(threaded.server.url)
    nodes = [NodeAddress(name, "127.0.0.1", s.port, s.port) for name, s in servers.items()]
    topology = Topology.create(client, nodes, duplex=True)
    try:
        nemesis = PartitionNemesis(client, topology, random.Random(1))
        result = nemesis.invoke(Op("partition", {"kind": "one-way", "from": "a", "to": "b"}))
        assert result.value["links"] == ["link:a->b", "link:b->a"]
        # a still hears b on both links; b hears nothing from a on either.
        assert exchange(topology.node_link("a", "b").address, b"from a") == b"hello from b"
        assert exchange(topology.node_link("b", "a").address, b"from b") == b""
        wait_until(lambda: servers["a"].received == [b"from b"], "a to hear b")
        assert servers["b"].received == []
        assert nemesis.invoke(Op("heal")).type == "ok"
        assert exchange(topology.node_link("b", "a").address, b"again") == b"hello from a"
        wait_until(lambda: b"again" in servers["a"].received, "a to hear b again")
    finally:
        topology.teardown()
        for server in servers.values():
            server.shutdown()
            server.server_close()


def test_a_duplex_reset_disables_both_links_of_the_pair(threaded: ServerThread) -> None:
    # A disabled proxy drops its connections both ways: b's link to a carries a's
    # bytes too, so a one-way reset from a to b must close it as well.
    servers = {name: Greeter(name) for name in ("a", "b")}
    client = ToxiproxyClient(threaded.server.url)
    nodes = [NodeAddress(name, "127.0.0.1", s.port, s.port) for name, s in servers.items()]
    topology = Topology.create(client, nodes, duplex=True)
    try:
        nemesis = PartitionNemesis(client, topology, random.Random(1), mode="reset")
        result = nemesis.invoke(Op("partition", {"kind": "one-way", "from": "a", "to": "b"}))
        assert result.value["links"] == ["link:a->b", "link:b->a"]
        for link in topology.node_links:
            with pytest.raises(ConnectionRefusedError):
                exchange(link.address, b"hi")
        assert nemesis.invoke(Op("heal")).type == "ok"
        assert exchange(topology.node_link("b", "a").address, b"again") == b"hello from a"
    finally:
        topology.teardown()
        for server in servers.values():
            server.shutdown()
            server.server_close()


def test_links_to_a_node_that_died_are_undone_and_verified_once_it_runs(
    cluster: LiveCluster,
) -> None:
    nemesis = PartitionNemesis(cluster.client, cluster.topology, random.Random(5),
                               verifier=HealVerifier(cluster.client, timeout=1))
    nemesis.invoke(Op("partition", {"kind": "isolate", "node": "n1"}))
    cluster.control.kill("n1")
    first = nemesis.invoke(Op("heal"))
    assert first.type == "fail"
    unhealed = first.value["unhealed"]
    assert sorted(unhealed) == ["link:n2->n1", "link:n3->n1"]
    # the first link to n1 waited for it; the second was only undone
    assert "does not answer" in unhealed["link:n2->n1"]
    assert "undone, unverified" in unhealed["link:n3->n1"]
    assert all(proxy.toxics == () for proxy in cluster.client.proxies().values())
    cluster.control.start("n1")  # it can boot: nothing cuts it off any more
    assert nemesis.invoke(Op("heal")).type == "ok"
    cluster.wait_formed()
