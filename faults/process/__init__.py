"""Process faults behind one interface (`ProcessControl`); `LocalProcesses` runs it
over local node processes, and a container runtime implements the same protocol."""

from .control import (
    ProcessControl,
    ProcessControlError,
    ProcessState,
    ProcessStateError,
    UnknownNode,
)
from .local import LocalProcesses

__all__ = [
    "LocalProcesses",
    "ProcessControl",
    "ProcessControlError",
    "ProcessState",
    "ProcessStateError",
    "UnknownNode",
]
