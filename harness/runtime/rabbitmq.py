"""`RabbitMQRuntime`: real RabbitMQ 3.10 as the cluster (the ``rabbitmq`` target), one
container per node from Debian's package (`harness.runtime.image.rabbitmq_image`, built offline
like the node image), every link through the run's toxiproxy, as `DockerRuntime` does
for our own nodes.

Erlang distribution through toxiproxy
-------------------------------------
A RabbitMQ node reaches a peer ``rabbit@n2`` by its host name: it resolves ``n2``, asks
the epmd there (port 4369) for the node's distribution port (25672, RabbitMQ's default),
and dials it. One connection then carries both directions (the topology is ``duplex``:
a partition must cut the dialled link's way back too). So that each directed link has
a proxy of its own:

* the toxiproxy container gets one extra address per directed link (``ip addr add``;
  it runs with NET_ADMIN), taken from the top of the run's subnet, which Docker's
  allocator, handing out addresses from the bottom, does not reach with a few
  containers;
* in n1's container, ``n2`` resolves (its /etc/hosts) to the address of ``n1->n2``,
  where ``link:n1->n2`` listens on 25672 and ``epmd:n1->n2`` on 4369, forwarding to
  n2's own ports;
* faults act on the ``link:`` proxies (the topology's node links). The ``epmd:`` ones
  are left alone: under a partition the lookup still answers and the distribution
  connection is what fails, which is what a node sees of a cut link.

The cluster forms by ``rabbitmqctl join_cluster`` of every node with the first, over
those proxies.

The nodes
---------
* Each node's files are in ``base_dir/<node>`` (bind-mounted as ``/data``, the
  container running as the harness's user): rabbitmq.conf, enabled_plugins (the
  management plugin), the run's Erlang cookie, the Mnesia directory and message
  store, so a node started again keeps its data and identity.
* ``spec.node_args`` may hold only ``--partition-handling MODE`` (rabbitmq.conf's
  ``cluster_partition_handling``): RabbitMQ has no planted bugs or other switches of
  ours. ``net_ticktime`` is ``tick x tick_count`` seconds, so a silent peer counts as
  down about when one of ours would.
* RabbitMQ calls its nodes ``rabbit@n1``; `RabbitManagement` names them ``n1`` to the
  harness, and does ``forget_cluster_node`` (which its HTTP API lacks) with rabbitmqctl.
* RabbitMQ writes no event log of ours: an `EventPoller` watches each node's
  management API for promotions, mirrors and partitions and writes
  ``base_dir/<node>/events.jsonl`` in our format (`harness.runtime.rabbitmq_events`).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
from collections.abc import Mapping, Sequence
from itertools import permutations
from pathlib import Path
from typing import Any

from docker.client import DockerClient
from docker.errors import DockerException

from faults.client import ToxiproxyClient
from faults.management import Management, ManagementError
from faults.ports import free_port
from faults.process import ProcessControlError
from faults.process.docker import ContainerNode, DockerProcesses
from faults.topology import AMQP_PROBE, NODE_LINK_PROBE, NodeAddress, Topology

from . import image, ledger, process, reaper
from .base import ClusterSpec, ClusterStartError
from .common import wait_formed
from .docker import (
    AMQP_PORT,
    HOST,
    MGMT_PORT,
    ContainerProbe,
    DockerCluster,
    container_name,
    in_run_dir,
    network_name,
    start_toxiproxy,
)
from .rabbitmq_events import EventPoller

DIST_PORT, EPMD_PORT = 25672, 4369
CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"  # Debian's /usr/sbin wrapper switches user
SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
# rabbitmqctl's "node unreachable" and "temporary failure" exit codes: no answer.
CTL_NO_ANSWER = (69, 75)
PARTITION_HANDLING = ("ignore", "pause_minority", "autoheal")
BOOT_TIMEOUT = 90.0  # RabbitMQ boots in seconds, more on a loaded machine


def erlang_name(node: str) -> str:
    return f"rabbit@{node}"


def node_config(partition_handling: str) -> str:
    """rabbitmq.conf: guest may log in from anywhere (clients come through proxies and
    published ports), and queue figures reach the management API twice a second."""
    return (f"loopback_users = none\nlisteners.tcp.default = {AMQP_PORT}\n"
            f"management.tcp.port = {MGMT_PORT}\n"
            f"cluster_partition_handling = {partition_handling}\n"
            "collect_statistics_interval = 500\n")


def partition_handling(node_args: Sequence[str]) -> str:
    """The mode ``--partition-handling MODE`` names (``ignore`` when absent); any other
    argument is refused, naming it."""
    mode = "ignore"
    args = list(node_args)
    while args:
        arg = args.pop(0)
        if arg == "--partition-handling" and args:
            mode = args.pop(0)
            if mode not in PARTITION_HANDLING:
                raise ClusterStartError(f"RabbitMQ has no partition handling {mode!r} "
                                        f"(one of {', '.join(PARTITION_HANDLING)})")
            continue
        raise ClusterStartError(
            f"the rabbitmq target takes no node argument {arg!r}: RabbitMQ's nodes take only "
            f"--partition-handling (planted bugs and broker switches are our own broker's)")
    return mode


def link_addresses(subnet: str, nodes: Sequence[str]) -> dict[tuple[str, str], str]:
    """An address per directed link, from the top of ``subnet`` down (its broadcast
    address left out)."""
    network = ipaddress.ip_network(subnet)
    pairs = list(permutations(nodes, 2))
    # the allocator's addresses (gateway, toxiproxy, nodes) must stay far below ours
    if network.num_addresses < 4 * (len(pairs) + len(nodes) + 2):
        raise ClusterStartError(f"the run's network {subnet} is too small for an address "
                                f"per directed link of {len(nodes)} nodes")
    top = int(network.broadcast_address)
    return {pair: str(ipaddress.ip_address(top - 1 - i)) for i, pair in enumerate(pairs)}


def shorten(value: Any, names: Mapping[str, str]) -> Any:
    """A JSON value with every string that is a key of ``names`` replaced by its value."""
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, list):
        return [shorten(item, names) for item in value]
    if isinstance(value, dict):
        return {key: shorten(item, names) for key, item in value.items()}
    return value


class RabbitManagement(Management):
    """The management API of a RabbitMQ node with the harness's names for nodes:
    every ``rabbit@n1`` in an answer reads ``n1``. ``forget_node`` runs rabbitmqctl in
    the asking node's container; its failure is a `ManagementError` with rabbitmqctl's
    exit code as the status (None when the node did not answer)."""

    def __init__(self, url: str, cluster: RabbitMQCluster, timeout: float = 5.0) -> None:
        super().__init__(url, timeout=timeout)
        self._cluster = cluster
        self._short = {erlang_name(node): node for node in cluster.nodes}

    def call(self, method: str, path: str, body: Any = None) -> Any:
        return shorten(super().call(method, path, body), self._short)

    def forget_node(self, asker: str, node: str) -> None:
        self._cluster.rabbitmqctl(asker, "forget_cluster_node", erlang_name(node))


class RabbitMQCluster(DockerCluster):
    """A `DockerCluster` of RabbitMQ nodes, with their node reports polled (`EventPoller`)
    and rabbitmqctl at hand."""

    def __init__(self, spec: ClusterSpec, client: DockerClient, base_dir: Path, own_base: bool,
                 toxiproxy: ToxiproxyClient, topology: Topology,
                 control: DockerProcesses) -> None:
        super().__init__(spec, client, base_dir, own_base, toxiproxy, topology, control)
        self.poller = EventPoller({n: self.management(n, timeout=2.0) for n in spec.nodes},
                                  {n: self._events_path(n) for n in spec.nodes})

    def management(self, node: str, timeout: float = 5.0) -> RabbitManagement:
        return RabbitManagement(self.mgmt_url(node), self, timeout=timeout)

    def rabbitmqctl(self, node: str, *args: str) -> str:
        """``rabbitmqctl ARGS`` in the node's container, against that node; its output,
        or a `ManagementError` naming the command and what it printed."""
        call = f"rabbitmqctl {' '.join(args)} on {node}"
        try:
            result = self.process_control().container(node).exec_run([CTL, *args])
        except (DockerException, ProcessControlError) as exc:
            raise ManagementError(call, None, str(exc)) from None
        output = bytes(result.output).decode("utf-8", "replace")
        if result.exit_code != 0:
            status = None if result.exit_code in CTL_NO_ANSWER else int(result.exit_code)
            raise ManagementError(call, status, _last_lines(output))
        return output

    def collect(self, dest_dir: Path) -> None:
        self.poller.stop()  # its last lines written before the files are copied
        super().collect(dest_dir)
        if self.poller.errors:  # the history lacks node reports: say so, as a failure
            raise RuntimeError("watching the nodes' queues failed: "
                               + "; ".join(self.poller.errors))

    def record(self) -> dict[str, Any]:
        return {**super().record(), "target": "rabbitmq"}

    def stop(self) -> None:
        self.poller.stop()
        super().stop()


class RabbitMQRuntime:
    """Starts a `RabbitMQCluster`; the images are built or found first (the node image
    for toxiproxy, the RabbitMQ image for the nodes)."""

    name = "docker"
    target = "rabbitmq"

    def __init__(self, client: DockerClient | None = None) -> None:
        self.client = client

    def start(self, spec: ClusterSpec) -> RabbitMQCluster:
        ledger.reap(process.stop_recorded)
        mode = partition_handling(spec.node_args)
        try:
            client = self.client or image.connect()
            reaper.reap(client)
            proxy_tag = image.node_image(client, progress=spec.progress).tag
            node_tag = image.rabbitmq_image(client, progress=spec.progress)
        except image.ImageBuildError as exc:
            raise ClusterStartError(f"run {spec.run_id}: {exc}") from exc
        return in_run_dir(spec, client, lambda base_dir, own_base: self._start(
            spec, client, proxy_tag, node_tag, base_dir, own_base, mode))

    def _start(self, spec: ClusterSpec, client: DockerClient, proxy_tag: str, node_tag: str,
               base_dir: Path, own_base: bool, mode: str) -> RabbitMQCluster:
        labels = reaper.labels(spec.run_id)
        network = network_name(spec.run_id)
        created = client.networks.create(network, driver="bridge", labels=labels)
        created.reload()
        subnet = created.attrs["IPAM"]["Config"][0]["Subnet"]
        links = link_addresses(subnet, spec.nodes)
        common = {"detach": True, "network": network, "labels": labels}
        proxy_host, toxiproxy = start_toxiproxy(client, spec, proxy_tag, common,
                                                cap_add=["NET_ADMIN"])
        proxy = client.containers.get(container_name(spec.run_id, "toxiproxy"))
        for address in links.values():
            prefix = ipaddress.ip_network(subnet).prefixlen
            result = proxy.exec_run(["ip", "addr", "add", f"{address}/{prefix}", "dev", "eth0"])
            if result.exit_code != 0:
                raise ClusterStartError(f"could not give toxiproxy the link address {address}: "
                                        f"{bytes(result.output).decode('utf-8', 'replace')}")
        for (source, target), address in links.items():
            toxiproxy.create_proxy(f"epmd:{source}->{target}", f"{target}:{EPMD_PORT}",
                                   listen=f"{address}:{EPMD_PORT}")
        containers = {node: container_name(spec.run_id, node) for node in spec.nodes}
        topology = Topology.create(
            toxiproxy, [NodeAddress(node, node, DIST_PORT, AMQP_PORT) for node in spec.nodes],
            listen_host=proxy_host, duplex=True,
            node_listen=lambda source, target: f"{links[source, target]}:{DIST_PORT}",
            node_probe=ContainerProbe(client, network, containers, NODE_LINK_PROBE),
            client_probe=ContainerProbe(client, network, containers, AMQP_PROBE))
        spec.progress(f"Erlang distribution routed through toxiproxy "
                      f"({len(links)} directed links)")
        cookie = secrets.token_hex(16)
        ticktime = max(1, round(spec.tick * spec.tick_count))
        nodes = {}
        for node in spec.nodes:
            amqp, mgmt = free_port(HOST), free_port(HOST)
            data_dir = _node_files(base_dir / node, cookie, node_config(mode))
            client.containers.run(
                node_tag, [SERVER], name=containers[node], hostname=node, init=True,
                networking_config={
                    network: client.api.create_endpoint_config(aliases=[node])},
                extra_hosts={peer: links[node, peer] for peer in spec.nodes if peer != node},
                environment=_node_environment(node, ticktime),
                user=f"{os.getuid()}:{os.getgid()}", working_dir="/data",
                volumes={str(data_dir): {"bind": "/data", "mode": "rw"}},
                ports={f"{AMQP_PORT}/tcp": (HOST, amqp), f"{MGMT_PORT}/tcp": (HOST, mgmt)},
                **common)
            nodes[node] = ContainerNode(containers[node], (HOST, amqp), f"http://{HOST}:{mgmt}")
            spec.progress(f"node {erlang_name(node)} started (container {containers[node]})")
        timeout = max(spec.start_timeout, BOOT_TIMEOUT)
        control = DockerProcesses(client, nodes, timeout)
        cluster = RabbitMQCluster(spec, client, base_dir, own_base, toxiproxy, topology, control)
        try:
            for node in spec.nodes:
                control.wait_ready(node, timeout)
                spec.progress(f"node {erlang_name(node)} answering")
            first, *others = spec.nodes
            for node in others:
                for args in (("stop_app",), ("join_cluster", erlang_name(first)), ("start_app",)):
                    cluster.rabbitmqctl(node, *args)
                spec.progress(f"{erlang_name(node)} joined {erlang_name(first)}")
        except (ProcessControlError, ManagementError) as exc:
            raise ClusterStartError(str(exc)) from exc
        wait_formed({node: cluster.management(node, timeout=2.0) for node in spec.nodes},
                    timeout, control.log_tail, spec.progress)
        cluster.poller.start()
        return cluster


def _node_files(data_dir: Path, cookie: str, config: str) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "rabbitmq.conf").write_text(config, encoding="utf-8")
    (data_dir / "enabled_plugins").write_text("[rabbitmq_management].\n", encoding="utf-8")
    cookie_file = data_dir / ".erlang.cookie"  # HOME is /data: Erlang reads it there
    cookie_file.write_text(cookie, encoding="utf-8")
    cookie_file.chmod(0o400)  # Erlang refuses a cookie others may read
    return data_dir


def _node_environment(node: str, ticktime: int) -> dict[str, str]:
    return {"HOME": "/data", "RABBITMQ_NODENAME": erlang_name(node),
            "RABBITMQ_MNESIA_BASE": "/data/mnesia", "RABBITMQ_LOG_BASE": "/data/log",
            "RABBITMQ_LOGS": "-", "RABBITMQ_CONFIG_FILE": "/data/rabbitmq.conf",
            "RABBITMQ_ENABLED_PLUGINS_FILE": "/data/enabled_plugins",
            "RABBITMQ_PID_FILE": "/data/rabbitmq.pid",
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": f"-kernel net_ticktime {ticktime}"}


def _last_lines(text: str, count: int = 8) -> str:
    return " | ".join([line for line in text.splitlines() if line.strip()][-count:])

