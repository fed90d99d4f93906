"""Who is asking the management API, and whether she may: HTTP basic credentials
checked against the broker's users, then each route's `Guard` (`cluster.mgmt.access`)."""

from __future__ import annotations

from aiohttp import BasicAuth, web
from aiohttp.typedefs import Handler

from cluster.core.users import User, Users, may_log_in_from
from cluster.mgmt import access
from cluster.mgmt.access import Guard
from cluster.mgmt.managed import ManagedNode
from cluster.mgmt.protocol import NOT_AUTHENTICATED, ApiError, not_authorised
from cluster.mgmt.resource import RouteHandler


class Authenticator:
    """The credentials check, and the guards the routes are put behind."""

    def __init__(self, node: ManagedNode) -> None:
        self.node = node

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

    def guarded(self, guard: Guard, handler: RouteHandler) -> Handler:
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
