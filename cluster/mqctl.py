"""mqctl: rabbitmqctl's commands, spoken to a node's management API.

    mqctl [-n URL] [-u USER] [-P PASSWORD] [-q] [--formatter table|json] COMMAND [ARGS]

The node is addressed by its management URL (``-n``, else ``$MQCTL_URL``, else
http://127.0.0.1:15672); credentials come from ``-u``/``-P``, else ``$MQCTL_USER`` and
``$MQCTL_PASSWORD``, else guest/guest. Global options may also follow the command.

Output follows rabbitmqctl: an informational line (``-q`` drops it), then list commands
print a header line of field names and one tab-separated row per object, or a JSON array
with ``--formatter json``. Erlang pids have no counterpart here, so ``pid``,
``slave_pids`` and ``synchronised_slave_pids`` show the node a queue process runs on, as
``<rabbit@n1>``. Exit codes are rabbitmqctl's: 64 usage, 69 node unreachable or its app
stopped, 70 the node refused or failed the request.

``forget_cluster_node --offline --data-dir DIR NODE`` needs no node: it edits a stopped
node's files so that it no longer waits for NODE at start.

Only the standard library is used, so mqctl runs wherever Python does.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any, NoReturn

from cluster.peer.boot import BootError, LastRunningFile

EX_OK = 0
EX_USAGE = 64
EX_DATAERR = 65
EX_UNAVAILABLE = 69
EX_SOFTWARE = 70

DEFAULT_URL = "http://127.0.0.1:15672"


class CtlError(Exception):
    """A failed command: the message for ``Error: ...`` and rabbitmqctl's exit code.
    ``status`` is the HTTP status when the node answered."""

    def __init__(self, message: str, exit_code: int, status: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.status = status


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


class Client:
    """JSON over HTTP with basic auth; every failure becomes a `CtlError`."""

    def __init__(self, base_url: str, user: str, password: str, timeout: float) -> None:
        self.base_url = base_url.rstrip("/")
        self.user = user
        self.timeout = timeout
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self._authorization = f"Basic {token}"

    def request(self, method: str, path: str, body: Any = None) -> Any:
        url = self.base_url + path
        request = urllib.request.Request(
            url, method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": self._authorization, "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise self._refused(error) from None
        except urllib.error.URLError as error:
            reason = getattr(error.reason, "strerror", None) or error.reason
            raise CtlError(f"unable to reach node at {url}: {reason}", EX_UNAVAILABLE) from None
        except OSError as error:  # a timeout or reset after connecting
            raise CtlError(f"unable to reach node at {url}: {error}", EX_UNAVAILABLE) from None
        return json.loads(raw) if raw else None

    def _refused(self, error: urllib.error.HTTPError) -> CtlError:
        text = error.read().decode("utf-8", "replace")
        try:
            reason = json.loads(text)["reason"]
        except (ValueError, KeyError, TypeError):
            reason = text.strip() or f"HTTP {error.code} {error.reason}"
        if error.code == 401:
            reason = f"{reason} (user '{self.user}' at {self.base_url})"
        # 503 is the node saying its broker application is stopped: unavailable.
        exit_code = EX_UNAVAILABLE if error.code == 503 else EX_SOFTWARE
        return CtlError(str(reason), exit_code, error.code)

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def put(self, path: str, body: Any) -> None:
        self.request("PUT", path, body)

    def delete(self, path: str) -> None:
        self.request("DELETE", path)

    def post(self, path: str, body: Any) -> None:
        self.request("POST", path, body)


# -- output ---------------------------------------------------------------------------------


def cell(value: Any) -> str:
    """One table cell, written the way rabbitmqctl writes values."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, list):
        return "[" + ", ".join(cell(item) for item in value) + "]"
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


