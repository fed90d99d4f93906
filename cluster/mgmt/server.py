"""The management HTTP server: routes, authentication, errors (see the package docstring
for the API it serves)."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import BasicAuth, hdrs, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler, LooseHeaders, Middleware

from cluster.amqp.connection import Connection
from cluster.amqp.errors import NOT_FOUND, AMQPError, ChannelError
from cluster.core.broker import PRODUCT, VERSION, Broker
from cluster.core.policy import Policy, PolicyError
from cluster.core.users import Permission, User, Users, may_log_in_from
from cluster.core.vhost import AnyQueue, VirtualHost
from cluster.ha.queue import ClusterQueue
from cluster.mgmt import access, shapes
from cluster.mgmt.access import Guard, Listing

if TYPE_CHECKING:
    from cluster.node import Node

log = logging.getLogger("mirrorchaos.mgmt")

REALM = 'Basic realm="RabbitMQ Management"'
# RabbitMQ's two 401s: credentials wrong or missing (a browser asks for others), and a
# user who is known but may not do this.
NOT_AUTHENTICATED = "not_authorized"
NOT_AUTHORISED = "not_authorised"
HASHING_ALGORITHM = "rabbit_password_hashing_sha256"
HASH_BYTES = 4 + 32  # salt and SHA-256 digest, as `cluster.core.users.hash_password` stores
READS = ("GET", "HEAD")

T = TypeVar("T")


class ApiError(Exception):
    """An answer other than success, rendered as RabbitMQ's ``{"error", "reason"}``."""

    def __init__(self, status: int, error: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.error = error
        self.reason = reason


MAX_NAME_BYTES = 255  # an AMQP short string


def bad_request(reason: str) -> ApiError:
    return ApiError(400, "bad_request", reason)


def not_found(reason: str) -> ApiError:
    return ApiError(404, "Object Not Found", reason)


def not_authorised(reason: str) -> ApiError:
    return ApiError(401, NOT_AUTHORISED, reason)


def _from_amqp(error: AMQPError) -> ApiError:
    """A broker rule the request broke, with the reply text an AMQP client would get."""
    if error.code == NOT_FOUND:
        return not_found(error.reply_text)
    return bad_request(error.reply_text)


def _jsonable(value: Any) -> Any:
    # Client field tables (client_properties, arguments) may carry bytes, decimals and
    # timestamps, which JSON has no type for.
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _dumps(data: Any) -> str:
    return json.dumps(data, default=_jsonable)


def _json(data: Any) -> web.Response:
    return web.json_response(data, dumps=_dumps)


def _error_response(status: int, error: str, reason: str,
                    headers: LooseHeaders | None = None) -> web.Response:
    return web.json_response({"error": error, "reason": reason}, status=status, headers=headers)


def _written(created: bool) -> web.Response:
    return web.Response(status=201 if created else 204)


def _done() -> web.Response:
    return web.Response(status=204)


# -- request bodies ---------------------------------------------------------------------

_KINDS: dict[type, str] = {
    bool: "true or false", str: "a string", int: "an integer", dict: "a JSON object",
}
_REQUIRED: Any = object()


async def _body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as error:  # JSONDecodeError, or bytes that are no Unicode text
        raise bad_request(f"body is not valid JSON: {error}") from error
    except RecursionError:
        raise bad_request("body is JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise bad_request("body must be a JSON object")
    return body


def _get(body: dict[str, Any], key: str, kind: type[T], default: T = _REQUIRED) -> T:
    if key not in body:
        if default is _REQUIRED:
            raise bad_request(f"{key} is required")
        return default
    value = body[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise bad_request(f"{key} must be {_KINDS[kind]}, got {_dumps(value)}")
    return value


def _tags(value: Any) -> list[str]:
    # RabbitMQ takes tags both as "a,b" and as ["a", "b"].
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise bad_request(
            f"tags must be a comma-separated string or a list of strings, got {_dumps(value)}"
        )
    return [tag.strip() for tag in value if tag.strip()]


def _password_hash(body: dict[str, Any]) -> str:
    algorithm = _get(body, "hashing_algorithm", str, HASHING_ALGORITHM)
    if algorithm != HASHING_ALGORITHM:
        raise bad_request(f"hashing_algorithm must be {HASHING_ALGORITHM}, got {algorithm!r}")
    value = _get(body, "password_hash", str)
    try:
        if len(base64.b64decode(value, validate=True)) == HASH_BYTES:
            return value
    except binascii.Error:
        pass
    raise bad_request(
        f"password_hash must be base64 of a 4-byte salt and a SHA-256 digest, got {value!r}"
    )


def _permission(body: dict[str, Any]) -> Permission:
    patterns = []
    for key in ("configure", "write", "read"):
        pattern = _get(body, key, str)
        try:
            re.compile(pattern)
        except re.error as error:
            raise bad_request(f"{key} {pattern!r} is not a valid regex: {error}") from error
        patterns.append(pattern)
    return Permission(*patterns)


# -- the API ------------------------------------------------------------------------------


class ManagementApi:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.started = time.monotonic()

    @property
    def node_name(self) -> str:
        return self.node.config.broker.node_name

    def routes(self) -> list[web.RouteDef]:
        """Every route with its `Guard` (the table in the README)."""
        guarded = self._guarded
        management, vhost, policies = Guard.MANAGEMENT, Guard.VHOST, Guard.POLICIES
        monitoring, admin = Guard.MONITORING, Guard.ADMINISTRATOR
        return [
            web.get("/api/overview", guarded(management, self.overview)),
            web.get("/api/nodes", guarded(monitoring, self.list_nodes)),
            web.get("/api/nodes/{node}", guarded(monitoring, self.get_node)),
            web.post("/api/nodes/{node}/actions", guarded(admin, self.node_action)),
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
            web.get("/api/connections", guarded(management, self.list_connections)),
            web.get("/api/channels", guarded(management, self.list_channels)),
            web.get("/api/consumers", guarded(management, self.list_consumers)),
            web.get("/api/vhosts", guarded(management, self.list_vhosts)),
            web.get("/api/vhosts/{vhost}", guarded(admin, self.get_vhost)),
            web.put("/api/vhosts/{vhost}", guarded(admin, self.put_vhost)),
            web.delete("/api/vhosts/{vhost}", guarded(admin, self.delete_vhost)),
            web.get("/api/vhosts/{vhost}/permissions", guarded(admin, self.list_permissions)),
            web.get("/api/users", guarded(admin, self.list_users)),
            web.get("/api/users/{user}", guarded(admin, self.get_user)),
            web.put("/api/users/{user}", guarded(admin, self.put_user)),
            web.delete("/api/users/{user}", guarded(admin, self.delete_user)),
            web.get("/api/permissions", guarded(admin, self.list_permissions)),
            web.get("/api/permissions/{vhost}/{user}", guarded(admin, self.get_permission)),
            web.put("/api/permissions/{vhost}/{user}", guarded(admin, self.put_permission)),
            web.delete("/api/permissions/{vhost}/{user}",
                       guarded(admin, self.delete_permission)),
            web.get("/api/policies", guarded(vhost, self.list_policies)),
            web.get("/api/policies/{vhost}", guarded(vhost, self.list_policies)),
            web.get("/api/policies/{vhost}/{name}", guarded(policies, self.get_policy)),
            web.put("/api/policies/{vhost}/{name}", guarded(policies, self.put_policy)),
            web.delete("/api/policies/{vhost}/{name}", guarded(policies, self.delete_policy)),
        ]

    # -- authentication ------------------------------------------------------------------

    def _users(self) -> Users:
        broker = self.node.broker
        if broker is not None:
            return broker.users
        # The app is stopped; the users it saved are the ones it will start with.
        users = Users()
        users.load_definitions(self.node.definitions.load() or {})
        return users

    def authenticate(self, header: str | None, peer_host: str) -> User:
        """The user the request's credentials name, if she may use the API at all from
        ``peer_host`` (the checks and reasons of RabbitMQ, in its order)."""
        if header is None:
            raise ApiError(401, NOT_AUTHENTICATED, "HTTP basic authentication required")
        try:
            credentials = BasicAuth.decode(header)
        except ValueError as error:
            raise ApiError(401, NOT_AUTHENTICATED,
                           f"bad Authorization header: {error}") from error
        user = self._users().authenticate(credentials.login, credentials.password)
        if user is None:
            raise ApiError(401, NOT_AUTHENTICATED, "Login failed")
        if not may_log_in_from(user.name, peer_host, self.node.config.broker.loopback_users):
            raise not_authorised("User can only log in via localhost")
        return user

    def _guarded(self, guard: Guard,
                 handler: Callable[[web.Request], Awaitable[web.Response]]) -> Handler:
        """``handler``, answering 401 to a user whose tags ``guard`` refuses."""
        async def guarded(request: web.Request) -> web.StreamResponse:
            user: User = request["user"]
            vhost = request.match_info.get("vhost")
            broker = self.node.broker
            opens_vhost = (vhost is None
                           or self._users().can_access_vhost(user.name, vhost)
                           or (broker is not None and vhost not in broker.vhosts))
            reason = access.refusal(guard, user.tags, opens_vhost)
            if reason is not None:
                raise not_authorised(reason)
            return await handler(request)

        return guarded

    # -- lookups -------------------------------------------------------------------------

    def broker(self) -> Broker:
        broker = self.node.broker
        if broker is None:
            raise ApiError(503, "app_stopped",
                           f"the broker application on node {self.node_name} is stopped")
        return broker

    @staticmethod
    def _vhost(broker: Broker, name: str) -> VirtualHost:
        vhost = broker.vhosts.get(name)
        if vhost is None:
            raise not_found(f"no vhost '{name}'")
        return vhost

    def _vhosts(self, broker: Broker, request: web.Request,
                listing: Listing = Listing.OBJECTS) -> list[VirtualHost]:
        """The vhost named in the path (the route's guard let the user in), or when the
        path names none every vhost whose objects ``listing`` shows her."""
        name = request.match_info.get("vhost")
        if name is not None:
            return [self._vhost(broker, name)]
        user: User = request["user"]
        everything = access.sees_all(listing, user.tags)
        return [broker.vhosts[n] for n in sorted(broker.vhosts)
                if everything or broker.users.can_access_vhost(user.name, n)]

    @staticmethod
    def _connections(broker: Broker, request: web.Request) -> list[Connection]:
        """The connections whose details the user may see: hers, or all of them."""
        user: User = request["user"]
        everyone = access.sees_all(Listing.CLIENTS, user.tags)
        return [connection for connection in broker.connections.values()
                if everyone or connection.user == user.name]

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

    def _queue(self, broker: Broker, request: web.Request) -> AnyQueue:
        vhost = self._vhost(broker, request.match_info["vhost"])
        name = request.match_info["name"]
        queue = vhost.queues.get(name)
        if queue is None:
            raise not_found(f"no {vhost.describe('queue', name)}")
        return queue

    def _this_node(self, request: web.Request) -> None:
        # Without a cluster the only node this one knows is itself.
        name = request.match_info["node"]
        if name != self.node_name:
            raise not_found(f"no node '{name}'")

    def _local(self, connection: Connection) -> shapes.Address | None:
        transport = self.node.transports.get(connection)
        sockname = transport.get_extra_info("sockname") if transport is not None else None
        return (str(sockname[0]), int(sockname[1])) if sockname else None

    def _persist(self, broker: Broker) -> None:
        """Save the definitions after a durable change, then let clients hear about it
        (closed connections, cancelled consumers)."""
        broker.definitions_changed()
        self.node.flush()

    # -- overview and nodes --------------------------------------------------------------

    def _listeners(self) -> list[dict[str, Any]]:
        settings = self.node.settings
        listeners = [{"node": self.node_name, "protocol": "http", "ip_address": settings.host,
                      "port": settings.mgmt_port}]
        if self.node.broker is not None:
            listeners.insert(0, {"node": self.node_name, "protocol": "amqp",
                                 "ip_address": settings.host, "port": settings.amqp_port})
        return listeners

    def _node_json(self) -> dict[str, Any]:
        broker = self.node.broker
        peers = self.node.peers
        return {
            "name": self.node_name,
            "type": "disc",
            "running": broker is not None,
            "os_pid": str(os.getpid()),
            "uptime": int((time.monotonic() - self.started) * 1000),
            "mem_used": broker.message_bytes() if broker is not None else 0,
            "mem_limit": self.node.config.broker.memory_high_watermark,
            "mem_alarm": broker.alarm if broker is not None else False,
            "partitions": sorted(peers.detector.partitions) if peers is not None else [],
        }

    def _peer_json(self, peer: str) -> dict[str, Any]:
        """What this node knows of a peer: whether its broker app runs, as far as the
        links to it tell."""
        peers = self.node.peers
        assert peers is not None
        state = peers.detector.peers[peer]
        return {"name": peer, "type": "disc", "running": state.up and state.app_running,
                "partitions": []}

    async def overview(self, request: web.Request) -> web.Response:
        broker = self.node.broker
        shape: dict[str, Any] = {
            "product_name": PRODUCT,
            "product_version": VERSION,
            "management_version": VERSION,
            "cluster_name": self.node.config.broker.cluster_name,
            "node": self.node_name,
            "running": broker is not None,
            "listeners": self._listeners(),
        }
        if broker is not None:
            # What the user may see: the vhosts and connections her listings show.
            vhosts = self._vhosts(broker, request, Listing.VHOSTS)
            connections = self._connections(broker, request)
            channels = [ch for c in connections for ch in c.channels.values()]
            queues = [q for v in vhosts for q in v.queues.values()]
            shape["object_totals"] = {
                "connections": len(connections),
                "channels": len(channels),
                "exchanges": sum(len(v.exchanges) for v in vhosts),
                "queues": len(queues),
                "consumers": sum(len(q.consumers) for q in queues),
            }
            shape["queue_totals"] = shapes.message_totals(queues)
        return _json(shape)

    async def list_nodes(self, request: web.Request) -> web.Response:
        peers = self.node.peers
        others = sorted(peers.settings.peers) if peers is not None else []
        return _json([self._node_json(), *(self._peer_json(peer) for peer in others)])

    async def get_node(self, request: web.Request) -> web.Response:
        self._this_node(request)
        return _json(self._node_json())

    async def node_action(self, request: web.Request) -> web.Response:
        """stop_app / start_app: answered once the action has completed, so a client
        that sent stop_app knows the broker is down when it hears back."""
        self._this_node(request)
        body = await _body(request)
        action = _get(body, "action", str)
        if action == "forget_cluster_node":
            coordinator = self.node.coordinator
            if coordinator is None:
                raise bad_request("this node is not in a cluster, or its app is stopped")
            problem = coordinator.forget(_get(body, "node", str))
            if problem is not None:
                raise bad_request(problem)
            return _done()
        steps = {"stop_app": self.node.stop_app, "start_app": self.node.start_app}
        step = steps.get(action)
        if step is None:
            raise bad_request(f"action must be one of {', '.join(steps)}, "
                              f"forget_cluster_node, got {action!r}")
        await step()
        return _done()

    # -- queues, exchanges, bindings -----------------------------------------------------

    async def list_queues(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json([
            shapes.queue_json(broker, vhost.queues[name])
            for vhost in self._vhosts(broker, request)
            for name in sorted(vhost.queues)
        ])

    async def get_queue(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json(shapes.queue_json(broker, self._queue(broker, request)))

    async def put_queue(self, request: web.Request) -> web.Response:
        broker = self.broker()
        vhost = self._vhost(broker, request.match_info["vhost"])
        name = request.match_info["name"]
        self._may_configure(broker, request, vhost, name)
        size = len(name.encode("utf-8"))
        if size > MAX_NAME_BYTES:  # no AMQP client could name it (a short string)
            raise bad_request(f"queue name is {size} bytes long; at most {MAX_NAME_BYTES}")
        body = await _body(request)
        created = name not in vhost.queues
        try:
            queue = vhost.declare_queue(
                name,
                connection_id=0,  # no connection owns it: connection ids start at 1
                passive=False,
                durable=_get(body, "durable", bool, False),
                exclusive=False,
                auto_delete=_get(body, "auto_delete", bool, False),
                arguments=_get(body, "arguments", dict, {}),
            )
        except AMQPError as error:
            raise _from_amqp(error) from error
        if created and queue.durable:
            self._persist(broker)
        return _written(created)

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
            raise _from_amqp(error) from error
        self.node.flush()
        return _done()

    async def queue_action(self, request: web.Request) -> web.Response:
        broker = self.broker()
        queue = self._queue(broker, request)
        action = _get(await _body(request), "action", str)
        if action not in ("sync", "cancel_sync"):
            raise bad_request(f"action must be one of sync, cancel_sync, got {action!r}")
        coordinator = self.node.coordinator
        if coordinator is None or not isinstance(queue, ClusterQueue) or not queue.record.mirrors:
            raise bad_request(f"queue '{queue.name}' in vhost '{queue.vhost}' is not mirrored")
        problem = (coordinator.sync(queue) if action == "sync"
                   else coordinator.cancel_sync(queue))
        if problem is not None:
            raise bad_request(f"queue '{queue.name}' in vhost '{queue.vhost}': {problem}")
        return _done()

    async def list_exchanges(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json([
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
        return _json(shapes.exchange_json(vhost.name, exchange))

    async def list_bindings(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json([row for vhost in self._vhosts(broker, request)
                      for row in shapes.bindings_json(vhost)])

    # -- connections, channels, consumers ------------------------------------------------

    async def list_connections(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json([
            shapes.connection_json(self.node_name, connection, self._local(connection))
            for connection in self._connections(broker, request)
        ])

    async def list_channels(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json([
            shapes.channel_json(self.node_name, channel, self._local(connection))
            for connection in self._connections(broker, request)
            for channel in connection.channels.values()
        ])

    async def list_consumers(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json([
            shapes.consumer_json(consumer, self._local(connection))
            for connection in self._connections(broker, request)
            for channel in connection.channels.values()
            for consumer in channel.consumers.values()
        ])

    # -- vhosts --------------------------------------------------------------------------

    async def list_vhosts(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json([shapes.vhost_json(vhost)
                      for vhost in self._vhosts(broker, request, Listing.VHOSTS)])

    async def get_vhost(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json(shapes.vhost_json(self._vhost(broker, request.match_info["vhost"])))

    async def put_vhost(self, request: web.Request) -> web.Response:
        broker = self.broker()
        name = request.match_info["vhost"]
        created = name not in broker.vhosts
        if created:
            broker.add_vhost(name)
            # As RabbitMQ does: its creator may use it, through AMQP and queue writes here.
            broker.set_permissions(request["user"].name, name, Permission())
            self._persist(broker)
        return _written(created)

    async def delete_vhost(self, request: web.Request) -> web.Response:
        broker = self.broker()
        name = request.match_info["vhost"]
        if not broker.delete_vhost(name):
            raise not_found(f"no vhost '{name}'")
        self._persist(broker)
        return _done()

    # -- users and permissions -----------------------------------------------------------

    @staticmethod
    def _user(broker: Broker, name: str) -> User:
        user = broker.users.users.get(name)
        if user is None:
            raise not_found(f"no user '{name}'")
        return user

    async def list_users(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json([shapes.user_json(broker.users.users[name])
                      for name in sorted(broker.users.users)])

    async def get_user(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return _json(shapes.user_json(self._user(broker, request.match_info["user"])))

    async def put_user(self, request: web.Request) -> web.Response:
        """Body: ``tags`` and exactly one of ``password`` and ``password_hash`` (the
        latter is how a client changes tags and keeps the password, as with RabbitMQ)."""
        broker = self.broker()
        name = request.match_info["user"]
        body = await _body(request)
        tags = _tags(body.get("tags", []))
        if ("password" in body) == ("password_hash" in body):
            raise bad_request("give exactly one of password and password_hash")
        created = name not in broker.users.users
        if "password" in body:
            broker.add_user(name, _get(body, "password", str), tags)
        else:
            broker.users.users[name] = User(name, _password_hash(body), tags)
        self._persist(broker)
        return _written(created)

    async def delete_user(self, request: web.Request) -> web.Response:
        broker = self.broker()
        name = request.match_info["user"]
        if not broker.users.delete(name):
            raise not_found(f"no user '{name}'")
        self._persist(broker)
        return _done()

    async def list_permissions(self, request: web.Request) -> web.Response:
        broker = self.broker()
        wanted = {vhost.name for vhost in self._vhosts(broker, request)}
        return _json([
            shapes.permission_json(user, vhost, permission)
            for (user, vhost), permission in sorted(broker.users.permissions.items())
            if vhost in wanted
        ])

    def _permission_key(self, broker: Broker, request: web.Request) -> tuple[str, str]:
        vhost = self._vhost(broker, request.match_info["vhost"])
        user = self._user(broker, request.match_info["user"])
        return user.name, vhost.name

    async def get_permission(self, request: web.Request) -> web.Response:
        broker = self.broker()
        user, vhost = self._permission_key(broker, request)
        permission = broker.users.permissions.get((user, vhost))
        if permission is None:
            raise not_found(f"user '{user}' has no permissions in vhost '{vhost}'")
        return _json(shapes.permission_json(user, vhost, permission))

    async def put_permission(self, request: web.Request) -> web.Response:
        broker = self.broker()
        user, vhost = self._permission_key(broker, request)
        permission = _permission(await _body(request))
        created = (user, vhost) not in broker.users.permissions
        broker.set_permissions(user, vhost, permission)
        self._persist(broker)
        return _written(created)

    async def delete_permission(self, request: web.Request) -> web.Response:
        broker = self.broker()
        user, vhost = self._permission_key(broker, request)
        if broker.users.permissions.pop((user, vhost), None) is None:
            raise not_found(f"user '{user}' has no permissions in vhost '{vhost}'")
        self._persist(broker)
        return _done()

    # -- policies ------------------------------------------------------------------------

    async def list_policies(self, request: web.Request) -> web.Response:
        broker = self.broker()
        wanted = {vhost.name for vhost in self._vhosts(broker, request)}
        return _json([policy.to_json() for key, policy in sorted(broker.policies.items())
                      if key[0] in wanted])

    def _policy(self, broker: Broker, request: web.Request) -> Policy:
        vhost = self._vhost(broker, request.match_info["vhost"])
        name = request.match_info["name"]
        policy = broker.policies.get((vhost.name, name))
        if policy is None:
            raise not_found(f"no policy '{name}' in vhost '{vhost.name}'")
        return policy

    async def get_policy(self, request: web.Request) -> web.Response:
        return _json(self._policy(self.broker(), request).to_json())

    async def put_policy(self, request: web.Request) -> web.Response:
        broker = self.broker()
        vhost = self._vhost(broker, request.match_info["vhost"])
        name = request.match_info["name"]
        body = await _body(request)
        try:
            policy = Policy.create(
                vhost.name, name, _get(body, "pattern", str), body.get("definition"),
                _get(body, "priority", int, 0), _get(body, "apply-to", str, "all"),
            )
        except PolicyError as error:
            raise bad_request(str(error)) from error
        created = (vhost.name, name) not in broker.policies
        broker.set_policy(policy)  # saves the definitions itself
        self.node.flush()
        return _written(created)

    async def delete_policy(self, request: web.Request) -> web.Response:
        broker = self.broker()
        policy = self._policy(broker, request)
        broker.clear_policy(policy.vhost, policy.name)  # saves the definitions itself
        self.node.flush()
        return _done()


# -- middleware and start-up --------------------------------------------------------------


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as error:
        headers = {hdrs.WWW_AUTHENTICATE: REALM} if error.error == NOT_AUTHENTICATED else None
        return _error_response(error.status, error.error, error.reason, headers)
    except web.HTTPException as error:  # aiohttp's own: no such route, method not allowed
        if error.status < 400:
            raise
        allow = error.headers.get(hdrs.ALLOW)
        name = "Object Not Found" if error.status == 404 else error.reason
        return _error_response(error.status, name,
                               f"{request.method} {request.raw_path}: {error.reason}",
                               {hdrs.ALLOW: allow} if allow is not None else None)
    except Exception as error:  # a bug must cost one request, not the listener
        log.exception("management request %s %s failed", request.method, request.path)
        return _error_response(500, "internal_error", f"{type(error).__name__}: {error}")


def _auth_middleware(api: ManagementApi) -> Middleware:
    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        # Each route's `Guard` then decides what this user may do there.
        request["user"] = api.authenticate(request.headers.get(hdrs.AUTHORIZATION),
                                           request.remote or "")
        response = await handler(request)
        if request.method not in READS:
            # A write's effects (definitions, policies, queue changes) go to the peers and
            # to waiting clients now, not at the next AMQP input.
            broker = api.node.broker
            if broker is not None:
                broker.after_input()
                api.node.flush()
        return response

    return authenticate


class _UnparsedRequests(logging.Filter):
    """aiohttp logs a request it cannot parse (a request line or header too long, bad
    syntax) with a traceback, before any handler or authentication runs: anyone could
    fill the log with them. One warning line says what was refused instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            record.msg = f"{record.getMessage()}: refused ({type(error).__name__}, " \
                         f"{error.code} {error.message})"
            record.args, record.exc_info, record.exc_text = (), None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_AIOHTTP_SERVER_LOG = logging.getLogger("aiohttp.server")
_AIOHTTP_SERVER_LOG.addFilter(_UnparsedRequests())


async def start_management(node: Node, host: str, port: int) -> web.AppRunner:
    """Serve the management API for ``node``; the caller stops it with ``cleanup()``."""
    api = ManagementApi(node)
    app = web.Application(middlewares=[_errors, _auth_middleware(api)])
    app.add_routes(api.routes())
    # No access log: the harness polls the API, and the node log is for the broker.
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
