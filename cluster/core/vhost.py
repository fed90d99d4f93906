"""A virtual host: its exchanges, queues and bindings, with AMQP's declare rules.

Every rule violation raises the `ChannelError`/`ConnectionError_` RabbitMQ would send,
with RabbitMQ's reply text, so clients see the same errors they would there.
"""

from __future__ import annotations

from typing import Any, Protocol

from cluster.amqp.errors import (
    ACCESS_REFUSED,
    COMMAND_INVALID,
    NOT_FOUND,
    PRECONDITION_FAILED,
    RESOURCE_LOCKED,
    ChannelError,
    ConnectionError_,
)
from cluster.breakages import CORRECT, Breaks
from cluster.core.exchange import EXCHANGE_TYPES, Exchange
from cluster.core.hosted import HostedQueue
from cluster.core.queue import MessageLog, Queue


class QueueFactory(Protocol):
    def __call__(self, vhost: str, name: str, *, durable: bool, exclusive_owner: int | None,
                 auto_delete: bool, arguments: dict[str, Any]) -> HostedQueue: ...

# The queue arguments RabbitMQ compares when a queue is redeclared; any other argument
# is accepted and ignored (RabbitMQ's declare_args).
EQUIVALENCE_ARGUMENTS = frozenset({
    "x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
    "x-max-length", "x-max-length-bytes", "x-max-in-memory-length", "x-max-in-memory-bytes",
    "x-max-priority", "x-overflow", "x-queue-mode", "x-queue-master-locator",
    "x-single-active-consumer", "x-queue-type", "x-quorum-initial-group-size",
    "x-delivery-limit", "x-max-age", "x-stream-max-segment-size-bytes",
    "x-initial-cluster-size", "x-queue-leader-locator",
})

PREDECLARED = {
    "": "direct",
    "amq.direct": "direct",
    "amq.fanout": "fanout",
    "amq.topic": "topic",
}


def _flag(value: bool) -> str:
    return "true" if value else "false"


