"""The JSON shapes of broker objects, as RabbitMQ's management API spells them.

Each kind of object is rendered in exactly one place here; the HTTP handlers and, through
the API, `mqctl` only ever see these dictionaries.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable
from typing import Any

from cluster.core.broker import BrokerModel
from cluster.core.exchange import Exchange
from cluster.core.hosted import HostedQueue
from cluster.core.queue import Queue
from cluster.core.users import Permission, User
from cluster.core.vhost import VirtualHost
from cluster.ha.queue import ClusterQueue
from cluster.ha.record import node_of
from cluster.session.channel import Channel
from cluster.session.connection import Connection, State
from cluster.session.consumer import ChannelConsumer

# RabbitMQ's connection states; the handshake states have no counterpart there.
_CONNECTION_STATES = {State.OPEN: "running", State.CLOSING: "closing", State.CLOSED: "closed"}

Address = tuple[str, int]


def _messages_here(queue: HostedQueue) -> Queue | None:
    """The messages this node holds for the queue: all of them on the master, a
    mirror's copy, or none."""
    if isinstance(queue, ClusterQueue):
        return queue.copy
    return queue if isinstance(queue, Queue) else None


def message_totals(queues: Iterable[HostedQueue]) -> dict[str, int]:
    ready = unacked = 0
    for queue in queues:
        held = _messages_here(queue)
        if held is not None:
            ready += held.ready_count
            unacked += len(held.unacked)
    return {
        "messages": ready + unacked,
        "messages_ready": ready,
        "messages_unacknowledged": unacked,
    }


def queue_json(broker: BrokerModel, queue: HostedQueue) -> dict[str, Any]:
    policy = broker.policy_for(queue)
    node, mirrors, synced = broker.config.node_name, [], []
    held = _messages_here(queue)
    if isinstance(queue, ClusterQueue):
        record = queue.record
        node = queue.master_node
        mirrors = [node_of(m) for m in record.mirrors]
        # a mirror promoted stays in the record's synced list: it is not a mirror now
        synced = [node_of(m) for m in record.synced if m in record.mirrors]
    return {
        "name": queue.name,
        "vhost": queue.vhost,
        "durable": queue.durable,
        "auto_delete": queue.auto_delete,
        "exclusive": queue.exclusive_owner is not None,
        "arguments": queue.arguments,
        "node": node,
        **message_totals([queue]),
        "consumers": len(held.consumers) if held is not None else len(queue.consumers),
        "policy": policy.name if policy is not None else None,
        "effective_policy_definition": policy.definition if policy is not None else {},
        "state": "running",
        "slave_nodes": mirrors,
        "synchronised_slave_nodes": synced,
        "local": _local_replica(queue, held),
    }


def _local_replica(queue: HostedQueue, held: Queue | None) -> dict[str, Any] | None:
    """This node's own replica, so that nodes' copies can be compared with each other."""
    if held is None:
        return None
    master = not isinstance(queue, ClusterQueue) or queue.is_master
    return {"role": "master" if master else "mirror",
            "messages": held.ready_count + len(held.unacked)}


def exchange_json(vhost: str, exchange: Exchange) -> dict[str, Any]:
    return {
        "name": exchange.name,
        "vhost": vhost,
        "type": exchange.type,
        "durable": exchange.durable,
        "auto_delete": exchange.auto_delete,
        "internal": exchange.internal,
        "arguments": exchange.arguments,
    }


def _binding_json(vhost: str, source: str, queue: str, routing_key: str) -> dict[str, Any]:
    return {
        "source": source,
        "vhost": vhost,
        "destination": queue,
        "destination_type": "queue",
        "routing_key": routing_key,
        "arguments": {},
        "properties_key": urllib.parse.quote(routing_key, safe="") or "~",
    }


def bindings_json(vhost: VirtualHost) -> list[dict[str, Any]]:
    """Every binding of a vhost, starting with the default exchange's implicit one per
    queue, which RabbitMQ lists too."""
    rows = [_binding_json(vhost.name, "", name, name) for name in vhost.queues]
    for exchange in vhost.exchanges.values():
        for binding in sorted(exchange.bindings, key=lambda b: (b.queue, b.routing_key)):
            rows.append(_binding_json(vhost.name, exchange.name, binding.queue,
                                      binding.routing_key))
    return rows


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port) if port.isdigit() else 0


