"""mqctl's command line: its global options and commands, and `main`, which parses one
and runs it."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from cluster.mqctl.client import Client
from cluster.mqctl.commands import (
    LISTINGS,
    Run,
    add_user,
    add_vhost,
    change_password,
    clear_permissions,
    clear_policy,
    cluster_status,
    delete_user,
    delete_vhost,
    forget_cluster_node,
    node_action,
    queue_action,
    set_permissions,
    set_policy,
    set_user_tags,
    status,
)
from cluster.mqctl.errors import EX_OK, EX_USAGE, CtlError
from cluster.mqctl.output import Ctl

# What ``mqctl --help`` says before the commands.
DESCRIPTION = """mqctl: rabbitmqctl's commands, spoken to a node's management API.

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

DEFAULT_URL = "http://127.0.0.1:15672"


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
    parser = _Parser(prog="mqctl", description=DESCRIPTION,
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
    command("stop_app", node_action("stop_app", "Stopping rabbit application on node {node} ..."),
            "stop the broker application, leaving the management API up")
    command("start_app", node_action("start_app", "Starting node {node} ..."),
            "start the broker application")
    forget = command("forget_cluster_node", forget_cluster_node,
                     "remove a stopped node from the cluster", "target")
    forget.add_argument(
        "--offline", action="store_true",
        help="on a stopped node (its --data-dir): stop waiting for TARGET at start")
    forget.add_argument("--data-dir", type=Path, help="the stopped node's data directory")
    command("sync_queue",
            queue_action("sync", "Synchronising queue '{name}' in vhost '{vhost}' ..."),
            "synchronise a mirrored queue's mirrors", "name", vhost=True)
    command("cancel_sync_queue",
            queue_action("cancel_sync",
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
