"""What the process and Docker clusters share: client links made on first use, the
collected node files, waiting for the nodes to see each other, the context manager."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from faults.client import ToxiproxyClient, split_address
from faults.management import Management, ManagementError
from faults.topology import Topology, client_link_name

from .base import ClusterSpec, ClusterStartError, Progress


class ClusterBase(abc.ABC):
    """Subclasses provide the node addresses, the node files and `stop`."""

    def __init__(self, spec: ClusterSpec, toxiproxy: ToxiproxyClient, topology: Topology,
                 base_dir: Path, own_base: bool) -> None:
        self.spec = spec
        self.toxiproxy = toxiproxy
        self.topology = topology
        self.base_dir = base_dir
        self.own_base = own_base  # made by the runtime, so removed with the cluster

    @abc.abstractmethod
    def amqp_address(self, node: str) -> tuple[str, int]: ...

    @abc.abstractmethod
    def mgmt_url(self, node: str) -> str: ...

    def management(self, node: str, timeout: float = 5.0) -> Management:
        return Management(self.mgmt_url(node), timeout=timeout)

    @abc.abstractmethod
    def _node_log(self, node: str) -> str: ...

    @abc.abstractmethod
    def _events_path(self, node: str) -> Path: ...

    @abc.abstractmethod
    def stop(self) -> None: ...

    @property
    def nodes(self) -> list[str]:
        return list(self.spec.nodes)

    def client_address(self, client_id: str, node: str) -> tuple[str, int]:
        if node not in self.spec.nodes:
            raise KeyError(f"no node {node!r} in this cluster ({', '.join(self.spec.nodes)})")
        try:
            link = self.topology.link(client_link_name(client_id, node))
        except KeyError:
            link = self.topology.add_client(client_id, node)
        return split_address(link.address)

    def collect(self, dest_dir: Path) -> None:
        target = dest_dir / "nodes"
        target.mkdir(parents=True, exist_ok=True)
        for node in self.nodes:
            (target / f"{node}.log").write_text(self._node_log(node), encoding="utf-8")
            events = self._events_path(node)
            # A node that never started has written no events: an empty file says so.
            data = events.read_bytes() if events.exists() else b""
            (target / f"{node}.events.jsonl").write_bytes(data)

    def record(self) -> dict[str, Any]:
        """The cluster as JSON: what `mirrorchaos cluster status` shows and, with each
        runtime's additions, what its ``stop_recorded`` needs to remove it."""
        nodes = {}
        for node in self.nodes:
            host, port = self.amqp_address(node)
            nodes[node] = {"amqp": f"{host}:{port}", "mgmt": self.mgmt_url(node)}
        return {"run_id": self.spec.run_id, "base_dir": str(self.base_dir),
                "own_base": self.own_base, "nodes": nodes, "toxiproxy_url": self.toxiproxy.url,
                "proxies": [link.name for link in self.topology.links]}

    def __enter__(self) -> ClusterBase:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def wait_formed(apis: Mapping[str, Management], timeout: float,
                log_tail: Callable[[str], str], progress: Progress) -> None:
    """Until every node reports every node running, so a run starts on a whole
    cluster; otherwise `ClusterStartError` with what each node sees."""
    everyone = set(apis)
    deadline = time.monotonic() + timeout
    seen: dict[str, str] = {}
    while True:
        for node, api in apis.items():
            try:
                running = api.running_nodes()
            except ManagementError as exc:
                seen[node] = str(exc)
                continue
            seen[node] = ", ".join(sorted(running))
            if running == everyone:
                seen.pop(node)
        if not seen:
            progress(f"cluster formed: every node sees {', '.join(sorted(everyone))}")
            return
        if time.monotonic() >= deadline:
            node = sorted(seen)[0]
            views = "; ".join(f"{n} sees {v}" for n, v in sorted(seen.items()))
            raise ClusterStartError(
                f"the cluster did not form within {timeout:g}s ({views}); "
                f"log tail of {node}:\n{log_tail(node)}")
        time.sleep(0.1)
