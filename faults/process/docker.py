"""Process faults on nodes running as Docker containers: ``docker kill``, ``docker stop
-t``, ``docker pause``/``unpause`` and ``docker start``, with the state the engine
reports. A container keeps its data directory (a bind mount) and its published ports
across a restart, so a node started again is the same node."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import docker.errors
from docker.client import DockerClient
from docker.models.containers import Container

from .control import ProcessControlError, ProcessState, ProcessStateError, UnknownNode
from .node import amqp_answers, http_answers

_STATES = {"running": ProcessState.RUNNING, "paused": ProcessState.PAUSED}


@dataclass(frozen=True)
class ContainerNode:
    """A node's container and where the harness probes it for readiness."""

    container: str  # name or id
    amqp: tuple[str, int]
    mgmt_url: str | None = None


class DockerProcesses:
    def __init__(self, client: DockerClient, nodes: Mapping[str, ContainerNode],
                 start_timeout: float = 30.0) -> None:
        self.client = client
        self._nodes = dict(nodes)
        self.start_timeout = start_timeout

    def nodes(self) -> list[str]:
        return sorted(self._nodes)

    def node(self, name: str) -> ContainerNode:
        try:
            return self._nodes[name]
        except KeyError:
            raise UnknownNode(name) from None

    def container(self, node: str) -> Container:
        name = self.node(node).container
        try:
            return self.client.containers.get(name)
        except docker.errors.NotFound:
            raise ProcessControlError(f"{node}: container {name} no longer exists") from None

    def state(self, node: str) -> ProcessState:
        return _STATES.get(self.container(node).status, ProcessState.STOPPED)

    def kill(self, node: str) -> None:
        container = self.container(node)
        if container.status in _STATES:
            self._engine(node, "kill", container.kill)
        container.wait()  # returns once the container has exited

    def power_loss(self, nodes: Sequence[str]) -> None:
        for node in nodes:
            self.node(node)  # an unknown node is still UnknownNode
        raise ProcessControlError(
            f"power-loss on {', '.join(nodes)}: the Docker runtime cannot lose unsynced "
            f"writes (its nodes' data directories are plain bind mounts, not lazyfs); run "
            f"it with --runtime process")

    def stop(self, node: str, timeout: float) -> None:
        container = self.container(node)
        # A frozen container cannot act on SIGTERM until it is thawed.
        if container.status == "paused":
            self._engine(node, "unpause", container.unpause)
        self._engine(node, "stop", lambda: container.stop(timeout=max(0, round(timeout))))

    def pause(self, node: str) -> None:
        container = self._require(node, "pause", "running")
        self._engine(node, "pause", container.pause)

    def resume(self, node: str) -> None:
        container = self._require(node, "resume", "paused")
        self._engine(node, "unpause", container.unpause)

    def start(self, node: str) -> None:
        container = self.container(node)
        if container.status in _STATES:
            raise ProcessStateError(f"cannot start {node}: it is {container.status}")
        self._engine(node, "start", container.start)
        self.wait_ready(node, self.start_timeout)

    def wait_ready(self, node: str, timeout: float) -> None:
        """Until the node answers an AMQP handshake and its management API; an exited
        container or the timeout raises `ProcessControlError` with its log tail."""
        address = self.node(node)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            container = self.container(node)
            if container.status in ("exited", "dead"):
                code = container.attrs["State"]["ExitCode"]
                raise ProcessControlError(
                    f"node {node} (container {address.container}) exited with code {code} "
                    f"during start-up; log tail:\n{self.log_tail(node)}")
            if amqp_answers(*address.amqp) and (
                    address.mgmt_url is None or http_answers(f"{address.mgmt_url}/api/overview")):
                return
            time.sleep(0.1)
        raise ProcessControlError(
            f"node {node} (container {address.container}) not ready on "
            f"{address.amqp[0]}:{address.amqp[1]} after {timeout:g}s; "
            f"log tail:\n{self.log_tail(node)}")

    def log_tail(self, node: str, lines: int = 40) -> str:
        try:
            return bytes(self.container(node).logs(tail=lines)).decode("utf-8", "replace")
        except (ProcessControlError, docker.errors.APIError) as exc:
            return f"(no log: {exc})"

    def _require(self, node: str, action: str, status: str) -> Container:
        container = self.container(node)
        if container.status != status:
            raise ProcessStateError(f"cannot {action} {node}: it is {container.status}")
        return container

    def _engine(self, node: str, action: str, call: Callable[[], object]) -> None:
        try:
            call()
        except docker.errors.APIError as exc:
            raise ProcessControlError(f"docker {action} {node}: {exc}") from exc
