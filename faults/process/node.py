"""Run one broker node as a local OS process and know when it is ready.

Used by the process faults (`LocalProcesses`, and the container runtime's readiness
probes), the process runtime, the demo and the test fixtures. Readiness is a real probe:
an AMQP handshake that gets ``connection.start`` back, and when the node has a
management port, an HTTP answer from it. A node that dies or never gets ready raises
`NodeStartError` carrying the tail of its log.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faults.lazyfs import LazyFSError, LazyMount
from faults.ports import free_port

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"


class NodeStartError(RuntimeError):
    """The node did not become ready; the message ends with its log tail."""


def amqp_answers(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when the port speaks AMQP 0-9-1: it answers our protocol header with a
    ``connection.start`` method frame on channel 0."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(PROTOCOL_HEADER)
            head = sock.recv(7)
            return head[:3] == b"\x01\x00\x00"
    except OSError:
        return False


def http_answers(url: str, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True  # 401 and friends still mean the server is up
    except OSError:
        return False


@dataclass
class NodeProcess:
    name: str
    data_dir: Path
    amqp_port: int = field(default_factory=free_port)
    mgmt_port: int | None = field(default_factory=free_port)
    host: str = "127.0.0.1"
    config_path: Path | None = None
    # Cluster links: our listening port, and per peer the address we dial to reach it.
    cluster_port: int | None = None
    peers: dict[str, str] = field(default_factory=dict)
    tick: float = 1.0
    tick_count: int = 4
    # Appended to the command line as they are (flags this file need not know).
    extra_args: list[str] = field(default_factory=list)
    # The node sees its data directory through a lazy file system (faults/lazyfs) mounted
    # beside it, which `power_loss` reverts to its last fsyncs. ``data_dir`` stays the
    # backing directory, so the harness reads the node's files there, mounted or not.
    lazyfs: bool = False
    process: subprocess.Popen[bytes] | None = None
    disk: LazyMount | None = field(default=None, init=False)
    # Set by `close`: the node's cluster is going away, and no process may start for it
    # any more (a start under way in another thread, e.g. `start_all`'s, included).
    closed: bool = field(default=False, init=False)
    _starting: threading.Lock = field(default_factory=threading.Lock, init=False,
                                      repr=False)

    def __post_init__(self) -> None:
        if self.lazyfs:
            # events.jsonl is what the harness observes, not state the broker promises.
            self.disk = LazyMount(self.data_dir, self.data_dir.with_name(
                f"{self.data_dir.name}.lazyfs"), keep=["events.jsonl"],
                log_path=self.data_dir.with_name(f"{self.data_dir.name}.lazyfs.log"))

    @property
    def node_data_dir(self) -> Path:
        """The directory the node is told to use."""
        return self.disk.mount if self.disk is not None else self.data_dir

    @property
    def log_path(self) -> Path:
        return self.data_dir / "node.log"

    @property
    def amqp_url(self) -> str:
        return f"amqp://guest:guest@{self.host}:{self.amqp_port}/%2F"

    @property
    def mgmt_url(self) -> str:
        return f"http://{self.host}:{self.mgmt_port}"

    def command(self) -> list[str]:
        command = [
            sys.executable, "-m", "cluster.node", "--name", self.name,
            "--amqp-port", str(self.amqp_port), "--data-dir", str(self.node_data_dir),
            "--host", self.host,
        ]
        if self.mgmt_port is not None:
            command += ["--mgmt-port", str(self.mgmt_port)]
        if self.config_path is not None:
            command += ["--config", str(self.config_path)]
        if self.peers:
            command += ["--cluster-port", str(self.cluster_port), "--tick", str(self.tick),
                        "--tick-count", str(self.tick_count)]
            command += [arg for name, address in sorted(self.peers.items())
                        for arg in ("--peer", f"{name}={address}")]
        return command + self.extra_args

    def start(self, timeout: float = 20.0) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.disk is not None and not self.disk.running:
            try:
                self.disk.start(timeout)
            except LazyFSError as exc:
                raise NodeStartError(f"node {self.name}: {exc}") from exc
        with self._starting:
            if self.closed:
                raise NodeStartError(f"node {self.name}: not started, its cluster is stopping")
            with self.log_path.open("ab") as log:
                # A session of its own: a Ctrl-C on the terminal reaches only our
                # process, which then stops the node in order.
                self.process = subprocess.Popen(
                    self.command(), stdout=log, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                    start_new_session=True,
                )
        self.wait_ready(timeout)

    def close(self) -> None:
        """No process starts for this node from now on; one that is starting in another
        thread has its process by the time this returns, so stopping it reaches it."""
        with self._starting:
            self.closed = True

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise NodeStartError(
                    f"node {self.name} exited with code {self.process.returncode} during "
                    f"start-up; log tail:\n{self.log_tail()}"
                )
            if amqp_answers(self.host, self.amqp_port) and (
                self.mgmt_port is None or http_answers(f"{self.mgmt_url}/api/overview")
            ):
                return
            time.sleep(0.05)
        raise NodeStartError(
            f"node {self.name} not ready on {self.host}:{self.amqp_port} after {timeout:.0f}s; "
            f"log tail:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return "(no log written)"
        return "\n".join(text.splitlines()[-lines:])

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.running:
            assert self.process is not None
            self.process.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL: no shutdown path runs, as in a crash."""
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            self.process.wait()

    def unmount(self) -> None:
        """After the node is gone: unmount its lazy file system, if it has one."""
        if self.disk is not None:
            self.disk.stop()

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM and wait; SIGKILL if the node does not stop in time."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def restart(self, timeout: float = 20.0) -> None:
        self.stop()
        self.start(timeout)


def linked_nodes(base: Path, names: Sequence[str], **settings: Any) -> dict[str, NodeProcess]:
    """Nodes in directories under ``base``, each dialling every other one directly
    (no proxy between them); ``settings`` go to each `NodeProcess`."""
    nodes = {name: NodeProcess(name, base / name, cluster_port=free_port(), **settings)
             for name in names}
    for src, dst in itertools.permutations(names, 2):
        nodes[src].peers[dst] = f"127.0.0.1:{nodes[dst].cluster_port}"
    return nodes


def start_all(nodes: Sequence[NodeProcess], timeout: float = 20.0) -> None:
    """Start nodes together, as a cluster boots: each waits at start-up to hear from its
    peers, so starting them one after another would add those waits up."""
    with ThreadPoolExecutor(len(nodes)) as pool:
        futures = [pool.submit(node.start, timeout) for node in nodes]
        errors = [future.exception() for future in futures]
    for error in errors:
        if error is not None:
            raise error
