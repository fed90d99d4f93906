"""The management API's routes about policies: listed, read, set and cleared."""

from __future__ import annotations

from aiohttp import web

from cluster.core.policy import Policy, PolicyError
from cluster.mgmt.access import Guard
from cluster.mgmt.protocol import (
    bad_request,
    done,
    field,
    json_reply,
    not_found,
    read_body,
    written,
)
from cluster.mgmt.resource import Guarding, Resource
from cluster.session.broker import Broker


class PolicyRoutes(Resource):
    def routes(self, guarded: Guarding) -> list[web.RouteDef]:
        vhost, policies = Guard.VHOST, Guard.POLICIES
        return [
            web.get("/api/policies", guarded(vhost, self.list_policies)),
            web.get("/api/policies/{vhost}", guarded(vhost, self.list_policies)),
            web.get("/api/policies/{vhost}/{name}", guarded(policies, self.get_policy)),
            web.put("/api/policies/{vhost}/{name}", guarded(policies, self.put_policy)),
            web.delete("/api/policies/{vhost}/{name}", guarded(policies, self.delete_policy)),
        ]

    def _policy(self, broker: Broker, request: web.Request) -> Policy:
        vhost = self._vhost(broker, request.match_info["vhost"])
        name = request.match_info["name"]
        policy = broker.policies.get((vhost.name, name))
        if policy is None:
            raise not_found(f"no policy '{name}' in vhost '{vhost.name}'")
        return policy

    async def list_policies(self, request: web.Request) -> web.Response:
        broker = self.broker()
        wanted = {vhost.name for vhost in self._vhosts(broker, request)}
        return json_reply([policy.to_json() for key, policy in sorted(broker.policies.items())
                           if key[0] in wanted])

    async def get_policy(self, request: web.Request) -> web.Response:
        return json_reply(self._policy(self.broker(), request).to_json())

    async def put_policy(self, request: web.Request) -> web.Response:
        broker = self.broker()
        vhost = self._vhost(broker, request.match_info["vhost"])
        name = request.match_info["name"]
        body = await read_body(request)
        try:
            policy = Policy.create(
                vhost.name, name, field(body, "pattern", str), body.get("definition"),
                field(body, "priority", int, 0), field(body, "apply-to", str, "all"),
            )
        except PolicyError as error:
            raise bad_request(str(error)) from error
        created = (vhost.name, name) not in broker.policies
        broker.set_policy(policy)  # saves the definitions itself
        self.node.flush()
        return written(created)

    async def delete_policy(self, request: web.Request) -> web.Response:
        broker = self.broker()
        policy = self._policy(broker, request)
        broker.clear_policy(policy.vhost, policy.name)  # saves the definitions itself
        self.node.flush()
        return done()