class VirtualHost:
    def __init__(
        self,
        name: str,
        log: MessageLog | None,
        new_queue: QueueFactory | None = None,
        breaks: Breaks = CORRECT,
    ) -> None:
        self.name = name
        self.log = log
        self.breaks = breaks
        self.exchanges: dict[str, Exchange] = {n: Exchange(n, t) for n, t in PREDECLARED.items()}
        self.queues: dict[str, HostedQueue] = {}
        self._new_queue: QueueFactory = new_queue or self._plain_queue

    def describe(self, kind: str, name: str) -> str:
        return f"{kind} '{name}' in vhost '{self.name}'"

    def _check_equivalent(self, kind: str, name: str, fields: list[tuple[str, Any, Any]]) -> None:
        """A redeclaration must match the existing entity (RabbitMQ's 'inequivalent arg')."""
        for field, theirs, ours in fields:
            if theirs != ours:
                raise ChannelError(
                    PRECONDITION_FAILED,
                    f"inequivalent arg '{field}' for {self.describe(kind, name)}: "
                    f"received '{theirs}' but current is '{ours}'",
                )

    # -- exchanges ----------------------------------------------------------------------

    def exchange(self, name: str) -> Exchange:
        exchange = self.exchanges.get(name)
        if exchange is None:
            raise ChannelError(NOT_FOUND, f"no {self.describe('exchange', name)}")
        return exchange

    def declare_exchange(
        self,
        name: str,
        type_: str,
        *,
        passive: bool,
        durable: bool,
        auto_delete: bool,
        internal: bool,
        arguments: dict[str, Any],
    ) -> Exchange:
        if name == "":  # passive too, as RabbitMQ
            raise ChannelError(ACCESS_REFUSED, "operation not permitted on the default exchange")
        if passive:
            return self.exchange(name)
        if type_ not in EXCHANGE_TYPES:
            raise ConnectionError_(COMMAND_INVALID, f"unknown exchange type '{type_}'")
        existing = self.exchanges.get(name)
        if existing is not None:  # amq.* ones too: RabbitMQ allows an equivalent redeclare
            self._check_equivalent("exchange", name, [
                ("type", type_, existing.type),
                ("durable", _flag(durable), _flag(existing.durable)),
                ("auto_delete", _flag(auto_delete), _flag(existing.auto_delete)),
                ("internal", _flag(internal), _flag(existing.internal)),
            ])
            return existing
        if name.startswith("amq."):
            raise ChannelError(
                ACCESS_REFUSED, f"exchange name '{name}' contains reserved prefix 'amq.*'"
            )
        exchange = Exchange(name, type_, durable, auto_delete, internal, dict(arguments))
        self.exchanges[name] = exchange
        return exchange

    def delete_exchange(self, name: str, if_unused: bool) -> None:
        if name in PREDECLARED:
            raise ChannelError(
                ACCESS_REFUSED, f"operation not permitted on {self.describe('exchange', name)}"
            )
        exchange = self.exchanges.get(name)
        if exchange is None:
            return
        if if_unused and exchange.bindings:
            raise ChannelError(
                PRECONDITION_FAILED, f"{self.describe('exchange', name)} in use"
            )
        del self.exchanges[name]

    # -- queues -------------------------------------------------------------------------

    def queue(self, name: str, connection_id: int | None = None) -> HostedQueue:
        """Look a queue up for use; exclusive queues only serve their own connection."""
        queue = self.queues.get(name)
        if queue is None:
            raise ChannelError(NOT_FOUND, f"no {self.describe('queue', name)}")
        if connection_id is not None:
            self.check_exclusive(queue, connection_id)
        return queue

    def check_exclusive(
        self, queue: HostedQueue, connection_id: int, exclusive: bool | None = None
    ) -> None:
        """Another connection's exclusive queue is locked. A redeclaration passes
        ``exclusive``: declaring with the other exclusivity is locked too (RabbitMQ's
        strict check)."""
        if self.breaks.exclusive_queue_shared:
            return
        owner = queue.exclusive_owner
        mismatch = exclusive is not None and exclusive != (owner is not None)
        if mismatch or (owner is not None and owner != connection_id):
            raise ChannelError(
                RESOURCE_LOCKED,
                "cannot obtain exclusive access to locked "
                f"{self.describe('queue', queue.name)}. It could be originally declared on "
                "another connection or the exclusive property value does not match that of "
                "the original declaration.",
            )

    def declare_queue(
        self,
        name: str,
        *,
        connection_id: int,
        passive: bool,
        durable: bool,
        exclusive: bool,
        auto_delete: bool,
        arguments: dict[str, Any],
        server_named: bool = False,
    ) -> HostedQueue:
        if passive:
            return self.queue(name, connection_id)
        if name.startswith("amq.") and not server_named:
            raise ChannelError(
                ACCESS_REFUSED,
                f"queue name '{name}' contains reserved prefix 'amq.*'",
            )
        existing = self.queues.get(name)
        if existing is not None:
            self.check_exclusive(existing, connection_id, exclusive)
            self._check_equivalent("queue", name, [
                ("durable", _flag(durable), _flag(existing.durable)),
                ("auto_delete", _flag(auto_delete), _flag(existing.auto_delete)),
                *((key, arguments.get(key), existing.arguments.get(key))
                  for key in sorted((set(arguments) | set(existing.arguments))
                                    & EQUIVALENCE_ARGUMENTS)),
            ])
            return existing
        return self.add_queue(self._new_queue(
            self.name, name, durable=durable,
            exclusive_owner=connection_id if exclusive else None,
            auto_delete=auto_delete, arguments=dict(arguments)))

    def _plain_queue(self, vhost: str, name: str, *, durable: bool,
                     exclusive_owner: int | None, auto_delete: bool,
                     arguments: dict[str, Any]) -> HostedQueue:
        return Queue(vhost, name, durable=durable, exclusive_owner=exclusive_owner,
                     auto_delete=auto_delete, arguments=arguments, log=self.log)

    def add_queue(self, queue: HostedQueue) -> HostedQueue:
        self.queues[queue.name] = queue
        return queue

    def delete_queue(self, name: str, *, if_unused: bool = False, if_empty: bool = False) -> int:
        """Delete a queue; returns how many messages it held. A missing queue is a no-op."""
        queue = self.queues.get(name)
        if queue is None:
            return 0
        if if_unused and queue.consumers:
            raise ChannelError(PRECONDITION_FAILED, f"{self.describe('queue', name)} in use")
        if if_empty and queue.ready_count:
            raise ChannelError(
                PRECONDITION_FAILED, f"{self.describe('queue', name)} not empty"
            )
        count = queue.ready_count
        del self.queues[name]
        for exchange in list(self.exchanges.values()):
            exchange.unbind_queue(name)
            if exchange.auto_delete and not exchange.bindings and name not in PREDECLARED:
                self.exchanges.pop(exchange.name, None)
        queue.drop_all()
        queue.cancel_consumers()
        return count

    # -- bindings and routing -----------------------------------------------------------

    def bind(self, queue: str, exchange: str, routing_key: str) -> None:
        if exchange == "":
            raise ChannelError(
                ACCESS_REFUSED, "operation not permitted on the default exchange"
            )
        self.exchange(exchange).bind(self.queue(queue).name, routing_key)

    def unbind(self, queue: str, exchange: str, routing_key: str) -> None:
        if exchange == "":
            raise ChannelError(
                ACCESS_REFUSED, "operation not permitted on the default exchange"
            )
        target = self.exchanges.get(exchange)
        if target is not None and target.unbind(queue, routing_key) and (
            target.auto_delete and not target.bindings
        ):
            del self.exchanges[exchange]

    def route(self, exchange: Exchange, routing_key: str) -> list[HostedQueue]:
        if exchange.name == "":
            queue = self.queues.get(routing_key)
            return [queue] if queue is not None else []
        queues = self.queues
        return [queues[name]
                for name in exchange.route(routing_key, self.breaks)
                if name in queues]

    # -- definitions --------------------------------------------------------------------

    def to_definitions(self) -> dict[str, Any]:
        """The durable part of this vhost, for the definitions file."""
        durable_queues = {q.name for q in self.queues.values() if q.durable}
        durable_exchanges = [
            e for e in self.exchanges.values() if e.durable and e.name not in PREDECLARED
        ]
        return {
            "queues": [
                {"name": q.name, "auto_delete": q.auto_delete, "arguments": q.arguments}
                for q in self.queues.values()
                if q.durable and q.exclusive_owner is None
            ],
            "exchanges": [
                {"name": e.name, "type": e.type, "auto_delete": e.auto_delete,
                 "internal": e.internal, "arguments": e.arguments}
                for e in durable_exchanges
            ],
            "bindings": [
                {"exchange": e.name, "queue": b.queue, "routing_key": b.routing_key}
                for e in self.exchanges.values()
                if e.name != "" and (e.durable or e.name in PREDECLARED)
                for b in e.bindings
                if b.queue in durable_queues
            ],
        }
