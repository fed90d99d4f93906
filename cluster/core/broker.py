"""The broker model of one node, I/O-free: vhosts and their queues, users, policies,
durability bookkeeping and the definitions file's content.

It knows neither its clients (`cluster.session` builds the broker that serves them on
this model) nor the cluster: a cluster layer (`cluster.ha`) makes itself
``BrokerModel.cluster`` and is seen only as a `ClusterLayer`.
"""

from __future__ import annotations

import base64
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from cluster.amqp.errors import ACCESS_REFUSED, ChannelError
from cluster.breakages import Breaks
from cluster.core.clients import ClientChannel
from cluster.core.hosted import HostedQueue
from cluster.core.message import Message
from cluster.core.policy import Policy, effective_policy
from cluster.core.queue import MessageLog, Queue
from cluster.core.users import Access, Permission, Users
from cluster.core.vhost import VirtualHost
from cluster.events import NodeEvent, PolicyCleared, PolicySet, StoreFailure

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


class ClusterLayer(Protocol):
    """The cluster layer as the broker model drives it (`cluster.ha`'s coordinator)."""

    # The broker's shared definitions changed: it sends the changes to its peers.
    entities_dirty: bool

    def new_queue(self, vhost: str, name: str, *, durable: bool, exclusive_owner: int | None,
                  auto_delete: bool, arguments: dict[str, Any]) -> HostedQueue:
        """A channel here declared a new queue."""
        ...

    def policy_changed(self) -> None: ...

    def after_input(self) -> None: ...

    def on_durable(self, lsn: int) -> None: ...

    def successions(self) -> dict[str, dict[str, list[str]]]:
        """Per vhost and durable queue, its succession, for the definitions file."""
        ...

    def channel_closed(self, channel: ClientChannel) -> None:
        """Its publishes' confirms are no longer wanted."""
        ...


class BrokerModel:
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
        self._save_definitions = save_definitions  # durable on return (`save_definitions`)
        # A durable definition changed since the definitions were last taken to be saved:
        # the shell saves them once per batch of input, off the loop (`take_definitions`).
        self.definitions_dirty = False
        self.users = Users()
        self.vhosts: dict[str, VirtualHost] = {}
        self.policies: dict[tuple[str, str], Policy] = {}
        self.durable_lsn = 0
        # Set by the cluster layer when the node is part of a cluster.
        self.cluster: ClusterLayer | None = None
        # Per vhost and queue, the succession the definitions file was loaded with
        # (`Coordinator.successions`), kept in the file until a coordinator saves anew.
        self.saved_successions: dict[str, dict[str, list[str]]] = {}
        self.add_vhost("/")

    # -- setup --------------------------------------------------------------------------

    def add_vhost(self, name: str) -> VirtualHost:
        vhost = self.vhosts.get(name)
        if vhost is None:
            vhost = self.vhosts[name] = VirtualHost(name, self.log, self._new_queue,
                                                       self.config.breaks)
        return vhost

    def delete_vhost(self, name: str) -> bool:
        vhost = self.vhosts.get(name)
        if vhost is None:
            return False
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

    def generated_name(self, prefix: str) -> str:
        token = base64.urlsafe_b64encode(self._rng.randbytes(16)).decode().rstrip("=")
        return prefix + token

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
                   auto_delete: bool, arguments: dict[str, Any]) -> HostedQueue:
        if self.cluster is not None:
            return self.cluster.new_queue(vhost, name, durable=durable,
                                          exclusive_owner=exclusive_owner,
                                          auto_delete=auto_delete, arguments=arguments)
        return Queue(vhost, name, durable=durable, exclusive_owner=exclusive_owner,
                     auto_delete=auto_delete, arguments=arguments, log=self.log,
                     requeue_at_tail=self.config.breaks.requeue_at_tail)

    def policy_for(self, queue: HostedQueue) -> Policy | None:
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

    # -- durability ---------------------------------------------------------------------

    def after_input(self) -> None:
        """Called by the shell once per batch of input."""
        if self.cluster is not None:
            self.cluster.after_input()

    def on_durable(self, lsn: int) -> None:
        self.durable_lsn = max(self.durable_lsn, lsn)
        if self.cluster is not None:
            self.cluster.on_durable(self.durable_lsn)

    def on_store_failure(self, error: Exception) -> None:
        """A commit failed."""
        self.events.emit(StoreFailure(error=str(error)))

    # -- definitions --------------------------------------------------------------------

    def definitions_changed(self) -> None:
        """A durable definition changed: the cluster layer passes it on and the shell
        saves the definitions after this batch of input, however many changed."""
        if self.cluster is not None:
            self.cluster.entities_dirty = True
        self.definitions_dirty = True

    def save_definitions(self) -> None:
        """Save now, for a caller whose next effect relies on the file."""
        if self._save_definitions is not None:
            self._save_definitions(self.take_definitions())

    def take_definitions(self) -> dict[str, Any]:
        """What the definitions file is to hold now, for whoever saves it next."""
        self.definitions_dirty = False
        definitions = self.to_definitions()
        definitions["successions"] = (self.cluster.successions() if self.cluster
                                      else self.saved_successions)
        return definitions

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
