"""``forget``: a node stopped gracefully, then removed from the cluster with
``forget_cluster_node`` asked of a running node.

The stop goes through a `ProcessNemesis`, so its heal (or a ``start``) brings the node
back, to rejoin as a new member would; the forget through a `QueueAdminNemesis`.
"""

from __future__ import annotations

import time

from faults.process import ProcessState

from .admin import QueueAdminNemesis
from .core import HEAL, InvalidOp, Op, option, require
from .process import ProcessNemesis


class ForgetNemesis:
    """``forget`` with ``{"node": NAME}``: ``ok`` once the node is stopped and a running
    node has forgotten it, ``info`` when it stopped but no node would forget it within
    ``timeout`` seconds (a peer refuses while it still counts the node running),
    ``fail`` when it was not running or did not stop."""

    fs = frozenset({"forget", HEAL})

    def __init__(self, process: ProcessNemesis, admin: QueueAdminNemesis, *,
                 timeout: float = 10.0, poll: float = 0.2) -> None:
        self.process = process
        self.admin = admin
        self.timeout = timeout
        self.poll = poll

    def setup(self) -> None:
        return None

    def invoke(self, op: Op) -> Op:
        require(op, self.fs)
        if op.f == HEAL:
            return op.ok({})  # the process nemesis's heal starts the node again
        node = option(op, "node")
        if not isinstance(node, str):
            raise InvalidOp(f"forget needs the node's name, got {node!r}")
        if self.process.control.state(node) is not ProcessState.RUNNING:
            # the record has it stop at the forget: a node already down went otherwise
            return op.fail(f"{node} is not running: forget stops a running node",
                           {"node": node})
        stopped = self.process.invoke(Op("stop", {"nodes": [node]}))
        if stopped.type != "ok":
            return op.fail(stopped.error or "not stopped", {"node": node})
        deadline = time.monotonic() + self.timeout
        while True:
            forgotten = self.admin.invoke(Op("forget-node", {"target": node}))
            if forgotten.type == "ok":
                return op.ok({"node": node, "forgotten_by": forgotten.value["node"]})
            if time.monotonic() >= deadline:
                return op.info(f"{node} stopped, but not forgotten: {forgotten.error}",
                               {"node": node})
            time.sleep(self.poll)

    def teardown(self) -> None:
        return None
