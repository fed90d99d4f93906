"""The broker's shared definitions as metadata records, and back.

Vhosts, users, permissions, policies, exchanges and bindings are replicated by value:
`records` reads them off a broker as ``key -> value``; `apply` makes one record (or
its deletion) true on a broker. Queues are not here: their records carry master and
mirrors and are written by the coordinator.
"""

from __future__ import annotations

from typing import Any

from cluster.core.broker import BrokerModel
from cluster.core.exchange import Exchange
from cluster.core.policy import Policy
from cluster.core.users import Permission, User
from cluster.core.vhost import PREDECLARED
from cluster.meta.replica import Key

KINDS = frozenset({"vhost", "user", "permission", "policy", "exchange", "binding"})


def records(broker: BrokerModel) -> dict[Key, dict[str, Any]]:
    out: dict[Key, dict[str, Any]] = {}
    for name, vhost in broker.vhosts.items():
        out[("vhost", name)] = {}
        for exchange in vhost.exchanges.values():
            if exchange.name in PREDECLARED:
                continue
            out[("exchange", name, exchange.name)] = {
                "type": exchange.type, "durable": exchange.durable,
                "auto_delete": exchange.auto_delete, "internal": exchange.internal,
                "arguments": exchange.arguments,
            }
        for exchange in vhost.exchanges.values():
            if exchange.name == "":
                continue
            for binding in exchange.bindings:
                out[("binding", name, exchange.name, binding.queue, binding.routing_key)] = {}
    for user in broker.users.users.values():
        out[("user", user.name)] = {"password_hash": user.password_hash, "tags": user.tags}
    for (user_name, vhost_name), p in broker.users.permissions.items():
        out[("permission", user_name, vhost_name)] = {
            "configure": p.configure, "write": p.write, "read": p.read}
    for policy in broker.policies.values():
        out[("policy", policy.vhost, policy.name)] = policy.to_json()
    return out


def apply(broker: BrokerModel, key: Key, value: dict[str, Any] | None) -> None:
    """Make a replicated record true locally (``value`` None: the record is gone)."""
    kind = key[0]
    if kind == "vhost":
        if value is None:
            broker.delete_vhost(key[1])
        else:
            broker.add_vhost(key[1])
    elif kind == "user":
        if value is None:
            broker.users.delete(key[1])
        else:
            broker.users.users[key[1]] = User(key[1], value["password_hash"], value["tags"])
    elif kind == "permission":
        if value is None:
            broker.users.permissions.pop((key[1], key[2]), None)
        else:
            broker.users.permissions[(key[1], key[2])] = Permission(
                value["configure"], value["write"], value["read"])
    elif kind == "policy":
        if value is None:
            broker.policies.pop((key[1], key[2]), None)
        else:
            broker.policies[(key[1], key[2])] = Policy.create(
                value["vhost"], value["name"], value["pattern"], value["definition"],
                value["priority"], value["apply-to"])
    elif kind == "exchange":
        _apply_exchange(broker, key, value)
    elif kind == "binding":
        _apply_binding(broker, key, value)
    else:
        raise ValueError(f"not a replicated definition: {key!r}")


def _apply_exchange(broker: BrokerModel, key: Key, value: dict[str, Any] | None) -> None:
    vhost = broker.vhosts.get(key[1])
    if vhost is None:
        return
    if value is None:
        vhost.exchanges.pop(key[2], None)
        return
    existing = vhost.exchanges.get(key[2])
    if existing is None:
        vhost.exchanges[key[2]] = Exchange(
            key[2], value["type"], value["durable"], value["auto_delete"], value["internal"],
            dict(value["arguments"]))


def _apply_binding(broker: BrokerModel, key: Key, value: dict[str, Any] | None) -> None:
    _, vhost_name, exchange_name, queue, routing_key = key
    vhost = broker.vhosts.get(vhost_name)
    exchange = vhost.exchanges.get(exchange_name) if vhost is not None else None
    if exchange is None:
        return
    if value is None:
        exchange.unbind(queue, routing_key)
    else:
        exchange.bind(queue, routing_key)
