"""`DockerRuntime`: one container per node plus one for toxiproxy, on a private bridge
network per run.

* The image is `harness.runtime.image.node_image` (built offline, cached by content hash);
  toxiproxy is the project's own server run from the same image.
* Nodes dial each other through toxiproxy's proxies at the toxiproxy container's
  address; toxiproxy dials nodes by node name, each node container's alias on the
  run's own network (the network's DNS answers at dial time, so a node restarted at a
  new address is still found; container names, with the run id in them, can be longer
  than the 63 characters a DNS label may have).
* The harness reaches each node's AMQP and management ports as published on
  127.0.0.1 at ports chosen at start: published ports stay the same when a node's
  container is restarted, while its address on the bridge may change. Toxiproxy's API
  and proxies are reached at the toxiproxy container's bridge address (Linux routes
  the host to its bridges): client proxies are made during a run at ports known only
  then, which cannot be published after the container exists, and the toxiproxy
  container is never restarted, so its address holds. When a heal is verified the
  harness dials nodes' cluster and AMQP ports directly too: at the address their
  container has on the bridge at that moment (`ContainerProbe`), as names resolve only
  inside the network.
* Each node's data directory is bind-mounted from ``base_dir/<node>``, so a restarted
  node keeps its data and the files outlive the container; the node runs as the
  harness's own user so those files stay the harness's to read and delete. Its config
  file, ``base_dir/node.toml`` (read-only), lets guest log in from outside the
  container (`NODE_CONFIG`).
* Everything carries the run's labels (`reaper.labels`); `stop` removes it all, an
  exception or Ctrl-C during start does too, and a run whose harness died is removed
  by the reaper the next runtime runs first; its data directory, owned by its harness
  (`ledger.make_dir`), goes as the next harness starts.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from docker.client import DockerClient
from docker.errors import DockerException
from docker.models.containers import Container

from faults.client import Probe, ToxiproxyClient, ToxiproxyError, split_address
from faults.ports import free_port
from faults.process import ProcessControlError
from faults.process.docker import ContainerNode, DockerProcesses
from faults.topology import AMQP_PROBE, NODE_LINK_PROBE, NodeAddress, Topology

from . import image, ledger, process, reaper
from .base import ClusterSpec, ClusterStartError
from .common import ClusterBase, wait_formed

AMQP_PORT, MGMT_PORT, CLUSTER_PORT, TOXIPROXY_PORT = 5672, 15672, 25672, 8474
HOST = "127.0.0.1"  # where node ports are published
# Every node's config file. Clients reach a node through Docker's published ports or
# through toxiproxy's container, never from a loopback address of the node's own, so
# guest must log in from anywhere, as RabbitMQ's own image lets it
# (loopback_users.guest = false); the README's "Configuration" has the key.
NODE_CONFIG = "[node]\nloopback_users = []\n"
NODE_CONFIG_PATH = "/etc/mirrorchaos/node.toml"  # inside the container
StartedCluster = TypeVar("StartedCluster", bound="DockerCluster")


def container_name(run_id: str, node: str) -> str:
    return f"mirrorchaos-{run_id}-{node}"


def network_name(run_id: str) -> str:
    return f"mirrorchaos-{run_id}"


class DockerCluster(ClusterBase):
    def __init__(self, spec: ClusterSpec, client: DockerClient, base_dir: Path, own_base: bool,
                 toxiproxy: ToxiproxyClient, topology: Topology,
                 control: DockerProcesses) -> None:
        super().__init__(spec, toxiproxy, topology, base_dir, own_base)
        self.client = client
        self._control = control
        self._stopped = False

    def amqp_address(self, node: str) -> tuple[str, int]:
        return self._control.node(node).amqp

    def mgmt_url(self, node: str) -> str:
        return str(self._control.node(node).mgmt_url)

    def process_control(self) -> DockerProcesses:
        return self._control

    def _node_log(self, node: str) -> str:
        try:
            return bytes(self._control.container(node).logs()).decode("utf-8", "replace")
        except ProcessControlError:
            return ""

    def _events_path(self, node: str) -> Path:
        return self.base_dir / node / "events.jsonl"

    def record(self) -> dict[str, Any]:
        return {**super().record(), "runtime": "docker"}

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        reaper.remove_run(self.client, self.spec.run_id)  # the proxies go with toxiproxy's
        if self.own_base:
            shutil.rmtree(self.base_dir, ignore_errors=True)


class DockerRuntime:
    """``image`` names a node image to use as it is (default: `image.node_image`, built
    or found by content hash, from ``base`` when given). ``detached`` clusters have no
    owner for the reaper to check (`mirrorchaos cluster up`)."""

    name = "docker"

    def __init__(self, client: DockerClient | None = None, *, image: str | None = None,
                 base: str | None = None, detached: bool = False) -> None:
        self.client = client
        self.image = image
        self.base = base
        self.detached = detached

    def start(self, spec: ClusterSpec) -> DockerCluster:
        ledger.reap(process.stop_recorded)  # before a build: a dead build's mmdebstrap too
        try:
            client = self.client or image.connect()
            reaper.reap(client)
            tag = self.image or image.node_image(client, self.base,
                                                 progress=spec.progress).tag
        except image.ImageBuildError as exc:
            raise ClusterStartError(f"run {spec.run_id}: {exc}") from exc
        return in_run_dir(spec, client, lambda base_dir, own_base: self._start(
            spec, client, tag, base_dir, own_base), owned=not self.detached)

    def _start(self, spec: ClusterSpec, client: DockerClient, tag: str, base_dir: Path,
               own_base: bool) -> DockerCluster:
        labels = reaper.labels(spec.run_id, detached=self.detached)
        network = network_name(spec.run_id)
        client.networks.create(network, driver="bridge", labels=labels)
        common = {"detach": True, "network": network, "labels": labels}
        proxy_host, toxiproxy = start_toxiproxy(client, spec, tag, common)
        addresses = [NodeAddress(node, node, CLUSTER_PORT, AMQP_PORT) for node in spec.nodes]
        containers = {node: container_name(spec.run_id, node) for node in spec.nodes}
        topology = Topology.create(
            toxiproxy, addresses, listen_host=proxy_host,
            node_probe=ContainerProbe(client, network, containers, NODE_LINK_PROBE),
            client_probe=ContainerProbe(client, network, containers, AMQP_PROBE))
        base_dir.mkdir(parents=True, exist_ok=True)
        config = base_dir / "node.toml"
        config.write_text(NODE_CONFIG, encoding="utf-8")
        nodes = {}
        for node in spec.nodes:
            amqp, mgmt = free_port(HOST), free_port(HOST)
            data_dir = base_dir / node
            data_dir.mkdir(parents=True, exist_ok=True)
            peers = [arg for peer, address in sorted(topology.peers(node).items())
                     for arg in ("--peer", f"{peer}={address}")]
            client.containers.run(
                tag, ["python", "-m", "cluster.node", "--name", node, "--host", "0.0.0.0",
                      "--amqp-port", str(AMQP_PORT), "--mgmt-port", str(MGMT_PORT),
                      "--data-dir", "/data", "--cluster-port", str(CLUSTER_PORT),
                      "--tick", str(spec.tick), "--tick-count", str(spec.tick_count),
                      "--config", NODE_CONFIG_PATH, *peers, *spec.node_args],
                name=containers[node], hostname=node,
                networking_config={
                    network: client.api.create_endpoint_config(aliases=[node])},
                user=f"{os.getuid()}:{os.getgid()}",
                volumes={str(data_dir): {"bind": "/data", "mode": "rw"},
                         str(config): {"bind": NODE_CONFIG_PATH, "mode": "ro"}},
                ports={f"{AMQP_PORT}/tcp": (HOST, amqp), f"{MGMT_PORT}/tcp": (HOST, mgmt)},
                **common)
            nodes[node] = ContainerNode(containers[node], (HOST, amqp),
                                        f"http://{HOST}:{mgmt}")
            spec.progress(f"node {node} started (container {containers[node]})")
        control = DockerProcesses(client, nodes, spec.start_timeout)
        cluster = DockerCluster(spec, client, base_dir, own_base, toxiproxy, topology, control)
        try:
            for node in spec.nodes:
                control.wait_ready(node, spec.start_timeout)
                host, port = cluster.amqp_address(node)
                spec.progress(f"node {node} answering on {host}:{port}")
        except ProcessControlError as exc:
            raise ClusterStartError(str(exc)) from exc
        wait_formed({node: cluster.management(node, timeout=2.0) for node in spec.nodes},
                    spec.start_timeout, control.log_tail, spec.progress)
        return cluster


def in_run_dir(spec: ClusterSpec, client: DockerClient,
               start: Callable[[Path, bool], StartedCluster], *, owned: bool = True
               ) -> StartedCluster:
    """``start(base_dir, own_base)`` with the run's data directory (made here, owned by
    this harness unless ``owned`` is false, when the spec names none); if it fails, the
    run's containers and networks go, and the directory if made here."""
    own_base = spec.base_dir is None
    base_dir = ledger.make_dir(f"mirrorchaos-{spec.run_id}-", owned=owned) \
        if spec.base_dir is None else spec.base_dir.resolve()
    try:
        return start(base_dir, own_base)
    except BaseException:
        reaper.remove_run(client, spec.run_id)
        if own_base:
            shutil.rmtree(base_dir, ignore_errors=True)
        raise


