"""Process faults against a running 3-node cluster: each changes what the process is
doing as the kernel reports it (psutil), and the other nodes notice."""

from __future__ import annotations

import json
import random
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from faults.nemesis import InvalidOp, Op, ProcessNemesis
from faults.process import ProcessState
from tests.faults.cluster_support import LiveCluster, running_cluster, wait_until


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LiveCluster]:
    with running_cluster(tmp_path) as running:
        yield running


def nemesis_for(cluster: LiveCluster) -> ProcessNemesis:
    # A stop not over within stop_timeout becomes a SIGKILL. It waits for the store's
    # fsync, and on a loaded CI machine 10 s was once not enough for the last node.
    return ProcessNemesis(cluster.control, random.Random(3), view=cluster.view(),
                          stop_timeout=60.0)


def pid(cluster: LiveCluster, name: str) -> int:
    process = cluster.nodes[name].process
    assert process is not None
    return process.pid


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_sigkill_ends_the_process_and_a_start_rejoins_as_a_restart(cluster: LiveCluster) -> None:
    nemesis = nemesis_for(cluster)
    before = pid(cluster, "n3")
    assert nemesis.invoke(Op("kill", {"nodes": ["n3"]})).value["nodes"] == ["n3"]
    assert gone(before) and cluster.control.state("n3") is ProcessState.STOPPED
    assert cluster.nodes["n3"].process.returncode == -signal.SIGKILL  # type: ignore[union-attr]
    assert cluster.events("n3", "node_stopped") == []  # no shutdown path ran
    cluster.wait_views({"n1": {"n1", "n2"}, "n2": {"n1", "n2"}})

    assert nemesis.invoke(Op("start")).value["nodes"] == ["n3"]  # what it took down
    assert psutil.Process(pid(cluster, "n3")).is_running()
    cluster.wait_formed()
    for peer in ("n1", "n2"):
        returns = [e for e in cluster.events(peer, "peer_up") if e["peer"] == "n3"]
        assert returns[-1]["restarted"] is True
        assert cluster.events(peer, "partition_detected") == []


def test_a_graceful_stop_runs_the_shutdown_path(cluster: LiveCluster) -> None:
    nemesis = nemesis_for(cluster)
    before = pid(cluster, "n2")
    assert nemesis.invoke(Op("stop", {"nodes": ["n2"]})).type == "ok"
    assert gone(before)
    assert cluster.nodes["n2"].process.returncode == 0  # type: ignore[union-attr]
    assert len(cluster.events("n2", "node_stopped")) == 1
    cluster.wait_views({"n1": {"n1", "n3"}, "n3": {"n1", "n3"}})
    cluster.control.start("n2")  # brought back behind the nemesis's back
    assert nemesis.invoke(Op("heal")).value == {"resumed": [], "started": [], "failed": {}}
    cluster.wait_formed()


def test_pause_stops_the_process_and_resume_reads_as_a_partition(cluster: LiveCluster) -> None:
    nemesis = nemesis_for(cluster)
    process = psutil.Process(pid(cluster, "n1"))
    assert nemesis.invoke(Op("pause", {"nodes": ["n1"]})).type == "ok"
    assert process.status() == psutil.STATUS_STOPPED  # 'T'
    assert cluster.control.state("n1") is ProcessState.PAUSED
    cluster.wait_views({"n2": {"n2", "n3"}, "n3": {"n2", "n3"}})
    assert process.status() == psutil.STATUS_STOPPED  # still frozen while they noticed

    assert nemesis.invoke(Op("resume")).value["nodes"] == ["n1"]
    assert process.status() != psutil.STATUS_STOPPED
    cluster.wait_formed()
    # Same process, same incarnation: as RabbitMQ, its peers conclude a partition.
    for peer in ("n2", "n3"):
        assert [e["peer"] for e in cluster.events(peer, "partition_detected")] == ["n1"]
        assert not any(e["restarted"] for e in cluster.events(peer, "peer_up"))


def test_a_rolling_restart_restarts_every_node_once_and_the_cluster_reforms(
    cluster: LiveCluster,
) -> None:
    pids = {name: pid(cluster, name) for name in cluster.names}
    result = nemesis_for(cluster).invoke(Op("rolling-restart"))
    assert result.type == "ok", result.error
    assert sorted(result.value["nodes"]) == cluster.names
    for name in cluster.names:
        assert gone(pids[name]) and pid(cluster, name) != pids[name]
        assert len(cluster.events(name, "node_stopped")) == 1
    cluster.wait_formed()
    for observer in cluster.names:
        for peer in cluster.names:
            if peer != observer:
                returns = [e for e in cluster.events(observer, "peer_up") if e["peer"] == peer]
                assert any(e["restarted"] for e in returns), (observer, peer)


def test_heal_brings_back_every_node_it_took_down_or_paused(cluster: LiveCluster) -> None:
    nemesis = nemesis_for(cluster)
    nemesis.invoke(Op("kill", {"nodes": ["n1"]}))
    nemesis.invoke(Op("pause", {"nodes": ["n2"]}))
    wait_until(lambda: cluster.running("n3") == {"n3"}, "n3 to lose both")
    healed = nemesis.invoke(Op("heal"))
    assert healed.value == {"resumed": ["n2"], "started": ["n1"], "failed": {}}
    assert all(cluster.control.state(n) is ProcessState.RUNNING for n in cluster.names)
    cluster.wait_formed()
    nemesis.teardown()  # nothing left to bring back


def _since_stop(cluster: LiveCluster, node: str) -> list[dict[str, Any]]:
    """The node's events since it last stopped: its current run's."""
    stopped = cluster.events(node, "node_stopped")[-1]["mono"]
    path = cluster.nodes[node].data_dir / "events.jsonl"
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["mono"] > stopped]


def test_a_staggered_heal_starts_nodes_in_the_order_they_stopped(cluster: LiveCluster) -> None:
    """The wrong order for a full-cluster restart: the node that stopped first starts
    first and must wait for the last one, which outlived it."""
    nemesis = nemesis_for(cluster)
    for node in ("n1", "n2", "n3"):
        assert nemesis.invoke(Op("stop", {"nodes": [node]})).type == "ok"
    codes = {n: node.process.returncode for n, node in cluster.nodes.items()
             if node.process is not None}
    assert codes == {"n1": 0, "n2": 0, "n3": 0}  # each ran its shutdown path
    # n3 starts 2 x stagger after n1: long enough for n1 to reach its boot gate first
    # even when the test run's other workers slow its start. (Whether n1 also logs
    # boot_waiting is a race: only if it sees n3's process before n3's app runs.)
    healed = nemesis.invoke(Op("heal", {"stagger": 2.0}))
    assert healed.type == "ok" and sorted(healed.value["started"]) == ["n1", "n2", "n3"]
    cluster.wait_formed()
    # n1 ran before n3's process started, but served only after n3
    assert _since_stop(cluster, "n1")[0]["mono"] < _since_stop(cluster, "n3")[0]["mono"]
    started = {n: cluster.events(n, "node_started")[-1]["mono"] for n in ("n1", "n3")}
    assert started["n1"] > started["n3"]


def test_a_heal_refuses_a_stagger_that_is_not_a_number_of_seconds(cluster: LiveCluster) -> None:
    with pytest.raises(InvalidOp, match="stagger"):
        nemesis_for(cluster).invoke(Op("heal", {"stagger": "soon"}))
