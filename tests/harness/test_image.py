"""The node image, built offline from an mmdebstrap root file system, runs a real node."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from docker.client import DockerClient

from faults.ports import free_port
from faults.process.node import amqp_answers
from harness.runtime import image
from harness.runtime.base import no_progress
from tests.runtime.docker_support import ENGINE

# The docker-tests session: the node image is built on first use (minutes).
pytestmark = [pytest.mark.skipif(ENGINE is None, reason="no Docker engine answers here"),
              pytest.mark.docker]
LABEL = {"mirrorchaos.test": "image"}


@pytest.fixture(scope="module")
def client() -> Iterator[DockerClient]:
    assert ENGINE is not None
    yield ENGINE
    for container in ENGINE.containers.list(all=True, filters={"label": "mirrorchaos.test"}):
        container.remove(force=True)


def test_node_image_is_cached_by_content(client: DockerClient) -> None:
    first = image.node_image(client, progress=no_progress)
    steps: list[str] = []
    again = image.node_image(client, progress=steps.append)
    assert again == first
    assert steps == [f"found cached image {first.base}", f"found cached image {first.tag}"], \
        "nothing is built for a cached image, not even the wheels"
    assert first.base.startswith(image.BASE_REPOSITORY + ":")
    history = client.images.get(first.tag).history()
    assert history, "the image must exist in the engine"


def test_a_container_from_the_image_serves_amqp(client: DockerClient) -> None:
    tag = image.node_image(client, progress=no_progress).tag
    port = free_port()
    container = client.containers.run(
        tag, ["python", "-m", "cluster.node", "--name", "rabbit@c1", "--amqp-port", "5672",
              "--data-dir", "/data"],
        detach=True, labels=LABEL, ports={"5672/tcp": ("127.0.0.1", port)},
    )
    try:
        deadline = time.monotonic() + 30
        while not amqp_answers("127.0.0.1", port):
            container.reload()
            assert container.status in ("created", "running"), container.logs().decode()
            assert time.monotonic() < deadline, container.logs().decode()
            time.sleep(0.2)
        exit_code = container.exec_run(["python", "-c", "import cluster.node"]).exit_code
        assert exit_code == 0
    finally:
        container.remove(force=True)
