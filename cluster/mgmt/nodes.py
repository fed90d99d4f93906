"""The management API's routes about the node and its cluster: the overview, the nodes
as this one knows them, and the node actions (stop_app, start_app,
forget_cluster_node)."""

from __future__ import annotations

import os
import time
from typing import Any

from aiohttp import web

from cluster.core.broker import PRODUCT, VERSION
from cluster.mgmt import shapes
from cluster.mgmt.access import Guard, Listing
from cluster.mgmt.managed import ManagedNode
from cluster.mgmt.protocol import bad_request, done, field, json_reply, not_found, read_body
from cluster.mgmt.resource import Guarding, Resource


class NodeRoutes(Resource):
    def __init__(self, node: ManagedNode) -> None:
        super().__init__(node)
        self.started = time.monotonic()

    def routes(self, guarded: Guarding) -> list[web.RouteDef]:
        return [
            web.get("/api/overview", guarded(Guard.MANAGEMENT, self.overview)),
            web.get("/api/nodes", guarded(Guard.MONITORING, self.list_nodes)),
            web.get("/api/nodes/{node}", guarded(Guard.MONITORING, self.get_node)),
            web.post("/api/nodes/{node}/actions", guarded(Guard.ADMINISTRATOR, self.node_action)),
        ]

    def _this_node(self, request: web.Request) -> None:
        # Without a cluster the only node this one knows is itself.
        name = request.match_info["node"]
        if name != self.node_name:
            raise not_found(f"no node '{name}'")

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
        return json_reply(shape)

    async def list_nodes(self, request: web.Request) -> web.Response:
        peers = self.node.peers
        others = sorted(peers.settings.peers) if peers is not None else []
        return json_reply([self._node_json(), *(self._peer_json(peer) for peer in others)])

    async def get_node(self, request: web.Request) -> web.Response:
        self._this_node(request)
        return json_reply(self._node_json())

    async def node_action(self, request: web.Request) -> web.Response:
        """stop_app / start_app: answered once the action has completed, so a client
        that sent stop_app knows the broker is down when it hears back."""
        self._this_node(request)
        body = await read_body(request)
        action = field(body, "action", str)
        if action == "forget_cluster_node":
            coordinator = self.node.coordinator
            if coordinator is None:
                raise bad_request("this node is not in a cluster, or its app is stopped")
            problem = coordinator.forget(field(body, "node", str))
            if problem is not None:
                raise bad_request(problem)
            return done()
        steps = {"stop_app": self.node.stop_app, "start_app": self.node.start_app}
        step = steps.get(action)
        if step is None:
            raise bad_request(f"action must be one of {', '.join(steps)}, "
                              f"forget_cluster_node, got {action!r}")
        await step()
        return done()
