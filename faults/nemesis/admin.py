"""Admin operations as faults, through a node's management API.

`PolicyNemesis`: a policy changed or cleared mid-run (``PUT``/``DELETE
/api/policies/{vhost}/{name}``). The first time it touches a policy it records the
policy as it was, and ``heal`` puts it back (or deletes it, if it did not exist), then
reads it back to confirm.

`QueueAdminNemesis`: ``sync-queue`` and ``cancel-sync`` of a mirrored queue, and
``forget-node`` (``forget_cluster_node`` of a stopped node). None of them leaves
anything to undo: a forgotten node that starts again rejoins with empty mirrors.

``node`` in an op's value names the node to ask; without it one is drawn.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

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
    fs = frozenset({"sync-queue", "cancel-sync", "forget-node", HEAL})

    def __init__(self, endpoints: Mapping[str, Management], rng: random.Random) -> None:
        self.endpoints = dict(endpoints)
        self.rng = rng

    def setup(self) -> None:
        return None

    def invoke(self, op: Op) -> Op:
        require(op, self.fs)
        if op.f == HEAL:
            return op.ok({})
        if op.f == "forget-node":
            target = option(op, "target")
            if target not in self.endpoints:
                raise InvalidOp(f"forget-node needs a known target node; nodes: "
                                f"{sorted(self.endpoints)}")
            askers = sorted(n for n in self.endpoints if n != target)
        else:
            askers = sorted(self.endpoints)
        node = option(op, "node") or self.rng.choice(askers)
        if node not in askers:
            raise InvalidOp(f"node {node!r} cannot do {op.f}; choose from {askers}")
        management = self.endpoints[node]
        try:
            if op.f == "forget-node":
                management.forget_node(node, target)
                return op.ok({"node": node, "target": target})
            vhost, name = option(op, "vhost", "/"), option(op, "queue")
            if not isinstance(name, str) or not name:
                raise InvalidOp(f"{op.f} needs the queue's name")
            management.queue_action(vhost, name, "sync" if op.f == "sync-queue"
                                    else "cancel_sync")
        except ManagementError as exc:
            return op.fail(str(exc), {"node": node})
        return op.ok({"node": node, "vhost": vhost, "queue": name})

    def teardown(self) -> None:
        return None
