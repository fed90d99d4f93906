"""The rabbitmq target's pure parts: what its nodes are given, the address of each
directed link, RabbitMQ's node names put in the harness's terms, and the command line
refusing a runtime RabbitMQ cannot run in."""

from __future__ import annotations

import ipaddress

import pytest

from harness.run.outcome import HarnessError
from harness.run.runtimes import make_runtime
from harness.runtime import ClusterStartError
from harness.runtime.rabbitmq import link_addresses, node_config, partition_handling, shorten
from reports.cli import main


def test_partition_handling_is_the_only_node_argument() -> None:
    assert partition_handling(()) == "ignore"
    assert partition_handling(("--partition-handling", "autoheal")) == "autoheal"
    with pytest.raises(ClusterStartError, match="no partition handling 'pause_all'"):
        partition_handling(("--partition-handling", "pause_all"))
    # a planted bug of our own broker means nothing to RabbitMQ: refused, named
    with pytest.raises(ClusterStartError, match="'--break'"):
        partition_handling(("--partition-handling", "autoheal", "--break", "early-confirm"))


def test_the_config_carries_the_mode_and_lets_guest_in_from_anywhere() -> None:
    config = node_config("pause_minority")
    assert "cluster_partition_handling = pause_minority\n" in config
    assert "loopback_users = none\n" in config


def test_every_directed_link_has_its_own_address_at_the_top_of_the_subnet() -> None:
    nodes = ("n1", "n2", "n3")
    links = link_addresses("172.20.0.0/16", nodes)
    assert sorted(links) == sorted((a, b) for a in nodes for b in nodes if a != b)
    addresses = [ipaddress.ip_address(a) for a in links.values()]
    assert len(set(addresses)) == 6
    network = ipaddress.ip_network("172.20.0.0/16")
    assert all(a in network and a != network.broadcast_address for a in addresses)
    assert min(addresses) > ipaddress.ip_address("172.20.255.0")  # far from the allocator's


def test_a_subnet_too_small_for_the_links_is_refused() -> None:
    with pytest.raises(ClusterStartError, match="too small"):
        link_addresses("172.20.0.0/29", ("n1", "n2", "n3"))


def test_node_names_are_shortened_wherever_they_appear() -> None:
    names = {"rabbit@n1": "n1", "rabbit@n2": "n2"}
    listing = [{"name": "q", "node": "rabbit@n1", "slave_nodes": ["rabbit@n2"],
                "arguments": {"x-note": "rabbit@n3"}, "messages": 3}]
    assert shorten(listing, names) == [{"name": "q", "node": "n1", "slave_nodes": ["n2"],
                                        "arguments": {"x-note": "rabbit@n3"}, "messages": 3}]


def test_rabbitmq_runs_in_docker_only() -> None:
    with pytest.raises(HarnessError, match="rabbitmq target runs in docker, not process"):
        make_runtime("process", target="rabbitmq")


def test_the_command_line_refuses_rabbitmq_on_local_processes(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "smoke", "--target", "rabbitmq", "--runtime", "process"]) == 254
    assert "--target rabbitmq: expected --runtime docker; got 'process'" in \
        " ".join(capsys.readouterr().err.split())
