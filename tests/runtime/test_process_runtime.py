"""ProcessRuntime against real node processes, a real toxiproxy and real sockets."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pika
import psutil
import pytest

from faults import ports
from faults.lazyfs import fuse_unavailable, unmount_under
from faults.management import Management
from faults.process import ProcessControlError, ProcessState
from faults.process.node import NodeStartError, amqp_answers, http_answers
from harness.runtime import ClusterSpec, ClusterStartError, ledger
from harness.runtime.process import ProcessCluster, ProcessRuntime, stop_recorded
from tests.ha_cases import wait_for

TICK = 0.2
ROOT = Path(__file__).resolve().parents[2]


def pid(cluster: ProcessCluster, node: str) -> int:
    return int(cluster.record()["processes"][node]["pid"])


@pytest.fixture(scope="module")
def start_steps() -> list[str]:
    """What the module's cluster told its progress callback while it started."""
    return []


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory,
            start_steps: list[str]) -> Iterator[ProcessCluster]:
    spec = ClusterSpec.of(3, seed=5, tick=TICK, base_dir=tmp_path_factory.mktemp("run"),
                          progress=start_steps.append)
    with ProcessRuntime().start(spec) as running:
        yield running


def test_start_tells_toxiproxy_each_node_and_the_formed_cluster(
        cluster: ProcessCluster, start_steps: list[str]) -> None:
    addresses = {node: cluster.amqp_address(node) for node in cluster.nodes}
    assert start_steps == [
        f"toxiproxy up at {cluster.toxiproxy.url}",
        *(f"node {node} starting on {host}:{port}" for node, (host, port) in addresses.items()),
        "nodes n1, n2, n3 answering",
        "cluster formed: every node sees n1, n2, n3",
    ]


def test_nodes_listen_on_their_own_loopback_addresses(cluster: ProcessCluster) -> None:
    hosts = {cluster.amqp_address(node)[0] for node in cluster.nodes}
    assert hosts == {"127.0.0.2", "127.0.0.3", "127.0.0.4"}
    for node in cluster.nodes:
        assert amqp_answers(*cluster.amqp_address(node))
        assert http_answers(cluster.mgmt_url(node) + "/api/overview")
        assert Management(cluster.mgmt_url(node)).running_nodes() == {"n1", "n2", "n3"}


def test_nodes_dial_each_other_only_through_their_link_proxies(
        cluster: ProcessCluster) -> None:
    for node in cluster.nodes:
        command = psutil.Process(pid(cluster, node)).cmdline()
        peers = [command[i + 1] for i, arg in enumerate(command) if arg == "--peer"]
        assert sorted(peers) == sorted(f"{peer}={address}" for peer, address
                                       in cluster.topology.peers(node).items())
    # Cutting every link to and from n3 in toxiproxy is enough to isolate it.
    cut = [link.name for link in cluster.topology.node_links if "n3" in (link.source, link.target)]
    n1 = Management(cluster.mgmt_url("n1"))
    try:
        for name in cut:
            cluster.toxiproxy.disable(name)
        wait_for(lambda: n1.running_nodes() == {"n1", "n2"}, "n1 to lose n3")
    finally:
        for name in cut:
            cluster.toxiproxy.enable(name)
    wait_for(lambda: n1.running_nodes() == {"n1", "n2", "n3"}, "n1 to see n3 again")


def test_client_links_are_proxies_made_once(cluster: ProcessCluster) -> None:
    address = cluster.client_address("c1", "n2")
    assert cluster.client_address("c1", "n2") == address
    assert address != cluster.amqp_address("n2")
    assert amqp_answers(*address)
    cluster.toxiproxy.disable("client:c1->n2")
    try:
        assert not amqp_answers(*address)
    finally:
        cluster.toxiproxy.enable("client:c1->n2")
    assert amqp_answers(*address)
    with pytest.raises(KeyError, match="n9"):
        cluster.client_address("c1", "n9")