@dataclass
class Ctl:
    client: Client
    quiet: bool
    formatter: str

    def info(self, message: str) -> None:
        if not self.quiet and self.formatter == "table":
            print(message)

    def rows(self, fields: list[str], rows: list[list[Any]]) -> None:
        if self.formatter == "json":
            print(json.dumps([dict(zip(fields, row, strict=True)) for row in rows]))
            return
        print("\t".join(fields))
        for row in rows:
            print("\t".join(cell(value) for value in row))

    def document(self, data: Any, text: list[str]) -> None:
        """A non-tabular answer: ``data`` as JSON, or the text lines."""
        if self.formatter == "json":
            print(json.dumps(data))
        else:
            print("\n".join(text))

    def node_name(self) -> str:
        return str(self.client.get("/api/overview")["node"])


# -- list commands --------------------------------------------------------------------------

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
            found = ctl.client.get(self.path.format(vhost=_quote(args.vhost)))
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


# -- other commands -------------------------------------------------------------------------


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
    node = ctl.client.get(f"/api/nodes/{_quote(overview['node'])}")
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
    ctl.client.put(f"/api/policies/{_quote(args.vhost)}/{_quote(args.name)}", {
        "pattern": args.pattern, "definition": definition, "priority": args.priority,
        "apply-to": args.apply_to,
    })


