"""The run history: a versioned JSON-lines format (docs/history-format.md), its writer,
its streaming reader, node event merging and an in-memory builder for tests."""

from harness.history.builder import HistoryBuilder, MemoryHistory
from harness.history.errors import BadHistory, InconsistentHistory
from harness.history.model import FORMAT, VERSION, Event, Header, QueueConfig
from harness.history.node_events import RunHistory, read_node_events, read_run
from harness.history.reader import FileHistory, History, TornLine, read_history
from harness.history.writer import HistoryWriter

__all__ = [
    "FORMAT",
    "VERSION",
    "BadHistory",
    "Event",
    "FileHistory",
    "Header",
    "History",
    "HistoryBuilder",
    "HistoryWriter",
    "InconsistentHistory",
    "MemoryHistory",
    "QueueConfig",
    "RunHistory",
    "TornLine",
    "read_history",
    "read_node_events",
    "read_run",
]
