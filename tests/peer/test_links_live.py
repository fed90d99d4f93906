"""Node-to-node links between real node processes: failure detection on kill and
restart, and partitions made by black-holing links through the toxiproxy server."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from itertools import permutations
from pathlib import Path
from typing import Any

import pytest

from faults.ports import free_port
from faults.process.node import NodeProcess, start_all

TICK = 0.2  # heartbeats every 0.2 s; a peer is down after 4 missed ticks


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def http(method: str, url: str, body: object | None = None) -> Any:
    request = urllib.request.Request(url, method=method,
                                     data=None if body is None else json.dumps(body).encode())
    request.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=5) as reply:
        text = reply.read()
    return json.loads(text) if text else None


def running_nodes(node: NodeProcess) -> set[str]:
    return {n["name"] for n in http("GET", f"{node.mgmt_url}/api/nodes") if n["running"]}


def mirrors(node: NodeProcess) -> list[str]:
    return list(http("GET", f"{node.mgmt_url}/api/queues/%2F/q")["slave_nodes"])


def partitions(node: NodeProcess) -> list[str]:
    return list(http("GET", f"{node.mgmt_url}/api/nodes")[0]["partitions"])


def events(node: NodeProcess, kind: str) -> list[dict[str, Any]]:
    lines = (node.data_dir / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == kind]


@pytest.fixture
def toxiproxy_url() -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "reports.cli", "toxiproxy", "serve", "--port", str(port),
         "--seed", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    assert server.stdout is not None
    server.stdout.readline()  # the banner: the API is listening
    yield f"http://127.0.0.1:{port}"
    server.kill()
    server.wait()


def start_cluster(tmp_path: Path, names: list[str], address: Callable[[str, str, int], str],
                  extra_args: tuple[str, ...] = (), tick_count: int = 4
                  ) -> dict[str, NodeProcess]:
    """Start nodes where ``address(src, dst, dst_cluster_port)`` is what src dials."""
    nodes = {name: NodeProcess(name, tmp_path / name, cluster_port=free_port(), tick=TICK,
                               tick_count=tick_count, extra_args=list(extra_args))
             for name in names}
    for src, dst in permutations(names, 2):
        nodes[src].peers[dst] = address(src, dst, nodes[dst].cluster_port or 0)
    start_all(list(nodes.values()))
    everyone = set(names)
    for node in nodes.values():
        wait_until(lambda n=node: running_nodes(n) == everyone, "the cluster to form")
    return nodes


def test_a_killed_node_is_seen_down_and_its_restart_is_not_a_partition(tmp_path: Path) -> None:
    nodes = start_cluster(tmp_path, ["n1", "n2", "n3"], lambda s, d, port: f"127.0.0.1:{port}")
    try:
        nodes["n3"].kill()
        for name in ("n1", "n2"):
            wait_until(lambda n=nodes[name]: running_nodes(n) == {"n1", "n2"}, "n3 seen down")
        nodes["n3"].start()
        for node in nodes.values():
            wait_until(lambda n=node: running_nodes(n) == {"n1", "n2", "n3"}, "n3 back")
        returns = [e for e in events(nodes["n1"], "peer_up") if e["peer"] == "n3"]
        assert returns[-1]["restarted"] is True
        assert events(nodes["n1"], "partition_detected") == []
        assert partitions(nodes["n1"]) == []
    finally:
        for node in nodes.values():
            node.kill()


def test_a_node_stopping_gracefully_reports_no_peer_loss_of_its_own(tmp_path: Path) -> None:
    """Its own shutdown closes its links: that is no news of the peers, and no reason
    to pause for lack of a majority."""
    nodes = start_cluster(tmp_path, ["n1", "n2", "n3"], lambda s, d, port: f"127.0.0.1:{port}")
    try:
        nodes["n3"].extra_args = ["--partition-handling", "pause_minority"]
        nodes["n3"].restart()
        nodes["n3"].stop()
        kinds = [json.loads(line)["event"] for line in
                 (nodes["n3"].data_dir / "events.jsonl").read_text().splitlines()]
        assert kinds[-2:] == ["app_stopped", "node_stopped"]
    finally:
        for node in nodes.values():
            node.kill()


@pytest.fixture
def proxied(toxiproxy_url: str) -> Callable[[str, str, int], str]:
    """Route each directed link through its own proxy, named ``src-dst``."""
    def via_proxy(src: str, dst: str, port: int) -> str:
        listen = f"127.0.0.1:{free_port()}"
        http("POST", f"{toxiproxy_url}/proxies",
             {"name": f"{src}-{dst}", "listen": listen, "upstream": f"127.0.0.1:{port}"})
        return listen
    return via_proxy


def black_hole(toxiproxy_url: str, link: str) -> None:
    http("POST", f"{toxiproxy_url}/proxies/{link}/toxics",
         {"name": "cut", "type": "timeout", "stream": "upstream",
          "attributes": {"timeout": 0}})


def heal(toxiproxy_url: str, link: str) -> None:
    http("DELETE", f"{toxiproxy_url}/proxies/{link}/toxics/cut")


def test_a_one_way_cut_parts_both_sides_and_its_heal_is_a_partition(
    tmp_path: Path, toxiproxy_url: str, proxied: Callable[[str, str, int], str]
) -> None:
    nodes = start_cluster(tmp_path, ["n1", "n2"], proxied)
    n1, n2 = nodes["n1"], nodes["n2"]
    try:
        # n2 no longer hears n1; n1 still hears n2, which says it lost n1: as when an
        # Erlang distribution connection drops, each side loses the other.
        black_hole(toxiproxy_url, "n1-n2")
        wait_until(lambda: running_nodes(n2) == {"n2"}, "n2 to lose n1")
        wait_until(lambda: running_nodes(n1) == {"n1"}, "n1 to lose n2")
        assert [e["reason"] for e in events(n1, "peer_down")] == ["it no longer hears us"]
        heal(toxiproxy_url, "n1-n2")
        for node, peer in ((n1, "n2"), (n2, "n1")):
            wait_until(lambda n=node: running_nodes(n) == {"n1", "n2"}, "the link to heal")
            assert partitions(node) == [peer]
            assert [e["peer"] for e in events(node, "partition_detected")] == [peer]
    finally:
        for node in nodes.values():
            node.kill()


def test_a_partial_partition_pauses_both_sides_under_pause_minority(
    tmp_path: Path, toxiproxy_url: str, proxied: Callable[[str, str, int], str]
) -> None:
    nodes = start_cluster(tmp_path, ["n1", "n2", "n3"], proxied,
                          ("--partition-handling", "pause_minority"))
    n1, n2, n3 = nodes["n1"], nodes["n2"], nodes["n3"]
    try:
        # q's master is n1 and its eldest mirror n3, which would be promoted were n3
        # to act on losing n1.
        http("PUT", f"{n1.mgmt_url}/api/queues/%2F/q", {"durable": True})
        policy = {"pattern": "^q$", "definition": {"ha-mode": "nodes",
                                                     "ha-params": ["n1", "n3"]}}
        http("PUT", f"{n1.mgmt_url}/api/policies/%2F/ha", policy)
        wait_until(lambda: mirrors(n1) == ["n3"], "n3 to mirror q")
        http("PUT", f"{n1.mgmt_url}/api/policies/%2F/ha",
             {**policy, "definition": {"ha-mode": "all"}})
        wait_until(lambda: mirrors(n1) == ["n3", "n2"], "n2 to mirror q")
        # n3 stops hearing n1 while both still reach n2, so each is in a majority;
        # n2 tells each that it still hears the other, and both pause until the
        # whole cluster is back, as RabbitMQ's pause_minority does, without first
        # acting on the loss: only n2 is promoted, once n1 has paused.
        black_hole(toxiproxy_url, "n1-n3")
        for node, lost in ((n1, "n3"), (n3, "n1")):
            wait_until(lambda n=node: bool(events(n, "paused")), "a pause")
            assert [(e["lost"], e["via"]) for e in events(node, "partial_partition")] \
                == [(lost, "n2")]
            assert events(node, "paused")[0]["reason"] == "partial partition"
        assert events(n2, "paused") == [] and events(n2, "partial_partition") == []
        wait_until(lambda: running_nodes(n2) == {"n2"}, "n2 to run alone")
        wait_until(lambda: bool(events(n2, "promotion")), "n2 to be promoted")
        assert events(n3, "promotion") == []
        heal(toxiproxy_url, "n1-n3")
        for node in nodes.values():
            wait_until(lambda n=node: running_nodes(n) == {"n1", "n2", "n3"},
                       "the cluster to run again")
        assert [len(events(n, "resumed")) for n in (n1, n2, n3)] == [1, 0, 1]
    finally:
        for node in nodes.values():
            node.kill()


def test_a_killed_master_read_late_by_a_busy_peer_splits_nothing(
    tmp_path: Path, toxiproxy_url: str, proxied: Callable[[str, str, int], str]
) -> None:
    """n2 reads what n1 sent 1.5 s late (as a node saturated with publishes does), so
    for a while after n1's SIGKILL n2 still reads n1's heartbeats. n3, which loses n1
    at once, asks n2 whether it still hears n1: that stale news is no proof of life,
    and taking it for one made n3 declare a partial partition, cut itself off from n2,
    and both promoted themselves master of q. (A peer is down after 4 s without news
    here, so the 1.5 s lag alone takes nobody down.)"""
    nodes = start_cluster(tmp_path, ["n1", "n2", "n3"], proxied, tick_count=20)
    n1, n2, n3 = nodes["n1"], nodes["n2"], nodes["n3"]
    try:
        http("PUT", f"{n1.mgmt_url}/api/policies/%2F/ha",
             {"pattern": "^q$", "definition": {"ha-mode": "all"}})
        http("PUT", f"{n1.mgmt_url}/api/queues/%2F/q", {"durable": True})
        wait_until(lambda: sorted(mirrors(n1)) == ["n2", "n3"], "q to be mirrored on n2, n3")
        http("POST", f"{toxiproxy_url}/proxies/n1-n2/toxics",
             {"name": "late", "type": "latency", "stream": "upstream",
              "attributes": {"latency": 1500}})
        time.sleep(2 * 1.5)  # n2 now reads only what n1 sent 1.5 s before
        n1.kill()
        for node in (n2, n3):
            wait_until(lambda n=node: running_nodes(n) == {"n2", "n3"}, "n1 seen gone")
        masters = {http("GET", f"{node.mgmt_url}/api/queues/%2F/q")["node"]
                   for node in (n2, n3)}
        assert len(masters) == 1, f"two masters of q: {masters}"
        assert events(n3, "partial_partition") == []
        assert events(n2, "partial_partition") == []
    finally:
        for node in nodes.values():
            node.kill()