def connection_name(connection: Connection, local: Address | None) -> str:
    """RabbitMQ's ``"peer -> local"`` form; ``local`` is the socket's own address."""
    return f"{connection.peer} -> {local[0]}:{local[1]}" if local else connection.peer


def _vhost_name(connection: Connection) -> str | None:
    # `Connection.vhost` is only assigned once connection.open succeeds.
    vhost: VirtualHost | None = getattr(connection, "vhost", None)
    return vhost.name if vhost is not None else None


def _running_state(connection: Connection) -> str:
    """RabbitMQ's names: blocked by the memory alarm, or held by flow control."""
    if connection.blocked:
        return "blocked"
    return "flow" if connection.has_published and connection.broker.peer_flow else "running"


def connection_json(node: str, connection: Connection, local: Address | None) -> dict[str, Any]:
    peer_host, peer_port = _host_port(connection.peer)
    state = _CONNECTION_STATES.get(connection.state, "starting")
    return {
        "name": connection_name(connection, local),
        "node": node,
        "user": connection.user,
        "vhost": _vhost_name(connection),
        "state": _running_state(connection) if state == "running" else state,
        "protocol": "AMQP 0-9-1",
        "peer_host": peer_host,
        "peer_port": peer_port,
        "host": local[0] if local else None,
        "port": local[1] if local else None,
        "channels": len(connection.channels),
        "frame_max": connection.frame_max,
        "channel_max": connection.channel_max,
        "timeout": connection.heartbeat,
        "client_properties": connection.client_properties,
    }


def _channel_details(channel: Channel, local: Address | None) -> dict[str, Any]:
    connection = channel.connection
    name = connection_name(connection, local)
    peer_host, peer_port = _host_port(connection.peer)
    return {
        "name": f"{name} ({channel.id})",
        "number": channel.id,
        "connection_name": name,
        "peer_host": peer_host,
        "peer_port": peer_port,
        "user": connection.user,
    }


def channel_json(node: str, channel: Channel, local: Address | None) -> dict[str, Any]:
    details = _channel_details(channel, local)
    return {
        "name": details["name"],
        "number": channel.id,
        "node": node,
        "user": channel.connection.user,
        "vhost": _vhost_name(channel.connection),
        "connection_details": {
            "name": details["connection_name"],
            "peer_host": details["peer_host"],
            "peer_port": details["peer_port"],
        },
        "state": "closing" if channel.closing else "running",
        "confirm": channel.confirm,
        "transactional": channel.transactional,
        "consumer_count": len(channel.consumers),
        "messages_unacknowledged": len(channel.unacked),
        "prefetch_count": channel.prefetch_count,
        "global_prefetch_count": channel.global_prefetch,
    }


def consumer_json(consumer: ChannelConsumer, local: Address | None) -> dict[str, Any]:
    return {
        "consumer_tag": consumer.tag,
        "queue": {"name": consumer.queue.name, "vhost": consumer.queue.vhost},
        "channel_details": _channel_details(consumer.channel, local),
        "ack_required": not consumer.no_ack,
        "exclusive": consumer.exclusive,
        "prefetch_count": consumer.prefetch,
        "arguments": consumer.arguments,
    }


def vhost_json(vhost: VirtualHost) -> dict[str, Any]:
    return {"name": vhost.name, **message_totals(vhost.queues.values())}


def user_json(user: User) -> dict[str, Any]:
    """With the password hash: only administrators read users, and the hash is what
    ``set_user_tags`` sends back to keep a password unchanged."""
    return {"name": user.name, "tags": list(user.tags), "password_hash": user.password_hash,
            "hashing_algorithm": "rabbit_password_hashing_sha256"}


def permission_json(user: str, vhost: str, permission: Permission) -> dict[str, Any]:
    return {
        "user": user,
        "vhost": vhost,
        "configure": permission.configure,
        "write": permission.write,
        "read": permission.read,
    }
