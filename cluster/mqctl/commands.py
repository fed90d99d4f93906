"""What each mqctl command does: the management API calls it makes and what it prints.

List commands are `Listing`s: an API path and how each rabbitmqctl field is read from
what it returns.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

from cluster.mqctl.client import quote
from cluster.mqctl.errors import EX_DATAERR, EX_SOFTWARE, EX_USAGE, CtlError
from cluster.mqctl.output import Ctl, cell
from cluster.peer.boot import BootError, LastRunningFile

Field = Callable[[dict[str, Any]], Any]
Run = Callable[[Ctl, argparse.Namespace], None]


def _keys(*names: str) -> dict[str, Field]:
    return {name: itemgetter(name) for name in names}


def _pid(node: str) -> str:
    return f"<{node}>"


@dataclass(frozen=True)
class Listing:
    noun: str
    path: str  # may hold {vhost}
    defaults: tuple[str, ...]
    fields: Mapping[str, Field]

    @property
    def per_vhost(self) -> bool:
        return "{vhost}" in self.path

    def run(self, ctl: Ctl, args: argparse.Namespace) -> None:
        fields = args.fields or list(self.defaults)
        for name in fields:
            if name not in self.fields:
                raise CtlError(f"invalid field '{name}' for list_{self.noun}; valid fields: "
                               f"{' '.join(self.fields)}", EX_USAGE)
        if self.per_vhost:
            ctl.info(f"Listing {self.noun} for vhost {args.vhost} ...")
            found = ctl.client.get(self.path.format(vhost=quote(args.vhost)))
        else:
            ctl.info(f"Listing {self.noun} ...")
            found = ctl.client.get(self.path)
        ctl.rows(fields, [[self.fields[name](row) for name in fields] for row in found])


LISTINGS = [
    Listing("queues", "/api/queues/{vhost}", ("name", "messages"), {
        **_keys("name", "messages", "messages_ready", "messages_unacknowledged", "consumers",
                "durable", "auto_delete", "exclusive", "arguments", "policy"),
        "pid": lambda q: _pid(q["node"]),
        "slave_pids": lambda q: [_pid(node) for node in q["slave_nodes"]],
        "synchronised_slave_pids": lambda q: [_pid(n) for n in q["synchronised_slave_nodes"]],
        **_keys("state", "node"),
    }),
    Listing("exchanges", "/api/exchanges/{vhost}", ("name", "type"),
            _keys("name", "type", "durable", "auto_delete", "internal", "arguments")),
    Listing("bindings", "/api/bindings/{vhost}",
            ("source_name", "source_kind", "destination_name", "destination_kind",
             "routing_key", "arguments"), {
        "source_name": itemgetter("source"),
        "source_kind": lambda b: "exchange",
        "destination_name": itemgetter("destination"),
        "destination_kind": itemgetter("destination_type"),
        **_keys("routing_key", "arguments"),
    }),
    Listing("connections", "/api/connections", ("user", "peer_host", "peer_port", "state"),
            _keys("user", "peer_host", "peer_port", "state", "name", "vhost", "channels",
                  "protocol", "host", "port", "timeout", "frame_max", "channel_max")),
    Listing("users", "/api/users", ("user", "tags"),
            {"user": itemgetter("name"), "tags": itemgetter("tags")}),
    Listing("vhosts", "/api/vhosts", ("name",),
            _keys("name", "messages", "messages_ready", "messages_unacknowledged")),
    Listing("permissions", "/api/vhosts/{vhost}/permissions",
            ("user", "configure", "write", "read"),
            _keys("user", "configure", "write", "read")),
    Listing("policies", "/api/policies/{vhost}",
            ("vhost", "name", "pattern", "apply-to", "definition", "priority"),
            _keys("vhost", "name", "pattern", "apply-to", "definition", "priority")),
]


# -- other commands -----------------------------------------------------------------------


def _alarms(nodes: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [{"node": n["name"], "resource": "memory", "type": "resource_alarm"}
            for n in nodes if n["mem_alarm"]]


def _section(title: str, lines: list[str]) -> list[str]:
    return ["", title, "", *(lines or ["(none)"])]


def cluster_status(ctl: Ctl, args: argparse.Namespace) -> None:
    overview = ctl.client.get("/api/overview")
    nodes = ctl.client.get("/api/nodes")
    partitions = {n["name"]: n["partitions"] for n in nodes if n["partitions"]}
    status = {
        "cluster_name": overview["cluster_name"],
        "disk_nodes": [n["name"] for n in nodes if n["type"] == "disc"],
        "ram_nodes": [n["name"] for n in nodes if n["type"] == "ram"],
        "running_nodes": [n["name"] for n in nodes if n["running"]],
        "alarms": _alarms(nodes),
        "partitions": partitions,
    }
    ctl.info(f"Cluster status of node {overview['node']} ...")
    ctl.document(status, [
        "Basics", "", f"Cluster name: {status['cluster_name']}",
        *_section("Disk Nodes", status["disk_nodes"]),
        *_section("Running Nodes", status["running_nodes"]),
        *_section("Alarms", [f"Memory alarm on node {a['node']}" for a in status["alarms"]]),
        *_section("Network Partitions",
                  [f"Node {node} cannot communicate with {', '.join(peers)}"
                   for node, peers in partitions.items()]),
    ])


def status(ctl: Ctl, args: argparse.Namespace) -> None:
    overview = ctl.client.get("/api/overview")
    node = ctl.client.get(f"/api/nodes/{quote(overview['node'])}")
    ctl.info(f"Status of node {node['name']} ...")
    ctl.document({**node, "product_name": overview["product_name"],
                  "product_version": overview["product_version"],
                  "listeners": overview["listeners"]}, [
        "Runtime", "",
        f"OS PID: {node['os_pid']}",
        f"Product name: {overview['product_name']}",
        f"Product version: {overview['product_version']}",
        f"Uptime (seconds): {node['uptime'] // 1000}",
        *_section("Broker application", [f"Running: {cell(node['running'])}"]),
        *_section("Memory", [f"Used by messages: {node['mem_used']} bytes",
                             f"High watermark: {node['mem_limit']} bytes"]),
        *_section("Alarms", [f"Memory alarm on node {a['node']}" for a in _alarms([node])]),
        *_section("Listeners", [
            f"Interface: {lst['ip_address']}, port: {lst['port']}, protocol: {lst['protocol']}"
            for lst in overview["listeners"]
        ]),
    ])


def set_policy(ctl: Ctl, args: argparse.Namespace) -> None:
    try:
        definition = json.loads(args.definition)
    except json.JSONDecodeError as error:
        raise CtlError(f"DEFINITION is not valid JSON: {error}", EX_USAGE) from None
    ctl.info(f'Setting policy "{args.name}" for pattern "{args.pattern}" to '
             f'"{args.definition}" with priority "{args.priority}" for vhost "{args.vhost}" ...')
    ctl.client.put(f"/api/policies/{quote(args.vhost)}/{quote(args.name)}", {
        "pattern": args.pattern, "definition": definition, "priority": args.priority,
        "apply-to": args.apply_to,
    })


def clear_policy(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Clearing policy "{args.name}" on vhost "{args.vhost}" ...')
    ctl.client.delete(f"/api/policies/{quote(args.vhost)}/{quote(args.name)}")


def _user_path(name: str) -> str:
    return f"/api/users/{quote(name)}"


def add_user(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Adding user "{args.user}" ...')
    # A PUT would overwrite an existing user; rabbitmqctl refuses instead.
    try:
        ctl.client.get(_user_path(args.user))
    except CtlError as error:
        if error.status != 404:
            raise
    else:
        raise CtlError(f"user '{args.user}' already exists", EX_SOFTWARE)
    ctl.client.put(_user_path(args.user), {"password": args.password, "tags": []})


def delete_user(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Deleting user "{args.user}" ...')
    ctl.client.delete(_user_path(args.user))


def set_user_tags(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Setting tags for user "{args.user}" to [{", ".join(args.tags)}] ...')
    user = ctl.client.get(_user_path(args.user))
    # Sending the stored hash back keeps the password as it is.
    keep = {k: user[k] for k in ("password_hash", "hashing_algorithm") if k in user}
    ctl.client.put(_user_path(args.user), {**keep, "tags": args.tags})


def change_password(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Changing password for user "{args.user}" ...')
    user = ctl.client.get(_user_path(args.user))
    ctl.client.put(_user_path(args.user), {"password": args.password, "tags": user["tags"]})


def add_vhost(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Adding vhost "{args.name}" ...')
    ctl.client.put(f"/api/vhosts/{quote(args.name)}", {})


def delete_vhost(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Deleting vhost "{args.name}" ...')
    ctl.client.delete(f"/api/vhosts/{quote(args.name)}")


def _permission_path(args: argparse.Namespace) -> str:
    return f"/api/permissions/{quote(args.vhost)}/{quote(args.user)}"


def set_permissions(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Setting permissions for user "{args.user}" in vhost "{args.vhost}" ...')
    ctl.client.put(_permission_path(args),
                   {"configure": args.conf, "write": args.write, "read": args.read})


def clear_permissions(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Clearing permissions for user "{args.user}" in vhost "{args.vhost}" ...')
    ctl.client.delete(_permission_path(args))


def _node_name(ctl: Ctl) -> str:
    return str(ctl.client.get("/api/overview")["node"])


def node_action(action: str, banner: str) -> Run:
    def run(ctl: Ctl, args: argparse.Namespace) -> None:
        node = _node_name(ctl)
        ctl.info(banner.format(node=node))
        ctl.client.post(f"/api/nodes/{quote(node)}/actions", {"action": action})

    return run


def forget_cluster_node(ctl: Ctl, args: argparse.Namespace) -> None:
    if args.offline:
        _forget_offline(ctl, args.data_dir, args.target)
        return
    node = _node_name(ctl)
    ctl.info(f"Removing node {args.target} from the cluster")
    ctl.client.post(f"/api/nodes/{quote(node)}/actions",
                    {"action": "forget_cluster_node", "node": args.target})


def _forget_offline(ctl: Ctl, data_dir: Path | None, target: str) -> None:
    """On a stopped node's data directory: it no longer waits for ``target`` at start,
    so it can start first when the node that stopped last cannot."""
    if data_dir is None:
        raise CtlError("--offline works on a stopped node's files: give its --data-dir",
                       EX_USAGE)
    file = LastRunningFile(data_dir / "cluster.json")
    try:
        waited_for = file.load()
    except BootError as error:
        raise CtlError(str(error), EX_DATAERR) from error
    if target not in waited_for:
        raise CtlError(f"{target} is not among the nodes {data_dir} waits for at start "
                       f"({', '.join(sorted(waited_for)) or 'none'})", EX_DATAERR)
    ctl.info(f"Removing node {target} from the cluster, offline, in {data_dir}")
    file.save(waited_for - {target})


def queue_action(action: str, banner: str) -> Run:
    def run(ctl: Ctl, args: argparse.Namespace) -> None:
        ctl.info(banner.format(name=args.name, vhost=args.vhost))
        ctl.client.post(f"/api/queues/{quote(args.vhost)}/{quote(args.name)}/actions",
                        {"action": action})

    return run
