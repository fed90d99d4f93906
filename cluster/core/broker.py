"""The broker of one node, I/O-free: vhosts, users, policies, connections, confirms,
durability bookkeeping and the memory alarm.

The asyncio shell (`cluster.node`) feeds it sockets' bytes, time and the store's
durable LSN, and drains `dirty` connections' outboxes.
"""

from __future__ import annotations

import base64
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from cluster.amqp.channel import Channel
from cluster.amqp.connection import Connection, State
from cluster.amqp.errors import ACCESS_REFUSED, AMQPError, ChannelError, ConnectionError_
from cluster.breakages import Breaks
from cluster.core.error_log import ErrorLogLimit
from cluster.core.message import Message
from cluster.core.policy import Policy, effective_policy
from cluster.core.queue import MessageLog, Queue
from cluster.core.users import Access, Permission, Users
from cluster.core.vhost import VirtualHost
from cluster.events import (
    ChannelErrorReported,
    ClientErrorsSuppressed,
    ConnectionErrorReported,
    MemoryAlarm,
    NodeEvent,
    PolicyCleared,
    PolicySet,
    StoreFailure,
)

if TYPE_CHECKING:
    from cluster.ha.confirms import ConfirmWait
    from cluster.ha.coordinator import Coordinator
    from cluster.ha.queue import ClusterQueue

PRODUCT = "mirrorchaos"
VERSION = "0.1.0"


@dataclass
class BrokerConfig:
    node_name: str = "rabbit@localhost"
    cluster_name: str = "mirrorchaos"
    frame_max: int = 131072
    channel_max: int = 2047
    heartbeat: int = 60
    max_message_size: int = 128 * 1024 * 1024
    # Bytes of message bodies held (in queues, being received, in open transactions)
    # above which publishers are blocked.
    memory_high_watermark: int = 1 << 30
    # Seconds a client may leave its output unread before its connection is dropped,
    # as RabbitMQ's send_timeout: its socket is not read meanwhile.
    send_timeout: int = 15
    # Users who may log in (AMQP and management API) only from a loopback address, as
    # RabbitMQ's loopback_users: guest's password is no secret.
    loopback_users: list[str] = field(default_factory=lambda: ["guest"])
    # Deliberate defects, for showing that the harness catches a broken broker
    # (``--break``; see cluster.breakages). All off in every real use.
    breaks: Breaks = field(default_factory=Breaks)


class EventSink(Protocol):
    def emit(self, event: NodeEvent) -> None: ...


class NullEvents:
    def emit(self, event: NodeEvent) -> None:
        return None


