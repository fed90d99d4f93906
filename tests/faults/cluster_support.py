"""Helpers for the nemesis tests: a toxiproxy (found as the harness finds one), a
cluster of real node processes whose every link goes through it, and observations of
what the nodes see."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faults.client import ToxiproxyClient, find_toxiproxy
from faults.management import Management
from faults.nemesis.view import ManagementView
from faults.ports import free_port
from faults.process import LocalProcesses
from faults.process.node import NodeProcess, start_all
from faults.topology import NodeAddress, Topology

TICK = 0.2  # heartbeats every 0.2 s; a peer is down after 4 missed ticks
SEED = 20240611


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


@dataclass
class LiveCluster:
    nodes: dict[str, NodeProcess]
    topology: Topology
    client: ToxiproxyClient
    control: LocalProcesses

    @property
    def names(self) -> list[str]:
        return sorted(self.nodes)

    def mgmt(self, name: str) -> Management:
        return Management(self.nodes[name].mgmt_url)

    def view(self) -> ManagementView:
        return ManagementView({name: self.mgmt(name) for name in self.nodes})

    def running(self, name: str) -> set[str]:
        """The nodes ``name`` reports running (it hears them), itself included."""
        return self.mgmt(name).running_nodes()

    def partitions(self, name: str) -> list[str]:
        return list(self.mgmt(name).call("GET", "/api/nodes")[0]["partitions"])

    def events(self, name: str, kind: str) -> list[dict[str, Any]]:
        path = self.nodes[name].data_dir / "events.jsonl"
        return [e for e in map(json.loads, path.read_text().splitlines()) if e["event"] == kind]

    def wait_views(self, expected: dict[str, set[str]], timeout: float = 15.0) -> None:
        """Until each observer reports exactly the expected running nodes."""
        for observer, nodes in expected.items():
            wait_until(functools.partial(self.sees_exactly, observer, nodes),
                       f"{observer} to see {sorted(nodes)} (sees {sorted(self.running(observer))})",
                       timeout)

    def sees_exactly(self, observer: str, nodes: set[str]) -> bool:
        return self.running(observer) == nodes

    def wait_formed(self, timeout: float = 15.0) -> None:
        everyone = set(self.nodes)
        self.wait_views({name: everyone for name in self.nodes}, timeout)


@contextlib.contextmanager
def running_cluster(tmp_path: Path, names: Sequence[str] = ("n1", "n2", "n3"),
                    clients: Sequence[tuple[str, str]] = ()) -> Iterator[LiveCluster]:
    """A formed cluster whose node and client links are proxies; everything it started
    is stopped at the end, whatever the test did to it."""
    with find_toxiproxy(SEED) as handle:
        client = handle.client()
        nodes = {name: NodeProcess(name, tmp_path / name, cluster_port=free_port(), tick=TICK)
                 for name in names}
        addresses = [NodeAddress(n, node.host, node.cluster_port or 0, node.amqp_port)
                     for n, node in nodes.items()]
        topology = Topology.create(client, addresses, clients=clients)
        try:
            for name, node in nodes.items():
                node.peers = topology.peers(name)
            start_all(list(nodes.values()))
            cluster = LiveCluster(nodes, topology, client, LocalProcesses(nodes))
            cluster.wait_formed()
            yield cluster
        finally:
            for node in nodes.values():
                node.kill()
            topology.teardown()
