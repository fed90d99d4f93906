"""One interface for process faults, whatever runs the nodes (local processes now,
containers later): kill, power loss, graceful stop, pause, resume, start, and the
state seen from outside."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol


class ProcessState(enum.Enum):
    RUNNING = "running"
    PAUSED = "paused"  # SIGSTOP, or a paused container
    STOPPED = "stopped"  # exited, killed, or never started


class UnknownNode(KeyError):
    """The caller named a node this control does not run."""


class ProcessStateError(RuntimeError):
    """The caller asked for a change the node's state does not allow (start a running
    node, pause a stopped one)."""


class ProcessControlError(RuntimeError):
    """The runtime failed to do it: the node did not come up, a signal failed."""


class ProcessControl(Protocol):
    def nodes(self) -> list[str]: ...

    def state(self, node: str) -> ProcessState: ...

    def kill(self, node: str) -> None:
        """SIGKILL (``docker kill``): no shutdown path runs. Returns once it is gone."""

    def power_loss(self, nodes: Sequence[str]) -> None:
        """The nodes lose power at one moment, as a rack does: every one is SIGKILLed
        before any loses the writes it had not fsynced (its data directory is on a lazy
        file system, faults/lazyfs), so none outlives another to act on its loss. A
        runtime that cannot do it raises `ProcessControlError` saying why, before
        touching any node."""

    def stop(self, node: str, timeout: float) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` (``docker stop -t``)."""

    def pause(self, node: str) -> None:
        """SIGSTOP the node and its children (``docker pause``)."""

    def resume(self, node: str) -> None:
        """SIGCONT (``docker unpause``)."""

    def start(self, node: str) -> None:
        """Start a stopped node with its data and addresses; returns once it is ready."""
