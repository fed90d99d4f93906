"""A broker node built in-process with no sockets open: its peer links are never started,
so a test drives its partition handling by feeding it the failure detector's events."""

from __future__ import annotations

from pathlib import Path

from cluster.config import load_config
from cluster.node import Node
from cluster.settings import parse_args


def three_node(tmp_path: Path, name: str, handling: str, *breaks: str,
               options: tuple[str, ...] = ()) -> Node:
    """Node ``name`` of a cluster n1, n2, n3 (its peers' addresses unreachable)."""
    args = ["--name", name, "--amqp-port", "0", "--data-dir", str(tmp_path / name),
            "--cluster-port", "0", "--partition-handling", handling, *options]
    for peer in {"n1", "n2", "n3"} - {name}:
        args += ["--peer", f"{peer}=127.0.0.1:1"]
    for breakage in breaks:
        args += ["--break", breakage]
    settings = parse_args(args)
    config = load_config(None, name)
    config.broker.breaks = settings.breaks
    settings.data_dir.mkdir(parents=True)
    return Node(settings, config)
