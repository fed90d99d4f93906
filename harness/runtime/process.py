"""`ProcessRuntime`: the cluster as local node processes, for hosts without
Docker and for Spark executors.

Each node listens on its own loopback address (127.0.0.2, .3, ...; all of 127/8 is
local on Linux) so node addresses read like a real cluster's; where the kernel refuses
those, every node uses 127.0.0.1. Toxiproxy is whatever `find_toxiproxy` finds, else
the project's own server as a subprocess, with its proxies on 127.0.0.1. Processes run
in sessions of their own, so a detached cluster (`mirrorchaos cluster up`) outlives
the command; `record` describes it for `stop_recorded`. Any other run is written in
the `ledger` while it lives, with its data directory owned by its harness
(`ledger.make_dir`): the next harness to start stops and removes them if that one died.

Where FUSE works, each node sees its data directory through a lazy file system
(faults/lazyfs) so the ``power-loss`` fault can lose what the node had not fsynced;
where it does not, the runtime says why once and ``power-loss`` fails with that reason.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import psutil

from faults.client import (
    NotFound,
    ToxiproxyClient,
    ToxiproxyError,
    ToxiproxyHandle,
    ToxiproxyStartError,
    find_toxiproxy,
)
from faults.lazyfs import fuse_unavailable, unmount_under
from faults.management import Management
from faults.ports import free_port
from faults.process import LocalProcesses, ProcessState
from faults.process.node import NodeProcess, NodeStartError, start_all
from faults.topology import NodeAddress, Topology

from . import ledger
from .base import ClusterSpec, ClusterStartError
from .common import ClusterBase, wait_formed

TOXIPROXY_HOST = "127.0.0.1"
STOP_TIMEOUT = 5.0  # seconds for a node to stop on SIGTERM before SIGKILL


def loopback_hosts(count: int) -> list[str]:
    """127.0.0.2 onwards when this kernel lets us bind them, else 127.0.0.1 for all."""
    hosts = [f"127.0.0.{i}" for i in range(2, count + 2)]
    try:
        for host in hosts:
            with socket.socket() as sock:
                sock.bind((host, 0))
    except OSError:
        return ["127.0.0.1"] * count
    return hosts


class ProcessCluster(ClusterBase):
    def __init__(self, spec: ClusterSpec, base_dir: Path, own_base: bool,
                 handle: ToxiproxyHandle, topology: Topology,
                 processes: dict[str, NodeProcess], no_lazyfs: str) -> None:
        super().__init__(spec, handle.client(), topology, base_dir, own_base)
        self.processes = processes
        self._handle = handle
        self._control = LocalProcesses(processes, spec.start_timeout, no_lazyfs=no_lazyfs)
        self._stopped = False

    def amqp_address(self, node: str) -> tuple[str, int]:
        process = self._control.node(node)
        return process.host, process.amqp_port

    def mgmt_url(self, node: str) -> str:
        return self._control.node(node).mgmt_url

    def process_control(self) -> LocalProcesses:
        return self._control

    def _node_log(self, node: str) -> str:
        path = self.processes[node].log_path
        return path.read_text("utf-8", "replace") if path.exists() else ""

    def _events_path(self, node: str) -> Path:
        return self.processes[node].data_dir / "events.jsonl"

    def record(self) -> dict[str, Any]:
        """What `stop_recorded` needs to remove this cluster from another process."""
        processes = {node: _identity(process.process.pid)
                     for node, process in self.processes.items()
                     if process.process is not None and process.running}
        if self._handle.process is not None:
            processes["toxiproxy"] = _identity(self._handle.process.pid)
        return {**super().record(), "runtime": "process", "processes": processes}

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._stop()
        ledger.leave(self.spec.run_id)

    def _stop(self) -> None:
        for process in self.processes.values():
            # A Ctrl-C can land while `start_all` starts them; no start may follow ours.
            process.close()
        for node in self.processes:
            # A stopped process cannot act on SIGTERM until it runs again.
            if self._control.state(node) is ProcessState.PAUSED:
                self._control.resume(node)
        for process in self.processes.values():
            process.signal(signal.SIGTERM)  # all at once; then wait for each
        for process in self.processes.values():
            process.stop(STOP_TIMEOUT)
        for process in self.processes.values():
            process.unmount()
        with contextlib.suppress(ToxiproxyError, ExceptionGroup):
            self.topology.teardown()  # a server we started goes anyway
        self._handle.stop()
        if self.own_base:
            shutil.rmtree(self.base_dir, ignore_errors=True)


class ProcessRuntime:
    """``detached``: the cluster is meant to outlive this process (`mirrorchaos cluster
    up`); it is not in the ledger, and only ``cluster down`` removes it. ``lazyfs``:
    data directories on lazyfs, so the ``power-loss`` fault can lose unsynced writes
    (fsync then reaches no disk: runs that never lose power keep the real one); None =
    where FUSE works, True = required."""

    name = "process"

    def __init__(self, *, detached: bool = False, lazyfs: bool | None = False) -> None:
        self.detached = detached
        self.lazyfs = lazyfs

    def _lazyfs(self) -> tuple[bool, str]:
        """Whether the nodes get lazyfs, and if not, why."""
        if self.lazyfs is False:
            return False, "the process runtime was started without lazyfs"
        reason = fuse_unavailable()
        if reason is None:
            return True, ""
        if self.lazyfs:
            raise ClusterStartError(f"lazyfs was asked for, but FUSE cannot be used: {reason}")
        _say_no_lazyfs(reason)
        return False, f"FUSE cannot be used here: {reason}"

    def start(self, spec: ClusterSpec) -> ProcessCluster:
        ledger.reap(stop_recorded)
        lazyfs, no_lazyfs = self._lazyfs()
        own_base = spec.base_dir is None
        base_dir = ledger.make_dir(f"mirrorchaos-{spec.run_id}-", owned=not self.detached) \
            if spec.base_dir is None else spec.base_dir
        base_dir.mkdir(parents=True, exist_ok=True)
        try:
            handle = find_toxiproxy(spec.seed, host=TOXIPROXY_HOST,
                                    startup_timeout=spec.start_timeout,
                                    log_path=base_dir / "toxiproxy.log")
        except (ToxiproxyStartError, ToxiproxyError) as exc:
            if own_base:
                shutil.rmtree(base_dir, ignore_errors=True)
            raise ClusterStartError(f"toxiproxy for run {spec.run_id}: {exc}") from exc
        spec.progress(f"toxiproxy up at {handle.url}")
        hosts = loopback_hosts(len(spec.nodes))
        try:
            processes = {
                name: NodeProcess(name, base_dir / name, amqp_port=free_port(host),
                                  mgmt_port=free_port(host), host=host,
                                  cluster_port=free_port(host), tick=spec.tick,
                                  tick_count=spec.tick_count,
                                  extra_args=list(spec.node_args), lazyfs=lazyfs)
                for name, host in zip(spec.nodes, hosts, strict=True)}
            addresses = [NodeAddress(name, p.host, p.cluster_port or 0, p.amqp_port)
                         for name, p in processes.items()]
            topology = Topology.create(handle.client(), addresses, listen_host=TOXIPROXY_HOST)
        except BaseException:
            handle.stop()
            if own_base:
                shutil.rmtree(base_dir, ignore_errors=True)
            raise
        cluster = ProcessCluster(spec, base_dir, own_base, handle, topology, processes,
                                 no_lazyfs)
        if not self.detached:
            ledger.enter(spec.run_id, cluster.record())
        try:
            for name, process in processes.items():
                process.peers = topology.peers(name)
                spec.progress(f"node {name} starting on {process.host}:{process.amqp_port}")
            try:
                start_all(list(processes.values()), spec.start_timeout)
            except NodeStartError as error:
                raise ClusterStartError(str(error)) from error
            # Together: each node answers only once it has heard from its peers.
            spec.progress(f"nodes {', '.join(processes)} answering")
            wait_formed({name: Management(p.mgmt_url, timeout=2.0)
                         for name, p in processes.items()},
                        spec.start_timeout, lambda node: processes[node].log_tail(),
                        spec.progress)
        except BaseException:
            cluster.stop()
            raise
        return cluster


def _identity(pid: int) -> dict[str, float]:
    """A pid with its start time, so a reused pid is never taken for ours."""
    return {"pid": pid, "started": psutil.Process(pid).create_time()}


@functools.cache
def _say_no_lazyfs(reason: str) -> None:
    print(f"mirrorchaos: node data directories are not on lazyfs ({reason}); "
          f"the power-loss fault will fail", file=sys.stderr)


def stop_recorded(record: dict[str, Any]) -> None:
    """Remove a cluster `ProcessCluster.record` described, from any process: stop each
    process that is still the one recorded, the proxies of a toxiproxy we did not
    start, then the lazy file systems (once nothing uses them), then the files if the
    runtime made them."""
    base_dir = Path(record["base_dir"])
    if "toxiproxy" not in record["processes"]:
        client = ToxiproxyClient(record["toxiproxy_url"])
        # A toxiproxy that no longer answers took its proxies with it; the nodes and
        # mounts below must go either way.
        with contextlib.suppress(ToxiproxyError):
            for name in record["proxies"]:
                with contextlib.suppress(NotFound):
                    client.delete_proxy(name)
    procs = _started_in(base_dir, "cluster.node", "--data-dir")
    for identity in record["processes"].values():
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(identity["pid"])
            if process.create_time() == identity["started"] and process not in procs:
                procs.append(process)
    ledger.end(procs, STOP_TIMEOUT)
    ledger.end(_started_in(base_dir, "faults.lazyfs", "--mount"), STOP_TIMEOUT)
    unmount_under(base_dir)  # what a SIGKILLed lazyfs left mounted
    if record.get("own_base"):
        shutil.rmtree(base_dir, ignore_errors=True)


def _started_in(base_dir: Path, module: str, flag: str) -> list[psutil.Process]:
    """Processes of ``python -m module`` whose ``flag`` names a directory in
    ``base_dir``: found by their command line, so a node restarted during the run (a new
    pid) is found too."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        command = process.info["cmdline"] or []
        if module not in command:
            continue
        with contextlib.suppress(ValueError, IndexError):
            if Path(command[command.index(flag) + 1]).parent == base_dir:
                found.append(process)
    return found
