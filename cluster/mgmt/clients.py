"""The management API's routes about AMQP clients: their connections, channels and
consumers, each user shown her own or everyone's (`cluster.mgmt.access.Listing`)."""

from __future__ import annotations

from aiohttp import web

from cluster.mgmt import shapes
from cluster.mgmt.access import Guard
from cluster.mgmt.protocol import json_reply
from cluster.mgmt.resource import Guarding, Resource
from cluster.session.connection import Connection


class ClientRoutes(Resource):
    def routes(self, guarded: Guarding) -> list[web.RouteDef]:
        management = Guard.MANAGEMENT
        return [
            web.get("/api/connections", guarded(management, self.list_connections)),
            web.get("/api/channels", guarded(management, self.list_channels)),
            web.get("/api/consumers", guarded(management, self.list_consumers)),
        ]

    def _local(self, connection: Connection) -> shapes.Address | None:
        transport = self.node.transports.get(connection)
        sockname = transport.get_extra_info("sockname") if transport is not None else None
        return (str(sockname[0]), int(sockname[1])) if sockname else None

    async def list_connections(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply([
            shapes.connection_json(self.node_name, connection, self._local(connection))
            for connection in self._connections(broker, request)
        ])

    async def list_channels(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply([
            shapes.channel_json(self.node_name, channel, self._local(connection))
            for connection in self._connections(broker, request)
            for channel in connection.channels.values()
        ])

    async def list_consumers(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply([
            shapes.consumer_json(consumer, self._local(connection))
            for connection in self._connections(broker, request)
            for channel in connection.channels.values()
            for consumer in channel.consumers.values()
        ])
