"""Labels on everything a Docker run creates, and the reaper that removes what a dead
run left behind.

Every container and network of a run carries ``mirrorchaos.run=<run id>`` and its
owner: the harness process's pid, that process's start time (so a reused pid is not
taken for a live harness) and the host. A run whose owner is gone — SIGKILL, a crash,
a reboot — is removed by the next runtime that starts. A cluster left running on
purpose (`mirrorchaos cluster up`) is owned by nobody and only ``down`` removes it.
"""

from __future__ import annotations

import contextlib
import socket

import docker.errors
import psutil
from docker.client import DockerClient

RUN = "mirrorchaos.run"
OWNER_PID = "mirrorchaos.harness.pid"
OWNER_STARTED = "mirrorchaos.harness.started"
OWNER_HOST = "mirrorchaos.harness.host"
DETACHED = "mirrorchaos.detached"


def labels(run_id: str, *, detached: bool = False) -> dict[str, str]:
    if detached:
        return {RUN: run_id, DETACHED: "true"}
    return {RUN: run_id, **owner()}


def owner() -> dict[str, str]:
    """This process as the owner of what it makes, in the terms `owner_alive` checks."""
    me = psutil.Process()
    return {OWNER_PID: str(me.pid), OWNER_STARTED: repr(me.create_time()),
            OWNER_HOST: socket.gethostname()}


def owner_alive(found: dict[str, str]) -> bool:
    """Whether the harness process named by these labels still runs. A run owned on
    another host (an engine shared between machines) counts as alive: we cannot tell."""
    if found.get(DETACHED) == "true" or found.get(OWNER_HOST) != socket.gethostname():
        return True
    try:
        process = psutil.Process(int(found[OWNER_PID]))
        return repr(process.create_time()) == found[OWNER_STARTED]
    except (KeyError, ValueError, psutil.NoSuchProcess):
        return False


def remove_run(client: DockerClient, run_id: str) -> None:
    """Remove every container, then every network, labelled with this run."""
    selector = {"label": f"{RUN}={run_id}"}
    for container in client.containers.list(all=True, filters=selector):
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)
    for network in client.networks.list(filters=selector):
        with contextlib.suppress(docker.errors.NotFound):
            network.remove()


def reap(client: DockerClient) -> list[str]:
    """Remove the runs whose owner is dead; returns their run ids."""
    runs: dict[str, dict[str, str]] = {}
    selector = {"label": RUN}
    for item in [*client.containers.list(all=True, filters=selector),
                 *client.networks.list(filters=selector)]:
        found = item.attrs.get("Config", {}).get("Labels") or item.attrs.get("Labels") or {}
        runs.setdefault(found[RUN], found)
    dead = sorted(run for run, found in runs.items() if not owner_alive(found))
    for run in dead:
        remove_run(client, run)
    return dead
