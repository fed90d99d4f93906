"""Policy changes as faults, seen on the queue they apply to, and undone by heal."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from faults.management import Management
from faults.nemesis import InvalidOp, Op, PolicyNemesis
from faults.process.node import NodeProcess

HA = {"pattern": r"^ha\.", "definition": {"ha-mode": "all"}, "priority": 0, "apply-to": "all"}


def queue_policy(management: Management) -> tuple[str | None, dict[str, object]]:
    queue = management.call("GET", "/api/queues/%2F/ha.q")
    return queue["policy"], queue["effective_policy_definition"]


def test_policy_faults_change_the_queue_and_heal_restores_the_policies(
    node_factory: Callable[..., NodeProcess],
) -> None:
    management = Management(node_factory().mgmt_url)
    management.call("PUT", "/api/queues/%2F/ha.q", {"durable": True})
    management.put_policy("/", "ha", HA)
    nemesis = PolicyNemesis({"n1": management}, random.Random(1))

    changed = nemesis.invoke(Op("set-policy", {
        "name": "ha", "pattern": r"^ha\.", "definition": {"ha-mode": "exactly", "ha-params": 2}}))
    assert changed.type == "ok" and changed.value["node"] == "n1"
    assert queue_policy(management) == ("ha", {"ha-mode": "exactly", "ha-params": 2})
    nemesis.invoke(Op("set-policy", {"name": "urgent", "pattern": "^ha", "priority": 5,
                                     "definition": {"ha-sync-mode": "automatic"}}))
    assert queue_policy(management) == ("urgent", {"ha-sync-mode": "automatic"})
    nemesis.invoke(Op("clear-policy", {"name": "ha"}))
    assert management.policy("/", "ha") is None

    healed = nemesis.invoke(Op("heal"))
    assert healed.type == "ok"
    assert sorted(healed.value["restored"]) == ["n1:/:ha", "n1:/:urgent"]
    assert management.policy("/", "urgent") is None
    assert queue_policy(management) == ("ha", {"ha-mode": "all"})


def test_a_policy_the_broker_refuses_is_a_failed_op_and_changes_nothing(
    node_factory: Callable[..., NodeProcess],
) -> None:
    management = Management(node_factory().mgmt_url)
    nemesis = PolicyNemesis({"n1": management}, random.Random(1))
    refused = nemesis.invoke(Op("set-policy", {"name": "bad", "pattern": ".*",
                                               "definition": {"ha-mode": "some"}}))
    assert refused.type == "fail" and "400" in (refused.error or "")
    assert management.policy("/", "bad") is None
    with pytest.raises(InvalidOp):
        nemesis.invoke(Op("set-policy", {"pattern": ".*", "definition": {"ha-mode": "all"}}))
    nemesis.teardown()
