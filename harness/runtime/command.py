"""``mirrorchaos cluster up|down|status``: a cluster left running between commands,
recorded in ``STORE/cluster.json`` so ``status`` and ``down`` find it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from faults.client import ToxiproxyClient, ToxiproxyError
from faults.process.node import amqp_answers, http_answers

from . import docker, process
from .base import ClusterSpec, ClusterStartError
from .docker import DockerRuntime
from .process import ProcessRuntime


def add_cluster_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("cluster", help="start, inspect or remove a cluster left running",
                       description="A cluster of our nodes behind toxiproxy, as local "
                       "processes or Docker containers, kept between commands.")
    p.add_argument("--store", type=Path, default=Path("store"), metavar="DIR",
                   help="where cluster.json records the cluster (default %(default)s)")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start a cluster and leave it running")
    up.add_argument("--runtime", choices=("docker", "process"), default="process",
                    help="containers or local processes (default %(default)s)")
    up.add_argument("--nodes", type=int, default=3, help="node count (default %(default)s)")
    up.add_argument("--seed", type=int, default=0, help="toxiproxy seed (default %(default)s)")
    up.set_defaults(handler=_up)
    actions.add_parser("status", help="nodes, addresses, proxies and whether each answers"
                       ).set_defaults(handler=_status)
    actions.add_parser("down", help="remove the cluster").set_defaults(handler=_down)


def _state_path(args: argparse.Namespace) -> Path:
    return Path(args.store) / "cluster.json"


def _read_state(args: argparse.Namespace) -> dict[str, Any] | None:
    path = _state_path(args)
    if not path.exists():
        print(f"mirrorchaos cluster: no cluster recorded in {path}", file=sys.stderr)
        return None
    return dict(json.loads(path.read_text()))


def _up(args: argparse.Namespace) -> int:
    path = _state_path(args)
    if path.exists():
        run = json.loads(path.read_text())["run_id"]
        print(f"mirrorchaos cluster: run {run} is already up ({path}); "
              "`mirrorchaos cluster down` first", file=sys.stderr)
        return 1
    if args.nodes < 1:
        print("mirrorchaos cluster: --nodes must be at least 1", file=sys.stderr)
        return 2
    spec = ClusterSpec.of(args.nodes, seed=args.seed)
    try:
        runtime = (DockerRuntime(detached=True) if args.runtime == "docker"
                   else ProcessRuntime(detached=True))
        cluster = runtime.start(spec)
    except ClusterStartError as exc:
        print(f"mirrorchaos cluster: {exc}", file=sys.stderr)
        return 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cluster.record(), indent=2) + "\n")
    # No stop: the nodes and toxiproxy outlive this command until `cluster down`.
    return _print_status(cluster.record())


def _status(args: argparse.Namespace) -> int:
    state = _read_state(args)
    return 1 if state is None else _print_status(state)


def _print_status(state: dict[str, Any]) -> int:
    """Exit 0 when every node and toxiproxy answer, 1 otherwise."""
    def mark(ok: bool) -> str:
        return "answers" if ok else "NO ANSWER"

    healthy = True
    print(f"run {state['run_id']} ({state['runtime']} runtime), data in {state['base_dir']}")
    for node, address in state["nodes"].items():
        host, _, port = address["amqp"].rpartition(":")
        amqp = amqp_answers(host, int(port))
        mgmt = http_answers(address["mgmt"] + "/api/overview")
        healthy &= amqp and mgmt
        print(f"  {node}: amqp {address['amqp']} {mark(amqp)}, "
              f"management {address['mgmt']} {mark(mgmt)}")
    try:
        proxies = ToxiproxyClient(state["toxiproxy_url"], timeout=2).proxies()
    except ToxiproxyError as exc:
        print(f"  toxiproxy {state['toxiproxy_url']}: {exc}")
        return 1
    print(f"  toxiproxy {state['toxiproxy_url']} answers, {len(proxies)} proxies:")
    for name in state["proxies"]:
        proxy = proxies.get(name)
        where = "MISSING" if proxy is None else \
            f"{proxy.listen} -> {proxy.upstream}{'' if proxy.enabled else ' (disabled)'}"
        healthy &= proxy is not None
        print(f"    {name}: {where}")
    return 0 if healthy else 1


def _down(args: argparse.Namespace) -> int:
    state = _read_state(args)
    if state is None:
        return 1
    if state["runtime"] == "docker":
        docker.stop_recorded(state)
    else:
        process.stop_recorded(state)
    _state_path(args).unlink()
    print(f"run {state['run_id']} removed")
    return 0
