"""The power-loss fault on a real node process whose data directory is on lazyfs:
every confirmed persistent message survives on a correct node, and a node that confirms
without the fsync (``--break no-fsync``) loses some, which a SIGKILL cannot show."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest

from faults.lazyfs import fuse_unavailable, mounted
from faults.nemesis import Op, ProcessNemesis
from faults.process import LocalProcesses, ProcessControlError, ProcessState
from faults.process.docker import ContainerNode, DockerProcesses
from faults.process.node import NodeProcess
from harness.runtime import ClusterStartError
from harness.runtime import process as runtime_process
from harness.runtime.process import ProcessRuntime
from tests.node.helpers import (
    PERSISTENT,
    get_bodies,
    numbered,
    pika_channel,
    publish_bodies,
    queue_count,
)

MESSAGES = 200
# lazyfs mounts through FUSE; where the machine has none the runtime says why instead
NEEDS_FUSE = pytest.mark.skipif(fuse_unavailable() is not None,
                                reason=f"no FUSE: {fuse_unavailable()}")


@NEEDS_FUSE
@pytest.mark.parametrize("breaks", [[], ["--break", "no-fsync"]], ids=["correct", "no-fsync"])
def test_power_loss_keeps_every_confirmed_message_only_on_a_correct_node(
        tmp_path: Path, breaks: list[str]) -> None:
    node = NodeProcess("n1", tmp_path / "n1", extra_args=breaks, lazyfs=True)
    nemesis = ProcessNemesis(LocalProcesses({"n1": node}), random.Random(1))
    try:
        node.start()
        with pika_channel(node) as channel:
            channel.confirm_delivery()  # each publish returns once confirmed
            channel.queue_declare("durable", durable=True)
            publish_bodies(channel, "durable", numbered(MESSAGES), properties=PERSISTENT)
        # A SIGKILL alone keeps them all, fsync or not: the page cache outlives the node.
        assert nemesis.invoke(Op("kill", {"nodes": "all"})).type == "ok"
        assert nemesis.invoke(Op("heal")).value["started"] == ["n1"]
        with pika_channel(node) as channel:
            assert queue_count(channel, "durable") == MESSAGES
        assert nemesis.invoke(Op("power-loss", {"nodes": "all"})).value["nodes"] == ["n1"]
        assert nemesis.invoke(Op("heal")).value["started"] == ["n1"]
        with pika_channel(node) as channel:
            survived = get_bodies(channel, "durable")
    finally:
        node.stop()
        node.unmount()
    assert not mounted(tmp_path / "n1.lazyfs")
    if breaks:
        assert len(survived) < MESSAGES
    else:
        assert survived == numbered(MESSAGES)


@NEEDS_FUSE
def test_nodes_lose_power_at_one_moment(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """When a node's unsynced writes are dropped, every node of the power loss is
    already gone: none outlived another to act on its loss (promote, write it down)."""
    nodes = {name: NodeProcess(name, tmp_path / name, lazyfs=True) for name in ("n1", "n2")}
    control = LocalProcesses(nodes)
    seen: list[dict[str, ProcessState]] = []
    try:
        for node in nodes.values():
            node.start()
            assert node.disk is not None
            lose = node.disk.lose

            def spied(lose: Callable[[], int] = lose) -> int:
                seen.append({name: control.state(name) for name in nodes})
                return lose()

            monkeypatch.setattr(node.disk, "lose", spied)
        result = ProcessNemesis(control, random.Random(1)).invoke(
            Op("power-loss", {"nodes": "all"}))
        assert result.type == "ok" and sorted(result.value["nodes"]) == ["n1", "n2"]
    finally:
        for node in nodes.values():
            node.stop()
            node.unmount()
    assert seen == [dict.fromkeys(nodes, ProcessState.STOPPED)] * 2


def test_power_loss_without_lazyfs_fails_saying_why(tmp_path: Path) -> None:
    node = NodeProcess("n1", tmp_path / "n1")
    control = LocalProcesses({"n1": node}, no_lazyfs="FUSE cannot be used here: no /dev/fuse")
    result = ProcessNemesis(control, random.Random(1)).invoke(Op("power-loss", {"nodes": "all"}))
    assert result.type == "fail"
    assert "lazyfs" in (result.error or "") and "no /dev/fuse" in (result.error or "")


def test_power_loss_on_docker_is_refused_before_touching_the_container() -> None:
    control = DockerProcesses(None, {"n1": ContainerNode("c1", ("127.0.0.1", 5672))})
    with pytest.raises(ProcessControlError, match="Docker runtime cannot lose unsynced"):
        control.power_loss(["n1"])


def test_the_process_runtime_says_once_why_it_runs_without_lazyfs(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runtime_process, "fuse_unavailable", lambda: "no /dev/fuse here")
    for _ in range(2):
        assert ProcessRuntime(lazyfs=None)._lazyfs() == (
            False, "FUSE cannot be used here: no /dev/fuse here")
    assert capsys.readouterr().err.count("no /dev/fuse here") == 1
    with pytest.raises(ClusterStartError, match="no /dev/fuse here"):
        ProcessRuntime(lazyfs=True)._lazyfs()
    assert ProcessRuntime()._lazyfs()[0] is False
