"""Admin operations as faults, through a node's management API.

`PolicyNemesis`: a policy changed or cleared mid-run (``PUT``/``DELETE
/api/policies/{vhost}/{name}``). The first time it touches a policy it records the
policy as it was, and ``heal`` puts it back (or deletes it, if it did not exist), then
reads it back to confirm.

`QueueAdminNemesis`: ``sync-queue`` (done when every mirror is listed synchronised;
with ``cancel_after`` in its value, asked once a mirror is listed unsynchronised,
cancelled that many seconds in, and done saying whether it was still going) and
``cancel-sync`` of a mirrored queue, and ``forget-node`` (``forget_cluster_node`` of a
stopped node). None of them leaves anything to undo: a forgotten node that starts again
rejoins with empty mirrors.

``node`` in an op's value names the node to ask; without it one is drawn.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from faults.management import Management, ManagementError

from .core import HEAL, InvalidOp, Op, option, require

# The fields of a policy that PUT takes, as GET returns them.
_FIELDS = ("pattern", "definition", "priority", "apply-to")

PolicyKey = tuple[str, str, str]  # node, vhost, name


class PolicyNemesis:
    fs = frozenset({"set-policy", "clear-policy", HEAL})

    def __init__(self, endpoints: Mapping[str, Management], rng: random.Random) -> None:
        self.endpoints = dict(endpoints)
        self.rng = rng
        self.saved: dict[PolicyKey, dict[str, Any] | None] = {}

    def setup(self) -> None:
        return None

    def invoke(self, op: Op) -> Op:
        require(op, self.fs)
        if op.f == HEAL:
            return self._heal(op)
        node = option(op, "node") or self.rng.choice(sorted(self.endpoints))
        if node not in self.endpoints:
            raise InvalidOp(f"unknown node {node!r}; nodes: {sorted(self.endpoints)}")
        vhost, name = option(op, "vhost", "/"), option(op, "name")
        if not isinstance(name, str) or not name:
            raise InvalidOp(f"{op.f} needs the policy's name")
        body = {key: option(op, key) for key in _FIELDS if option(op, key) is not None}
        if op.f == "set-policy" and ("pattern" not in body or "definition" not in body):
            raise InvalidOp("set-policy needs a pattern and a definition")
        value = {"node": node, "vhost": vhost, "name": name, **body}
        management = self.endpoints[node]
        try:
            key = (node, vhost, name)
            if key not in self.saved:
                self.saved[key] = _policy_body(management.policy(vhost, name))
            if op.f == "set-policy":
                management.put_policy(vhost, name, body)
            else:
                management.delete_policy(vhost, name)
        except ManagementError as exc:
            return op.fail(str(exc), value)
        return op.ok(value)

    def teardown(self) -> None:
        result = self._heal(Op(HEAL))
        if result.type != "ok":
            raise ManagementError("policy restore", None, result.error or "not restored")

    def _heal(self, op: Op) -> Op:
        restored: list[str] = []
        failed: dict[str, str] = {}
        for key, before in sorted(self.saved.items()):
            node, vhost, name = key
            management = self.endpoints[node]
            label = f"{node}:{vhost}:{name}"
            try:
                if before is None:
                    management.delete_policy(vhost, name)
                else:
                    management.put_policy(vhost, name, before)
                now = _policy_body(management.policy(vhost, name))
            except ManagementError as exc:
                failed[label] = str(exc)
                continue
            if now != before:
                failed[label] = f"reads back as {now}, not {before}"
                continue
            restored.append(label)
            del self.saved[key]
        value = {"restored": restored, "unrestored": failed}
        if failed:
            return op.fail(f"policies not restored: {failed}", value)
        return op.ok(value)


def _policy_body(policy: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if policy is None else {key: policy[key] for key in _FIELDS if key in policy}


class QueueAdminNemesis:
    """``sync-queue`` completes when the node asked lists every mirror of the queue
    synchronised (``ok``), or after ``sync_timeout`` seconds without (``info``: the
    sync started and may still be going). Without a ``node``, the drawn node is asked
    first and the others in turn while they do not answer (a node may be down)."""

    fs = frozenset({"sync-queue", "cancel-sync", "forget-node", HEAL})

    def __init__(self, endpoints: Mapping[str, Management], rng: random.Random, *,
                 sync_timeout: float = 30.0, poll: float = 0.1) -> None:
        self.endpoints = dict(endpoints)
        self.rng = rng
        self.sync_timeout = sync_timeout
        self.poll = poll

    def setup(self) -> None:
        return None

    def invoke(self, op: Op) -> Op:
        require(op, self.fs)
        if op.f == HEAL:
            return op.ok({})
        target = option(op, "target")
        if op.f == "forget-node":
            if target not in self.endpoints:
                raise InvalidOp(f"forget-node needs a known target node; nodes: "
                                f"{sorted(self.endpoints)}")
            askers = sorted(n for n in self.endpoints if n != target)
        else:
            askers = sorted(self.endpoints)
        node = option(op, "node")
        if node is not None and node not in askers:
            raise InvalidOp(f"node {node!r} cannot do {op.f}; choose from {askers}")
        vhost, name = option(op, "vhost", "/"), option(op, "queue")
        if op.f != "forget-node" and (not isinstance(name, str) or not name):
            raise InvalidOp(f"{op.f} needs the queue's name")
        if node is None:
            drawn = self.rng.choice(askers)
            candidates = [drawn, *(n for n in askers if n != drawn)]
        else:
            candidates = [node]
        error = ""
        # what a failed op acted on, as a done one says it: a run records the queue
        acted = ({"target": target} if op.f == "forget-node"
                 else {"vhost": vhost, "queue": name})
        for node in candidates:
            try:
                if op.f == "forget-node":
                    self.endpoints[node].forget_node(node, target)
                    return op.ok({"node": node, "target": target})
                return self._queue_action(op, node, vhost, name)
            except ManagementError as exc:
                error = str(exc)
                if exc.status is not None:
                    break  # the node answered no: asking another would not change that
        return op.fail(error, {"node": node, **acted})

    def _queue_action(self, op: Op, node: str, vhost: str, name: str) -> Op:
        management = self.endpoints[node]
        value = {"node": node, "vhost": vhost, "queue": name}
        if op.f == "cancel-sync":
            management.queue_action(vhost, name, "cancel_sync")
            return op.ok(value)
        cancel_after = option(op, "cancel_after")
        if cancel_after is not None:
            self._await_unsynchronised(management, vhost, name)
            management.queue_action(vhost, name, "sync")
            return self._cancelled(op, management, value, cancel_after)
        management.queue_action(vhost, name, "sync")
        deadline = time.monotonic() + self.sync_timeout
        while True:
            mirrors, synced = _sync_state(management, vhost, name)
            if mirrors is not None and set(mirrors) <= set(synced):
                return op.ok({**value, "synchronised": synced})
            if time.monotonic() >= deadline:
                return op.info(f"sync started, but {sorted(set(mirrors or ()) - set(synced))} not "
                               f"listed synchronised within {self.sync_timeout:g}s", value)
            time.sleep(self.poll)

    def _await_unsynchronised(self, management: Management, vhost: str, name: str) -> None:
        """A sync to cancel needs a mirror to copy to: wait, within ``sync_timeout``, for
        one the master lists unsynchronised (a restarted node rejoins a moment after its
        process is back)."""
        deadline = time.monotonic() + self.sync_timeout
        while time.monotonic() < deadline:
            mirrors, synced = _sync_state(management, vhost, name)
            if mirrors is not None and not set(mirrors) <= set(synced):
                return
            time.sleep(self.poll)

    def _cancelled(self, op: Op, management: Management, value: dict[str, Any],
                   after: Any) -> Op:
        """``cancel_sync_queue`` ``after`` seconds into the sync just asked for; done,
        with ``cancelled`` False when every mirror was listed synchronised by then."""
        if isinstance(after, bool) or not isinstance(after, int | float) or after < 0:
            raise InvalidOp(f"sync-queue: cancel_after must be seconds >= 0, got {after!r}")
        time.sleep(after)
        vhost, name = value["vhost"], value["queue"]
        try:
            management.queue_action(vhost, name, "cancel_sync")
        except ManagementError as exc:
            if exc.status is None:
                raise
        mirrors, synced = _sync_state(management, vhost, name)
        finished = mirrors is not None and set(mirrors) <= set(synced)
        return op.ok({**value, "cancelled": not finished, "synchronised": synced})

    def teardown(self) -> None:
        return None


def _sync_state(management: Management, vhost: str,
                name: str) -> tuple[list[str] | None, list[str]]:
    """The queue's mirrors (None when the node gave no master) and its synchronised
    mirrors, as the node says now."""
    try:
        info = management.call("GET", f"/api/queues/{quote(vhost, safe='')}/"
                                      f"{quote(name, safe='')}")
    except ManagementError:
        info = None
    if not isinstance(info, dict) or "node" not in info:
        return None, []
    return list(info.get("slave_nodes") or []), list(info.get("synchronised_slave_nodes") or [])