def test_killed_node_restarts_with_its_data(cluster: ProcessCluster) -> None:
    host, port = cluster.amqp_address("n3")
    with pika.BlockingConnection(pika.ConnectionParameters(host, port)) as connection:
        connection.channel().queue_declare("kept", durable=True)
    control = cluster.process_control()
    n3 = pid(cluster, "n3")
    control.kill("n3")
    assert not psutil.pid_exists(n3)
    assert control.state("n3") is ProcessState.STOPPED
    assert not amqp_answers(host, port)
    control.start("n3")
    assert control.state("n3") is ProcessState.RUNNING
    assert cluster.amqp_address("n3") == (host, port)
    queues = Management(cluster.mgmt_url("n3")).call("GET", "/api/queues")
    assert "kept" in {queue["name"] for queue in queues}


def test_collect_copies_each_nodes_log_and_events(cluster: ProcessCluster,
                                                  tmp_path: Path) -> None:
    cluster.collect(tmp_path)
    for node in cluster.nodes:
        assert "ready" in (tmp_path / "nodes" / f"{node}.log").read_text()
        lines = (tmp_path / "nodes" / f"{node}.events.jsonl").read_text().splitlines()
        assert {json.loads(line)["node"] for line in lines} == {node}


def test_stop_leaves_no_process_or_proxy(tmp_path: Path) -> None:
    cluster = ProcessRuntime().start(ClusterSpec.of(2, tick=TICK))
    cluster.client_address("c1", "n1")
    pids = [identity["pid"] for identity in cluster.record()["processes"].values()]
    assert len(pids) == 3, "two nodes and the toxiproxy started for the run"
    base = cluster.base_dir
    cluster.stop()
    cluster.stop()
    for pid in pids:
        assert not psutil.pid_exists(pid)
    assert not base.exists()


def test_no_node_starts_once_its_cluster_has_stopped(tmp_path: Path) -> None:
    """A start racing the stop (`start_all`'s threads when a Ctrl-C lands, a nemesis's
    heal) must not leave a node running that nothing will stop."""
    cluster = ProcessRuntime().start(ClusterSpec.of(2, tick=TICK, base_dir=tmp_path))
    cluster.stop()
    node = cluster.processes["n1"]
    with pytest.raises(NodeStartError, match="n1: not started, its cluster is stopping"):
        node.start()
    assert not node.running
    with pytest.raises(ProcessControlError, match="its cluster is stopping"):
        cluster.process_control().start("n2")
    assert not cluster.processes["n2"].running


def test_the_next_runtime_stops_what_a_sigkilled_harness_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # a ledger of our own
    holder = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/runtime/hold_process_cluster.py")], cwd=ROOT,
        stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)})
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    left = psutil.Process(holder.pid).children(recursive=True)
    on_lazyfs = fuse_unavailable() is None
    assert len(left) == 3 + 2 * on_lazyfs, "two nodes, the toxiproxy, a lazyfs per node"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert all(p.is_running() for p in left), "nodes outlive their harness"
    assert len(ledger.reap(stop_recorded)) == 1
    wait_for(lambda: not any(p.is_running() for p in left), "the left processes to stop")
    assert list(ledger.ledger_dir().iterdir()) == []
    assert unmount_under(tmp_path) == [], "no lazyfs left mounted"
    shared = (ledger.ledger_dir(), ports.reservations_dir())  # by every run, for good
    run_dirs = [p for p in tmp_path.iterdir()
                if p.name.startswith("mirrorchaos-") and p not in shared]
    assert run_dirs == [], "the run's own directory is removed too"


def test_a_node_that_cannot_start_fails_the_start_with_its_log_tail(tmp_path: Path) -> None:
    spec = ClusterSpec.of(2, base_dir=tmp_path, node_args=("--no-such-flag",), start_timeout=10)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(ClusterStartError, match="unrecognized arguments: --no-such-flag"):
        ProcessRuntime().start(spec)
    wait_for(lambda: {p.pid for p in psutil.Process().children(recursive=True)} <= before,
               "every process the runtime started to be gone", timeout=5)
