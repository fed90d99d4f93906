"""The link topology: one proxy per directed node link and per client link, the
addresses nodes and clients dial, and teardown of everything it made."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pika
import pytest

from faults.client import AlreadyExists, ReplyProbe, ToxiproxyClient, split_address
from faults.management import Management
from faults.ports import free_port
from faults.topology import NodeAddress, Topology
from tests.faults.cluster_support import running_cluster, wait_until
from tests.faults.toxiproxy_support import ServerThread


def connection_names(mgmt: Management) -> list[str]:
    connections = mgmt.call("GET", "/api/connections")
    return [c["client_properties"].get("connection_name") for c in connections]


def test_every_link_is_its_own_proxy_and_the_cluster_runs_through_them(tmp_path: Path) -> None:
    clients = [("c1", "n1"), ("c2", "n2")]
    with running_cluster(tmp_path, clients=clients) as cluster:
        topology = cluster.topology
        proxies = cluster.client.proxies()
        assert sorted(proxies) == sorted(
            [f"link:{a}->{b}" for a in cluster.names for b in cluster.names if a != b]
            + ["client:c1->n1", "client:c2->n2"])
        for link in topology.node_links:
            target = cluster.nodes[link.target]
            assert proxies[link.name].upstream == f"{target.host}:{target.cluster_port}"
            assert cluster.nodes[link.source].peers[link.target] == link.address
            assert topology.probe(link)
        assert topology.peers("n1") == {"n2": topology.node_link("n1", "n2").address,
                                        "n3": topology.node_link("n1", "n3").address}

        # A client reaches its node through its own link, and only through it.
        host, port = split_address(topology.client_address("c1", "n1"))
        params = pika.ConnectionParameters(host, port, client_properties={"connection_name": "c1"})
        connection = pika.BlockingConnection(params)
        try:
            assert connection_names(cluster.mgmt("n1")) == ["c1"]
            assert connection_names(cluster.mgmt("n2")) == []
            cluster.client.disable("client:c1->n1")
            with pytest.raises(pika.exceptions.AMQPConnectionError):
                connection.process_data_events(time_limit=5)  # the client sees the drop
            wait_until(lambda: connection_names(cluster.mgmt("n1")) == [],
                       "n1 to lose the client when its link is disabled")
        finally:
            with contextlib.suppress(pika.exceptions.AMQPError):
                connection.close()

        topology.teardown()
        assert cluster.client.proxies() == {}
        # Without the proxies the nodes cannot reach each other any more.
        cluster.wait_views({name: {name} for name in cluster.names})


def test_a_failed_creation_removes_what_it_had_made(threaded: ServerThread) -> None:
    client = ToxiproxyClient(threaded.server.url)
    client.create_proxy("link:b->a", threaded.echo.address)  # in the way, not ours
    port = split_address(threaded.echo.address)[1]
    nodes = [NodeAddress(name, "127.0.0.1", port, port) for name in ("a", "b")]
    with pytest.raises(AlreadyExists):
        Topology.create(client, nodes)
    assert list(client.proxies()) == ["link:b->a"]


def test_proxies_bound_on_every_interface_are_dialled_at_the_dial_host(
    threaded: ServerThread,
) -> None:
    client = ToxiproxyClient(threaded.server.url)
    port = split_address(threaded.echo.address)[1]
    nodes = [NodeAddress(name, "127.0.0.1", port, port) for name in ("a", "b")]
    echo = ReplyProbe(b"ping", expect=b"ping")
    topology = Topology.create(client, nodes, listen_host="0.0.0.0", dial_host="127.0.0.1",
                               node_probe=echo, client_probe=echo, clients=[("c", "a")])
    try:
        for link in topology.links:
            assert link.address == f"127.0.0.1:{split_address(link.listen)[1]}"
            assert split_address(link.listen)[0] in ("::", "0.0.0.0")
            assert topology.probe(link)  # the echo answers through the proxy
    finally:
        topology.teardown()
    assert client.proxies() == {}


def test_node_links_at_fixed_addresses_listen_and_are_dialled_there(
    threaded: ServerThread,
) -> None:
    # As for Erlang distribution: each directed link at an address of its own, all on
    # one port, which is what the source dials (its name for the target resolves there).
    client = ToxiproxyClient(threaded.server.url)
    echo_port = split_address(threaded.echo.address)[1]
    nodes = [NodeAddress(name, "127.0.0.1", echo_port, echo_port) for name in ("a", "b")]
    fixed = {("a", "b"): "127.0.31.1", ("b", "a"): "127.0.31.2"}
    port = free_port("127.0.31.1")
    echo = ReplyProbe(b"ping", expect=b"ping")
    topology = Topology.create(client, nodes, node_probe=echo, client_probe=echo,
                               node_listen=lambda s, t: f"{fixed[s, t]}:{port}",
                               clients=[("c", "a")])
    try:
        for (source, target), host in fixed.items():
            link = topology.link(f"link:{source}->{target}")
            assert link.listen == link.address == f"{host}:{port}"
            assert topology.probe(link)
        client_link = topology.link("client:c->a")
        assert split_address(client_link.listen)[0] == "127.0.0.1"  # not fixed
        assert split_address(client_link.address)[1] != port
        assert topology.probe(client_link)
    finally:
        topology.teardown()
