"""A node's settings from its command line: ``python -m cluster.node --name N
--amqp-port P [--mgmt-port M] --data-dir DIR [--config FILE] [--peer NAME=HOST:PORT ...]``.
What the process is given at start, apart from the broker's TOML config
(`cluster.config`); `cluster.node` runs a node with them."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from cluster.breakages import CATALOGUE, Breaks
from cluster.peer.links import ClusterSettings
from cluster.peer.partition_policy import HANDLINGS, Handling

DESCRIPTION = ("One broker node of a mirrorchaos cluster, speaking AMQP 0-9-1, with a "
               "RabbitMQ-compatible management API.")


@dataclass
class NodeSettings:
    name: str
    data_dir: Path
    amqp_port: int
    mgmt_port: int | None = None
    host: str = "0.0.0.0"
    config_path: Path | None = None
    cluster: ClusterSettings | None = None
    partition_handling: Handling = "ignore"
    breaks: Breaks = field(default_factory=Breaks)
    peer_wait: float = 30.0  # how long a node that did not stop last waits for one that did
    force_boot: bool = False


def parse_args(argv: list[str] | None = None) -> NodeSettings:
    parser = argparse.ArgumentParser(prog="python -m cluster.node", description=DESCRIPTION)
    parser.add_argument("--name", required=True, help="node name, e.g. rabbit@n1")
    parser.add_argument("--amqp-port", type=int, required=True)
    parser.add_argument("--mgmt-port", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--host", default="0.0.0.0", help="address to listen on")
    parser.add_argument("--config", type=Path, default=None, help="TOML config file")
    parser.add_argument("--cluster-name", default="mirrorchaos",
                        help="peers must name the same cluster (default %(default)s)")
    parser.add_argument("--cluster-port", type=int, default=None,
                        help="port for links from peers (needed with --peer)")
    parser.add_argument("--peer", action="append", default=[], metavar="NAME=HOST:PORT",
                        help="a peer node and the address this node dials to reach it "
                             "(repeatable; may be a proxy for this directed link)")
    parser.add_argument("--tick", type=float, default=1.0,
                        help="seconds between heartbeats to peers (default %(default)s)")
    parser.add_argument("--tick-count", type=int, default=4,
                        help="missed ticks before a peer counts as down (default %(default)s)")
    parser.add_argument("--break", dest="breaks", action="append", default=[],
                        choices=sorted(CATALOGUE), metavar="NAME",
                        help="run with a planted bug, to show that the harness catches it "
                             "(repeatable; docs/planted-bugs.md): "
                             + "; ".join(f"{b.name}: {b.breaks}" for b in CATALOGUE.values()))
    parser.add_argument("--partition-handling", default="ignore",
                        choices=HANDLINGS,
                        help="what a node does about a network partition, as RabbitMQ's "
                             "cluster_partition_handling (default %(default)s)")
    parser.add_argument("--peer-wait", type=float, default=30.0, metavar="SECONDS",
                        help="a node that stopped while peers still ran waits this long "
                             "for one of them before refusing to start (default %(default)s)")
    parser.add_argument("--force-boot", action="store_true",
                        help="start even if peers that stopped after this node are down "
                             "(its queues may be older than theirs)")
    args = parser.parse_args(argv)
    cluster = None
    if args.peer:
        if args.cluster_port is None:
            parser.error("--peer needs --cluster-port")
        peers = dict(_peer_address(parser, text) for text in args.peer)
        cluster = ClusterSettings(args.cluster_name, args.host, args.cluster_port, peers,
                                  args.tick, args.tick_count)
    return NodeSettings(args.name, args.data_dir, args.amqp_port, args.mgmt_port, args.host,
                        args.config, cluster, args.partition_handling, Breaks.of(args.breaks),
                        args.peer_wait, args.force_boot)


def _peer_address(parser: argparse.ArgumentParser, text: str) -> tuple[str, tuple[str, int]]:
    name, _, address = text.partition("=")
    host, _, port = address.rpartition(":")
    if not name or not host or not port.isdigit():
        parser.error(f"--peer {text!r}: expected NAME=HOST:PORT")
    return name, (host, int(port))
