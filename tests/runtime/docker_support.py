"""A Docker engine for the tests, when one answers, and the node image built once."""

from __future__ import annotations

import functools

import docker
import docker.errors
from docker.client import DockerClient

from harness.runtime import image
from harness.runtime.base import no_progress


def engine() -> DockerClient | None:
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException:
        return None
    return client


ENGINE = engine()


def run_objects(client: DockerClient, run_id: str) -> list[str]:
    """Names of every container and network labelled with this run."""
    selector = {"label": f"mirrorchaos.run={run_id}"}
    return [*(c.name for c in client.containers.list(all=True, filters=selector)),
            *(n.name for n in client.networks.list(filters=selector))]


@functools.cache
def node_image_tag(client: DockerClient) -> str:
    """Once per test session: the first finds (or builds) the image, the others ask the
    engine nothing."""
    return image.node_image(client, progress=no_progress).tag
