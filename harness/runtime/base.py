"""What every cluster runtime offers, Jepsen style: a `Runtime` starts a
`Cluster` from a `ClusterSpec`, and the cluster is the harness's whole view of it.

    with ProcessRuntime().start(ClusterSpec.of(3, seed=7, base_dir=tmp)) as cluster:
        host, port = cluster.client_address("c1", "n1")   # AMQP through client:c1->n1
        control = cluster.process_control()               # kill/stop/pause/resume/start
        ...
        cluster.collect(run_dir)                          # run_dir/nodes/n1.log, ...
    # leaving the block (or cluster.stop()) removes nodes, proxies and containers

Contract, the same for local processes (`ProcessRuntime`) and containers
(`DockerRuntime`):

* ``start`` returns once every node answers an AMQP handshake and its management API,
  and toxiproxy answers ``/version``; otherwise it removes what it started and raises
  `ClusterStartError` naming the node, with its log tail.
* Nodes dial each other only through the run's toxiproxy: one proxy per directed
  link (``link:n1->n2``, `faults.topology`), passed to each node as ``--peer``.
* Addresses returned by a cluster are as the harness host reaches them directly.
  `amqp_address` and `mgmt_url` bypass toxiproxy (for setup, checks and the final
  drain); `client_address` makes (once) and returns a ``client:ID->NODE`` proxy for
  the workload's clients, so their links can be cut or degraded one by one.
* ``spec.node_args`` are appended to every node's command line unchanged (e.g.
  ``--partition-handling pause_minority``).
* A node restarted through `process_control` keeps its data directory and addresses.
* ``spec.progress`` is told each step of the start as it happens, one line of text
  each (an image built or found, toxiproxy up, each node answering, the cluster
  formed), so a start that takes minutes says what it is doing.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from faults.client import ToxiproxyClient
from faults.management import Management
from faults.process import ProcessControl
from faults.topology import Topology

# Told a line of text per step of a long start-up, from whichever thread takes the step.
Progress = Callable[[str], None]


def no_progress(_step: str) -> None:
    """A `Progress` that tells no one."""


class ClusterStartError(RuntimeError):
    """The cluster did not come up; the message names what failed, with its log tail."""


def new_run_id() -> str:
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class ClusterSpec:
    """What to start. ``base_dir`` holds each node's data directory and log
    (``base_dir/<node>/``); None makes a temporary one that `Cluster.stop` deletes."""

    nodes: tuple[str, ...] = ("n1", "n2", "n3")
    run_id: str = field(default_factory=new_run_id)
    node_args: tuple[str, ...] = ()
    tick: float = 1.0  # seconds between node heartbeats
    tick_count: int = 4  # missed ticks before a peer counts as down
    seed: int = 0  # toxiproxy's root seed, when the runtime starts the server
    base_dir: Path | None = None
    start_timeout: float = 30.0  # per node, and for toxiproxy
    progress: Progress = field(default=no_progress, compare=False, repr=False)

    @classmethod
    def of(cls, count: int, **options: Any) -> ClusterSpec:
        """Nodes named n1..n<count>."""
        if count < 1:
            raise ValueError(f"a cluster needs at least one node, got {count}")
        return cls(nodes=tuple(f"n{i}" for i in range(1, count + 1)), **options)


class Cluster(Protocol):
    spec: ClusterSpec
    toxiproxy: ToxiproxyClient
    topology: Topology  # every directed node link; client links as they are added

    @property
    def nodes(self) -> list[str]: ...

    def amqp_address(self, node: str) -> tuple[str, int]:
        """The node's AMQP listener, directly (no proxy)."""

    def mgmt_url(self, node: str) -> str:
        """``http://host:port`` of the node's management API, directly."""

    def management(self, node: str, timeout: float = 5.0) -> Management:
        """A client of the node's management API that names nodes as the harness does
        (``n1``, whatever the broker calls them)."""

    def client_address(self, client_id: str, node: str) -> tuple[str, int]:
        """The ``client:<client_id>-><node>`` proxy, made on first use."""

    def process_control(self) -> ProcessControl: ...

    def collect(self, dest_dir: Path) -> None:
        """Copy each node's log and event log to ``dest_dir/nodes/<node>.log`` and
        ``dest_dir/nodes/<node>.events.jsonl``."""

    def stop(self) -> None:
        """Remove nodes, proxies, toxiproxy (if started here) and containers/networks.
        Safe to call twice."""

    def __enter__(self) -> Cluster: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


class Runtime(Protocol):
    name: str  # "process" or "docker"

    def start(self, spec: ClusterSpec) -> Cluster: ...
