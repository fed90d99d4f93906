"""mqctl, the command-line client of the management API (`cluster.mgmt`): rabbitmqctl's
commands, spoken to a node over HTTP. `main` is the ``mqctl`` console script, also run
by ``python -m cluster.mqctl``; what it offers its user is `cli.DESCRIPTION`, which
``mqctl --help`` prints.

Its modules import only the standard library and `cluster.peer.boot`, so that mqctl
runs wherever Python does.
"""

from cluster.mqctl.cli import main

__all__ = ["main"]
