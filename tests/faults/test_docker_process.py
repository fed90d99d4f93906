"""DockerProcesses: process faults on node containers, seen by the engine and on the
wire."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pika
import pytest

from faults.management import Management
from faults.process import ProcessState, ProcessStateError
from faults.process.docker import DockerProcesses
from faults.process.node import amqp_answers
from harness.runtime import ClusterSpec
from harness.runtime.docker import DockerCluster, DockerRuntime
from tests.runtime.docker_support import ENGINE, node_image_tag

# The docker-tests session: the node image is built on first use (minutes).
pytestmark = [pytest.mark.skipif(ENGINE is None, reason="no Docker engine answers here"),
              pytest.mark.docker]


@pytest.fixture(scope="module")
def cluster() -> Iterator[DockerCluster]:
    assert ENGINE is not None
    runtime = DockerRuntime(ENGINE, image=node_image_tag(ENGINE))
    with runtime.start(ClusterSpec.of(2, tick=0.2)) as running:
        yield running


@pytest.fixture
def control(cluster: DockerCluster) -> DockerProcesses:
    return cluster.process_control()


def status(control: DockerProcesses, node: str) -> str:
    return str(control.container(node).status)


def handshake_stalls(address: tuple[str, int]) -> bool:
    """Connected, but no connection.start comes back: the process is frozen."""
    with socket.create_connection(address, timeout=2) as sock:
        sock.sendall(b"AMQP\x00\x00\x09\x01")
        sock.settimeout(1)
        try:
            return sock.recv(7) == b""
        except TimeoutError:
            return True


def test_kill_then_start_keeps_the_nodes_data(cluster: DockerCluster,
                                               control: DockerProcesses) -> None:
    address = cluster.amqp_address("n2")
    with pika.BlockingConnection(pika.ConnectionParameters(*address)) as connection:
        connection.channel().queue_declare("kept", durable=True)
    control.kill("n2")
    assert status(control, "n2") == "exited"
    assert control.container("n2").attrs["State"]["ExitCode"] == 137  # SIGKILL
    assert control.state("n2") is ProcessState.STOPPED
    assert not amqp_answers(*address)
    control.start("n2")
    assert status(control, "n2") == "running"
    assert amqp_answers(*address)
    queues = Management(cluster.mgmt_url("n2")).call("GET", "/api/queues")
    assert "kept" in {queue["name"] for queue in queues}


def test_pause_freezes_the_node_and_resume_thaws_it(cluster: DockerCluster,
                                                    control: DockerProcesses) -> None:
    address = cluster.amqp_address("n1")
    control.pause("n1")
    try:
        assert status(control, "n1") == "paused"
        assert control.state("n1") is ProcessState.PAUSED
        assert handshake_stalls(address)
        with pytest.raises(ProcessStateError, match="cannot pause n1: it is paused"):
            control.pause("n1")
    finally:
        control.resume("n1")
    assert control.state("n1") is ProcessState.RUNNING
    assert amqp_answers(*address)


def test_graceful_stop_runs_the_nodes_shutdown(cluster: DockerCluster,
                                               control: DockerProcesses) -> None:
    control.stop("n2", timeout=10)
    assert status(control, "n2") == "exited"
    assert control.container("n2").attrs["State"]["ExitCode"] == 0  # it handled SIGTERM
    assert not amqp_answers(*cluster.amqp_address("n2"))
    with pytest.raises(ProcessStateError, match="cannot resume n2: it is exited"):
        control.resume("n2")
    control.start("n2")
    assert control.state("n2") is ProcessState.RUNNING
