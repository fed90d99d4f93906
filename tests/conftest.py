"""Shared fixtures: real broker node processes on loopback."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from faults.process.node import NodeProcess


@pytest.fixture
def node_factory(tmp_path: Path) -> Iterator[Callable[..., NodeProcess]]:
    """Start nodes with ``node_factory(name=..., config_text=..., host=...)``; all are
    killed at the end of the test, and a failing test shows each node's log tail."""
    started: list[NodeProcess] = []

    def start(name: str = "rabbit@n1", config_text: str | None = None,
              mgmt: bool = True, host: str = "127.0.0.1") -> NodeProcess:
        data_dir = tmp_path / name.replace("@", "_")
        config_path = None
        if config_text is not None:
            config_path = tmp_path / f"{name.replace('@', '_')}.toml"
            config_path.write_text(config_text)
        node = NodeProcess(name, data_dir, host=host, config_path=config_path)
        if not mgmt:
            node.mgmt_port = None
        started.append(node)
        node.start()
        return node

    yield start
    for node in started:
        node.kill()


@pytest.fixture
def node(node_factory: Callable[..., NodeProcess]) -> NodeProcess:
    """One running node with default settings (guest/guest, vhost /)."""
    return node_factory()