class ContainerProbe:
    """A probe run from the host: an address naming a node (its alias on the run's
    network) is dialled at its container's address there now; a stopped one does not
    answer."""

    def __init__(self, client: DockerClient, network: str, containers: Mapping[str, str],
                 probe: Probe) -> None:
        self.client, self.network, self.probe = client, network, probe
        self.containers = dict(containers)

    def __call__(self, address: str, timeout: float) -> bool:
        host, port = split_address(address)
        with contextlib.suppress(ValueError):
            ipaddress.ip_address(host)
            return self.probe(address, timeout)
        try:
            container = self.client.containers.get(self.containers[host])
            ip = bridge_address(container, self.network)
        except (DockerException, ClusterStartError, KeyError):
            return False
        return self.probe(f"{ip}:{port}", timeout)


def bridge_address(container: Container, network: str) -> str:
    container.reload()
    address = container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]
    if not address:
        raise ClusterStartError(f"container {container.name} has no address on {network} "
                                f"(status {container.status})")
    return str(address)


def start_toxiproxy(client: DockerClient, spec: ClusterSpec, tag: str,
                    common: Mapping[str, Any], **options: Any) -> tuple[str, ToxiproxyClient]:
    """The run's toxiproxy container, from the node image ``tag`` (the project's own
    server), once its API answers: its address on the run's network, and a client.
    ``common`` holds the run's network and labels; ``options`` go to the container."""
    network = str(common["network"])
    proxy_host = bridge_address(client.containers.run(
        tag, ["python", "-m", "faults.toxiproxy", "--host", "0.0.0.0",
              "--port", str(TOXIPROXY_PORT), "--seed", str(spec.seed)],
        name=container_name(spec.run_id, "toxiproxy"), **common, **options), network)
    toxiproxy = ToxiproxyClient(f"http://{proxy_host}:{TOXIPROXY_PORT}")
    _wait_toxiproxy(client, spec, toxiproxy)
    spec.progress(f"toxiproxy up at {toxiproxy.url}")
    return proxy_host, toxiproxy


def _wait_toxiproxy(client: DockerClient, spec: ClusterSpec, toxiproxy: ToxiproxyClient) -> None:
    name = container_name(spec.run_id, "toxiproxy")
    deadline = time.monotonic() + spec.start_timeout
    while True:
        with contextlib.suppress(ToxiproxyError):
            toxiproxy.version()
            return
        container = client.containers.get(name)
        if container.status == "exited" or time.monotonic() >= deadline:
            raise ClusterStartError(
                f"toxiproxy (container {name}, {toxiproxy.url}) did not answer "
                f"(status {container.status}); log tail:\n"
                f"{bytes(container.logs(tail=40)).decode('utf-8', 'replace')}")
        time.sleep(0.1)


def stop_recorded(record: dict[str, Any]) -> None:
    """Remove a cluster `DockerCluster.record` described, from any process."""
    try:
        client = image.connect()
    except image.ImageBuildError as exc:
        raise RuntimeError(f"cannot remove run {record['run_id']}: {exc}") from exc
    reaper.remove_run(client, record["run_id"])
    if record.get("own_base"):
        shutil.rmtree(record["base_dir"], ignore_errors=True)