def clear_policy(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Clearing policy "{args.name}" on vhost "{args.vhost}" ...')
    ctl.client.delete(f"/api/policies/{_quote(args.vhost)}/{_quote(args.name)}")


def _user_path(name: str) -> str:
    return f"/api/users/{_quote(name)}"


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
    ctl.client.put(f"/api/vhosts/{_quote(args.name)}", {})


def delete_vhost(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Deleting vhost "{args.name}" ...')
    ctl.client.delete(f"/api/vhosts/{_quote(args.name)}")


def _permission_path(args: argparse.Namespace) -> str:
    return f"/api/permissions/{_quote(args.vhost)}/{_quote(args.user)}"


def set_permissions(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Setting permissions for user "{args.user}" in vhost "{args.vhost}" ...')
    ctl.client.put(_permission_path(args),
                   {"configure": args.conf, "write": args.write, "read": args.read})


def clear_permissions(ctl: Ctl, args: argparse.Namespace) -> None:
    ctl.info(f'Clearing permissions for user "{args.user}" in vhost "{args.vhost}" ...')
    ctl.client.delete(_permission_path(args))


def _node_action(action: str, banner: str) -> Run:
    def run(ctl: Ctl, args: argparse.Namespace) -> None:
        node = ctl.node_name()
        ctl.info(banner.format(node=node))
        ctl.client.post(f"/api/nodes/{_quote(node)}/actions", {"action": action})

    return run


def forget_cluster_node(ctl: Ctl, args: argparse.Namespace) -> None:
    if args.offline:
        _forget_offline(ctl, args.data_dir, args.target)
        return
    node = ctl.node_name()
    ctl.info(f"Removing node {args.target} from the cluster")
    ctl.client.post(f"/api/nodes/{_quote(node)}/actions",
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


def _queue_action(action: str, banner: str) -> Run:
    def run(ctl: Ctl, args: argparse.Namespace) -> None:
        ctl.info(banner.format(name=args.name, vhost=args.vhost))
        ctl.client.post(f"/api/queues/{_quote(args.vhost)}/{_quote(args.name)}/actions",
                        {"action": action})

    return run


# -- command line ---------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EX_USAGE, f"Error: {message}\n")


def _add_globals(parser: argparse.ArgumentParser, *, after_command: bool) -> None:
    """Global options, accepted before and after the command as rabbitmqctl does; after
    it they default to nothing so they do not override what came before."""
    def default(value: Any) -> Any:
        return argparse.SUPPRESS if after_command else value

    parser.add_argument("-n", "--node", metavar="URL",
                        default=default(os.environ.get("MQCTL_URL", DEFAULT_URL)),
                        help="management URL of the node (env MQCTL_URL)")
    # Own dests: add_user's PASSWORD positional must not land in the login password.
    parser.add_argument("-u", "--username", dest="login_user",
                        default=default(os.environ.get("MQCTL_USER", "guest")))
    parser.add_argument("-P", "--password", dest="login_password",
                        default=default(os.environ.get("MQCTL_PASSWORD", "guest")))
    parser.add_argument("-q", "--quiet", action="store_true", default=default(False),
                        help="no informational messages")
    parser.add_argument("--formatter", choices=("table", "json"), default=default("table"))
    parser.add_argument("-t", "--timeout", type=float, default=default(60.0),
                        help="seconds to wait for the node (default 60)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mqctl", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_globals(parser, after_command=False)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, run: Run, help_text: str, *positionals: str,
                vhost: bool = False) -> argparse.ArgumentParser:
        """``positionals`` are attribute names; their metavar is the upper-case name."""
        sub = commands.add_parser(name, help=help_text, description=help_text)
        _add_globals(sub, after_command=True)
        if vhost:
            sub.add_argument("-p", "--vhost", default="/")
        for positional in positionals:
            sub.add_argument(positional, metavar=positional.upper())
        sub.set_defaults(run=run)
        return sub

    command("cluster_status", cluster_status, "show the cluster's nodes, alarms, partitions")
    command("status", status, "show this node's status")
    for listing in LISTINGS:
        sub = command(f"list_{listing.noun}", listing.run, f"list {listing.noun}",
                      vhost=listing.per_vhost)
        sub.add_argument("fields", nargs="*", metavar="FIELD",
                         help=f"one of: {' '.join(listing.fields)} "
                              f"(default: {' '.join(listing.defaults)})")
    sub = command("set_policy", set_policy, "set a policy", vhost=True)
    sub.add_argument("--priority", type=int, default=0)
    sub.add_argument("--apply-to", choices=("all", "queues", "exchanges"), default="all")
    for positional in ("name", "pattern", "definition"):
        sub.add_argument(positional, metavar=positional.upper())
    command("clear_policy", clear_policy, "clear a policy", "name", vhost=True)
    command("add_user", add_user, "add a user", "user", "password")
    command("delete_user", delete_user, "delete a user", "user")
    command("set_user_tags", set_user_tags, "replace a user's tags", "user").add_argument(
        "tags", nargs="*", metavar="TAG")
    command("change_password", change_password, "change a user's password", "user", "password")
    command("add_vhost", add_vhost, "add a vhost", "name")
    command("delete_vhost", delete_vhost, "delete a vhost", "name")
    command("set_permissions", set_permissions, "set a user's permissions in a vhost",
            "user", "conf", "write", "read", vhost=True)
    command("clear_permissions", clear_permissions, "clear a user's permissions in a vhost",
            "user", vhost=True)
    command("stop_app", _node_action("stop_app", "Stopping rabbit application on node {node} ..."),
            "stop the broker application, leaving the management API up")
    command("start_app", _node_action("start_app", "Starting node {node} ..."),
            "start the broker application")
    forget = command("forget_cluster_node", forget_cluster_node,
                     "remove a stopped node from the cluster", "target")
    forget.add_argument(
        "--offline", action="store_true",
        help="on a stopped node (its --data-dir): stop waiting for TARGET at start")
    forget.add_argument("--data-dir", type=Path, help="the stopped node's data directory")
    command("sync_queue",
            _queue_action("sync", "Synchronising queue '{name}' in vhost '{vhost}' ..."),
            "synchronise a mirrored queue's mirrors", "name", vhost=True)
    command("cancel_sync_queue",
            _queue_action("cancel_sync",
                          "Stopping synchronising queue '{name}' in vhost '{vhost}' ..."),
            "stop synchronising a mirrored queue", "name", vhost=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    url = args.node if "://" in args.node else f"http://{args.node}"
    ctl = Ctl(Client(url, args.login_user, args.login_password, args.timeout), args.quiet,
              args.formatter)
    try:
        args.run(ctl, args)
    except CtlError as error:
        print(f"Error: {error}", file=sys.stderr)
        return error.exit_code
    return EX_OK


if __name__ == "__main__":
    sys.exit(main())
