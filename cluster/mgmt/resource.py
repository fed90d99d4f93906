"""What every group of the management API's routes shares: the node it serves, the
lookups of the objects a path names, and the save after a durable change."""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Handler

from cluster.core.users import User
from cluster.core.vhost import VirtualHost
from cluster.mgmt import access
from cluster.mgmt.access import Guard, Listing
from cluster.mgmt.managed import ManagedNode
from cluster.mgmt.protocol import ApiError, not_found
from cluster.session.broker import Broker
from cluster.session.connection import Connection

RouteHandler = Callable[[web.Request], Awaitable[web.Response]]
# Puts a route's handler behind its `Guard` (`cluster.mgmt.auth.Authenticator.guarded`).
Guarding = Callable[[Guard, RouteHandler], Handler]


class Resource(abc.ABC):
    """A group of routes of the API, with the lookups its handlers share."""

    def __init__(self, node: ManagedNode) -> None:
        self.node = node

    @property
    def node_name(self) -> str:
        return self.node.config.broker.node_name

    @abc.abstractmethod
    def routes(self, guarded: Guarding) -> list[web.RouteDef]:
        """The group's routes, each with its `Guard` (the table in the README)."""

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

    def _persist(self, broker: Broker) -> None:
        """Save the definitions after a durable change, then let clients hear about it
        (closed connections, cancelled consumers)."""
        broker.definitions_changed()
        self.node.flush()