class Broker:
    def __init__(
        self,
        config: BrokerConfig,
        *,
        log: MessageLog | None = None,
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
        events: EventSink | None = None,
        save_definitions: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        self.config = config
        self.log = log
        self.now = clock
        self._rng = rng or random.Random()
        self.events: EventSink = events or NullEvents()
        self._save_definitions = save_definitions
        self.users = Users()
        self.vhosts: dict[str, VirtualHost] = {}
        self.policies: dict[tuple[str, str], Policy] = {}
        self.connections: dict[int, Connection] = {}
        self._next_connection_id = 1
        self.dirty: set[Connection] = set()
        self.confirm_dirty: set[Channel] = set()
        self.durable_lsn = 0
        self.alarm = False
        self.peer_flow = False  # set_peer_flow
        # Bodies channels hold outside any queue: content still arriving, messages
        # published in a transaction not yet committed.
        self.held_bytes = 0
        self.error_log_limit = ErrorLogLimit()
        # Set by cluster.ha.Coordinator when the node is part of a cluster.
        self.cluster: Coordinator | None = None
        # Per vhost and queue, the succession the definitions file was loaded with
        # (`Coordinator.successions`), kept in the file until a coordinator saves anew.
        self.saved_successions: dict[str, dict[str, list[str]]] = {}
        self.add_vhost("/")

    # -- setup --------------------------------------------------------------------------

    def add_vhost(self, name: str) -> VirtualHost:
        vhost = self.vhosts.get(name)
        if vhost is None:
            vhost = self.vhosts[name] = VirtualHost(name, self.log, self._queue_deleted,
                                                    self._new_queue)
        return vhost

    def delete_vhost(self, name: str) -> bool:
        vhost = self.vhosts.get(name)
        if vhost is None:
            return False
        for connection in list(self.connections.values()):
            if connection.state is State.OPEN and connection.vhost is vhost:
                connection.force_close(f"vhost '{name}' is deleted")
        for queue in list(vhost.queues):
            vhost.delete_queue(queue)
        del self.vhosts[name]
        self.users.permissions = {k: v for k, v in self.users.permissions.items()
                                  if k[1] != name}
        self.policies = {k: v for k, v in self.policies.items() if k[0] != name}
        return True

    def add_user(self, name: str, password: str, tags: list[str] | None = None) -> None:
        self.users.add(name, password, tags)

    def set_permissions(self, user: str, vhost: str, permission: Permission) -> None:
        self.users.set_permissions(user, vhost, permission)

    def check_access(self, user: str, vhost: VirtualHost, access: Access, kind: str,
                     resource: str) -> None:
        """``access`` (configure, write or read) to the ``kind`` (queue or exchange)
        named ``resource``, by ``user``'s permissions on ``vhost``: for AMQP clients and
        management API writes alike."""
        if not self.users.allows(user, vhost.name, access, resource):
            raise ChannelError(
                ACCESS_REFUSED,
                f"access to {vhost.describe(kind, resource)} refused for user '{user}'",
            )

    def server_properties(self) -> dict[str, Any]:
        return {
            "product": PRODUCT,
            "version": VERSION,
            "platform": "Python",
            "cluster_name": self.config.cluster_name,
            "capabilities": {
                "publisher_confirms": True,
                "exchange_exchange_bindings": False,
                "basic.nack": True,
                "consumer_cancel_notify": True,
                "connection.blocked": True,
                "consumer_priorities": False,
                "authentication_failure_close": True,
                "per_consumer_qos": True,
                "direct_reply_to": False,
            },
        }

    def generated_name(self, prefix: str) -> str:
        token = base64.urlsafe_b64encode(self._rng.randbytes(16)).decode().rstrip("=")
        return prefix + token

    # -- connections --------------------------------------------------------------------

    def open_connection(self, peer: str) -> Connection:
        connection_id = self._next_connection_id
        self._next_connection_id += 1
        connection = Connection(self, connection_id, peer)
        self.connections[connection_id] = connection
        return connection

    def forget_connection(self, connection: Connection) -> None:
        self.connections.pop(connection.id, None)
        self.dirty.discard(connection)
        for vhost in self.vhosts.values():
            for queue in list(vhost.queues.values()):
                if queue.exclusive_owner == connection.id:
                    self.delete_queue(vhost, queue.name)

    def record_connection_error(self, connection: Connection, error: ConnectionError_) -> None:
        self._record_error(ConnectionErrorReported, connection, 0, error)

    def record_channel_error(
        self, connection: Connection, channel: int, error: ChannelError
    ) -> None:
        self._record_error(ChannelErrorReported, connection, channel, error)

    def _record_error(self, event: type[ConnectionErrorReported | ChannelErrorReported],
                      connection: Connection, channel: int, error: AMQPError) -> None:
        if self.error_log_limit.admit(connection.peer_host, self.now()):
            self.events.emit(event(connection=connection.id, peer=connection.peer,
                                   channel=channel, code=error.code, text=error.reply_text))

    def _report_suppressed_errors(self) -> None:
        limit = self.error_log_limit
        for host, count in limit.ended(self.now()):
            self.events.emit(ClientErrorsSuppressed(host=host, count=count,
                                                    window=limit.window, burst=limit.burst))

    # -- queues -------------------------------------------------------------------------

    def delete_queue(
        self, vhost: VirtualHost, name: str, *, if_unused: bool = False, if_empty: bool = False
    ) -> int:
        queue = vhost.queues.get(name)
        count = vhost.delete_queue(name, if_unused=if_unused, if_empty=if_empty)
        if queue is not None and queue.durable:
            self.definitions_changed()
        return count

    def _new_queue(self, vhost: str, name: str, *, durable: bool, exclusive_owner: int | None,
                   auto_delete: bool, arguments: dict[str, Any]) -> Queue | ClusterQueue:
        if self.cluster is not None:
            return self.cluster.new_queue(vhost, name, durable=durable,
                                          exclusive_owner=exclusive_owner,
                                          auto_delete=auto_delete, arguments=arguments)
        return Queue(vhost, name, durable=durable, exclusive_owner=exclusive_owner,
                     auto_delete=auto_delete, arguments=arguments, log=self.log,
                     requeue_at_tail=self.config.breaks.requeue_at_tail)

    def _queue_deleted(self, queue: Queue | ClusterQueue) -> None:
        consumers: list[Any] = list(queue.consumers)
        for consumer in consumers:
            consumer.queue_deleted()
        queue.consumers.clear()

    def policy_for(self, queue: Queue | ClusterQueue) -> Policy | None:
        if queue.exclusive_owner is not None:
            return None
        policies = list(self.policies.values())
        if self.config.breaks.policy_priority_inverted:
            policies = [replace(p, priority=-p.priority) for p in policies]
        return effective_policy(policies, queue.vhost, queue.name)

    def set_policy(self, policy: Policy) -> None:
        self.policies[(policy.vhost, policy.name)] = policy
        self.events.emit(PolicySet(vhost=policy.vhost, name=policy.name,
                                   pattern=policy.pattern, apply_to=policy.apply_to,
                                   definition=policy.definition, priority=policy.priority))
        self.definitions_changed()
        if self.cluster is not None:
            self.cluster.policy_changed()

    def clear_policy(self, vhost: str, name: str) -> bool:
        if self.policies.pop((vhost, name), None) is None:
            return False
        self.events.emit(PolicyCleared(vhost=vhost, name=name))
        self.definitions_changed()
        if self.cluster is not None:
            self.cluster.policy_changed()
        return True

    # -- durability and confirms --------------------------------------------------------

    def after_input(self) -> None:
        """Called by the shell once per batch of input: confirms for transient publishes
        go out in one ``basic.ack multiple``, and the memory alarm is re-evaluated."""
        if self.cluster is not None:
            self.cluster.after_input()
        self.release_confirms()
        self.check_memory()

    def cluster_wait(self, sender: str, pubid: int) -> ConfirmWait:
        assert self.cluster is not None
        return self.cluster.wait_for(sender, pubid)

    def confirm_waits_changed(self, sender: str) -> None:
        """Another node confirmed one of ``sender``'s publishes."""
        _, connection_id, channel_id = sender.split("|")
        connection = self.connections.get(int(connection_id))
        channel = connection.channels.get(int(channel_id)) if connection is not None else None
        if channel is not None:
            self.confirm_dirty.add(channel)

    def release_confirms(self) -> None:
        if not self.confirm_dirty:
            return
        durable = self.durable_lsn
        still_waiting = set()
        for channel in self.confirm_dirty:
            channel.release_confirms(durable)
            if channel.pending_confirms or channel.pending_commits:
                still_waiting.add(channel)
        self.confirm_dirty = still_waiting

    def on_durable(self, lsn: int) -> None:
        self.durable_lsn = max(self.durable_lsn, lsn)
        if self.cluster is not None:
            self.cluster.on_durable(self.durable_lsn)
        self.release_confirms()

    def on_store_failure(self, error: Exception) -> None:
        """A commit failed: nothing staged can be promised durable, so nack every pending
        confirm rather than leave publishers waiting for ever."""
        self.events.emit(StoreFailure(error=str(error)))
        for channel in self.confirm_dirty:
            channel.fail_confirms()
        self.confirm_dirty.clear()

    def message_bytes(self) -> int:
        """What the memory alarm counts: bodies in queues and bodies channels hold."""
        return self.held_bytes + sum(
            q.message_bytes for v in self.vhosts.values() for q in v.queues.values())

    def set_peer_flow(self, backlogged: bool) -> None:
        """A link to a peer holds more than the peer takes: publishers are not read until
        it drains (RabbitMQ's connection state "flow"), so that the link is never cut
        for being slow."""
        self.peer_flow = backlogged
        self.dirty.update(c for c in self.connections.values() if c.has_published)

    def check_memory(self) -> None:
        used = self.message_bytes()
        if not self.alarm and used > self.config.memory_high_watermark:
            self.alarm = True
            self.events.emit(MemoryAlarm(state="set", used=used,
                                         limit=self.config.memory_high_watermark))
            for connection in self.connections.values():
                connection.block()
        elif self.alarm and used <= self.config.memory_high_watermark:
            self.alarm = False
            self.events.emit(MemoryAlarm(state="cleared", used=used,
                                         limit=self.config.memory_high_watermark))
            for connection in self.connections.values():
                connection.unblock()

    def tick(self) -> None:
        for connection in list(self.connections.values()):
            connection.tick()
        self.check_memory()
        self._report_suppressed_errors()

    def shutdown(self, reason: str) -> None:
        for connection in list(self.connections.values()):
            connection.force_close(reason)

    # -- definitions --------------------------------------------------------------------

    def definitions_changed(self) -> None:
        if self.cluster is not None:
            self.cluster.entities_dirty = True
        self.save_definitions()

    def save_definitions(self) -> None:
        if self._save_definitions is not None:
            definitions = self.to_definitions()
            definitions["successions"] = (self.cluster.successions() if self.cluster
                                          else self.saved_successions)
            self._save_definitions(definitions)

    def to_definitions(self) -> dict[str, Any]:
        return {
            **self.users.to_definitions(),
            "vhosts": {name: vhost.to_definitions() for name, vhost in self.vhosts.items()},
            "policies": [p.to_json() for p in self.policies.values()],
        }

    def load_definitions(self, definitions: dict[str, Any]) -> None:
        self.users.load_definitions(definitions)
        self.saved_successions = definitions.get("successions", {})
        for name, content in definitions.get("vhosts", {}).items():
            vhost = self.add_vhost(name)
            for exchange in content.get("exchanges", []):
                vhost.declare_exchange(
                    exchange["name"], exchange["type"], passive=False, durable=True,
                    auto_delete=exchange["auto_delete"], internal=exchange["internal"],
                    arguments=exchange["arguments"],
                )
            for queue in content.get("queues", []):
                vhost.add_queue(Queue(
                    name, queue["name"], durable=True, auto_delete=queue["auto_delete"],
                    arguments=queue["arguments"], log=self.log,
                    requeue_at_tail=self.config.breaks.requeue_at_tail,
                ))
            for binding in content.get("bindings", []):
                vhost.exchanges[binding["exchange"]].bind(binding["queue"], binding["routing_key"])
        for policy in definitions.get("policies", []):
            self.policies[(policy["vhost"], policy["name"])] = Policy.create(
                policy["vhost"], policy["name"], policy["pattern"], policy["definition"],
                policy["priority"], policy["apply-to"],
            )

    def restore_messages(self, recovered: dict[str, list[tuple[int, bytes]]]) -> int:
        """Put recovered persistent messages back in their durable queues. Messages of a
        queue that no longer exists are dropped from the store."""
        restored = 0
        for key, entries in recovered.items():
            vhost_name, _, queue_name = key.partition("\x00")
            vhost = self.vhosts.get(vhost_name)
            queue = vhost.queues.get(queue_name) if vhost is not None else None
            if not isinstance(queue, Queue):
                if self.log is not None:
                    self.log.stage_drop_queue(key)
                continue
            queue.restore((seq, Message.decode(payload)) for seq, payload in entries)
            restored += len(entries)
        return restored
