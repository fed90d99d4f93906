"""Process faults on nodes running as local processes (`NodeProcess`), with psutil
for SIGSTOP/SIGCONT and for the state the kernel reports; a power loss needs the
nodes' data directories on lazyfs (`NodeProcess.lazyfs`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import psutil

from faults.lazyfs import LazyFSError

from .control import ProcessControlError, ProcessState, ProcessStateError, UnknownNode
from .node import NodeProcess, NodeStartError

_PAUSED = {psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP}
_GONE = {psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD}


class LocalProcesses:
    """``no_lazyfs``: why the nodes' data directories are not on lazyfs, when they are
    not; a power loss fails with it."""

    def __init__(self, nodes: Mapping[str, NodeProcess], start_timeout: float = 20.0, *,
                 no_lazyfs: str = "the nodes were started without lazyfs") -> None:
        self._nodes = dict(nodes)
        self.start_timeout = start_timeout
        self.no_lazyfs = no_lazyfs

    def nodes(self) -> list[str]:
        return sorted(self._nodes)

    def node(self, name: str) -> NodeProcess:
        try:
            return self._nodes[name]
        except KeyError:
            raise UnknownNode(name) from None

    def _process(self, name: str) -> psutil.Process | None:
        popen = self.node(name).process
        if popen is None or popen.poll() is not None:
            return None
        try:
            return psutil.Process(popen.pid)
        except psutil.NoSuchProcess:
            return None

    def state(self, node: str) -> ProcessState:
        process = self._process(node)
        if process is None:
            return ProcessState.STOPPED
        try:
            status = process.status()
        except psutil.NoSuchProcess:
            return ProcessState.STOPPED
        if status in _GONE:
            return ProcessState.STOPPED
        return ProcessState.PAUSED if status in _PAUSED else ProcessState.RUNNING

    def kill(self, node: str) -> None:
        self.node(node).kill()  # SIGKILL also ends a stopped process

    def power_loss(self, nodes: Sequence[str]) -> None:
        disks = {node: self.node(node).disk for node in nodes}
        bare = [node for node, disk in disks.items() if disk is None]
        if bare:
            raise ProcessControlError(f"power-loss on {', '.join(bare)} needs a data "
                                      f"directory on lazyfs, and it is not: {self.no_lazyfs}")
        for node in nodes:
            self.kill(node)
        failed = {}
        for node, disk in disks.items():
            assert disk is not None
            try:
                disk.lose()
            except LazyFSError as exc:
                failed[node] = str(exc)
        if failed:
            raise ProcessControlError(f"power-loss: the unsynced writes of {failed} could "
                                      "not be dropped")

    def stop(self, node: str, timeout: float) -> None:
        # A stopped process cannot act on SIGTERM until it runs again.
        if self.state(node) is ProcessState.PAUSED:
            self.resume(node)
        self.node(node).stop(timeout)

    def pause(self, node: str) -> None:
        self._signal_tree(node, "pause", psutil.Process.suspend)
        self._await_state(node, ProcessState.PAUSED)

    def resume(self, node: str) -> None:
        self._signal_tree(node, "resume", psutil.Process.resume)
        self._await_state(node, ProcessState.RUNNING)

    def _await_state(self, node: str, wanted: ProcessState, timeout: float = 5.0) -> None:
        # A signal is delivered when the kernel next schedules the process; return once
        # it has taken effect, as docker pause returns once the cgroup is frozen.
        deadline = time.monotonic() + timeout
        while (state := self.state(node)) is not wanted:
            if time.monotonic() >= deadline:
                raise ProcessControlError(
                    f"{node} is {state.value}, not {wanted.value}, {timeout:g}s after the signal")
            time.sleep(0.01)

    def _signal_tree(self, node: str, action: str,
                     send: Callable[[psutil.Process], None]) -> None:
        process = self._process(node)
        if process is None:
            raise ProcessStateError(f"cannot {action} {node}: it is not running")
        try:
            # The node and anything it started, as docker pause freezes the cgroup.
            for member in [process, *process.children(recursive=True)]:
                send(member)
        except psutil.NoSuchProcess as exc:
            raise ProcessControlError(f"{node} exited during {action}: {exc}") from None

    def start(self, node: str) -> None:
        state = self.state(node)
        if state is not ProcessState.STOPPED:
            raise ProcessStateError(f"cannot start {node}: it is {state.value}")
        process = self.node(node)
        try:
            process.start(self.start_timeout)
        except NodeStartError as exc:
            process.kill()
            raise ProcessControlError(str(exc)) from exc
