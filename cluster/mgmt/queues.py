"""The management API's routes about a vhost's messaging objects: queues (declared,
deleted, and mirror sync started or cancelled), exchanges and bindings."""

from __future__ import annotations

from aiohttp import web

from cluster.amqp.errors import AMQPError, ChannelError
from cluster.core.hosted import HostedQueue
from cluster.core.vhost import VirtualHost
from cluster.ha.queue import ClusterQueue
from cluster.mgmt import shapes
from cluster.mgmt.access import Guard
from cluster.mgmt.protocol import (
    bad_request,
    done,
    field,
    from_amqp,
    json_reply,
    not_authorised,
    not_found,
    read_body,
    written,
)
from cluster.mgmt.resource import Guarding, Resource
from cluster.session.broker import Broker

MAX_NAME_BYTES = 255  # an AMQP short string


class QueueRoutes(Resource):
    def routes(self, guarded: Guarding) -> list[web.RouteDef]:
        vhost, admin = Guard.VHOST, Guard.ADMINISTRATOR
        return [
            web.get("/api/queues", guarded(vhost, self.list_queues)),
            web.get("/api/queues/{vhost}", guarded(vhost, self.list_queues)),
            web.get("/api/queues/{vhost}/{name}", guarded(vhost, self.get_queue)),
            web.put("/api/queues/{vhost}/{name}", guarded(vhost, self.put_queue)),
            web.delete("/api/queues/{vhost}/{name}", guarded(vhost, self.delete_queue)),
            web.post("/api/queues/{vhost}/{name}/actions", guarded(admin, self.queue_action)),
            web.get("/api/exchanges", guarded(vhost, self.list_exchanges)),
            web.get("/api/exchanges/{vhost}", guarded(vhost, self.list_exchanges)),
            web.get("/api/exchanges/{vhost}/{name}", guarded(vhost, self.get_exchange)),
            web.get("/api/bindings", guarded(vhost, self.list_bindings)),
            web.get("/api/bindings/{vhost}", guarded(vhost, self.list_bindings)),
        ]

    @staticmethod
    def _may_configure(broker: Broker, request: web.Request, vhost: VirtualHost,
                       queue: str) -> None:
        """A queue declared or deleted through the API needs what queue.declare and
        queue.delete need: configure permission on it (administrators too, as in
        RabbitMQ, whose API does these over a channel of the requesting user)."""
        try:
            broker.check_access(request["user"].name, vhost, "configure", "queue", queue)
        except ChannelError as error:
            raise not_authorised(error.reply_text) from error

    def _queue(self, broker: Broker, request: web.Request) -> HostedQueue:
        vhost = self._vhost(broker, request.match_info["vhost"])
        name = request.match_info["name"]
        queue = vhost.queues.get(name)
        if queue is None:
            raise not_found(f"no {vhost.describe('queue', name)}")
        return queue

    async def list_queues(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply([
            shapes.queue_json(broker, vhost.queues[name])
            for vhost in self._vhosts(broker, request)
            for name in sorted(vhost.queues)
        ])

    async def get_queue(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply(shapes.queue_json(broker, self._queue(broker, request)))

    async def put_queue(self, request: web.Request) -> web.Response:
        broker = self.broker()
        vhost = self._vhost(broker, request.match_info["vhost"])
        name = request.match_info["name"]
        self._may_configure(broker, request, vhost, name)
        size = len(name.encode("utf-8"))
        if size > MAX_NAME_BYTES:  # no AMQP client could name it (a short string)
            raise bad_request(f"queue name is {size} bytes long; at most {MAX_NAME_BYTES}")
        body = await read_body(request)
        created = name not in vhost.queues
        try:
            queue = vhost.declare_queue(
                name,
                connection_id=0,  # no connection owns it: connection ids start at 1
                passive=False,
                durable=field(body, "durable", bool, False),
                exclusive=False,
                auto_delete=field(body, "auto_delete", bool, False),
                arguments=field(body, "arguments", dict, {}),
            )
        except AMQPError as error:
            raise from_amqp(error) from error
        if created and queue.durable:
            self._persist(broker)
        return written(created)

    async def delete_queue(self, request: web.Request) -> web.Response:
        broker = self.broker()
        queue = self._queue(broker, request)
        vhost = broker.vhosts[queue.vhost]
        self._may_configure(broker, request, vhost, queue.name)
        try:
            broker.delete_queue(
                vhost, queue.name,
                if_unused=request.query.get("if-unused") == "true",
                if_empty=request.query.get("if-empty") == "true",
            )
        except AMQPError as error:
            raise from_amqp(error) from error
        self.node.flush()
        return done()

    async def queue_action(self, request: web.Request) -> web.Response:
        broker = self.broker()
        queue = self._queue(broker, request)
        action = field(await read_body(request), "action", str)
        if action not in ("sync", "cancel_sync"):
            raise bad_request(f"action must be one of sync, cancel_sync, got {action!r}")
        coordinator = self.node.coordinator
        if coordinator is None or not isinstance(queue, ClusterQueue) or not queue.record.mirrors:
            raise bad_request(f"queue '{queue.name}' in vhost '{queue.vhost}' is not mirrored")
        problem = (coordinator.sync(queue) if action == "sync"
                   else coordinator.cancel_sync(queue))
        if problem is not None:
            raise bad_request(f"queue '{queue.name}' in vhost '{queue.vhost}': {problem}")
        return done()

    async def list_exchanges(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply([
            shapes.exchange_json(vhost.name, vhost.exchanges[name])
            for vhost in self._vhosts(broker, request)
            for name in sorted(vhost.exchanges)
        ])

    async def get_exchange(self, request: web.Request) -> web.Response:
        broker = self.broker()
        vhost = self._vhost(broker, request.match_info["vhost"])
        name = request.match_info["name"]
        # The default exchange has no name, so URLs call it amq.default, as RabbitMQ's do.
        exchange = vhost.exchanges.get("" if name == "amq.default" else name)
        if exchange is None:
            raise not_found(f"no {vhost.describe('exchange', name)}")
        return json_reply(shapes.exchange_json(vhost.name, exchange))

    async def list_bindings(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply([row for vhost in self._vhosts(broker, request)
                           for row in shapes.bindings_json(vhost)])
