"""The management API's routes about who may use what: vhosts, users (with their
passwords and tags) and their permissions in the vhosts."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from aiohttp import web

from cluster.core.users import Permission, User
from cluster.mgmt import shapes
from cluster.mgmt.access import Guard, Listing
from cluster.mgmt.protocol import (
    bad_request,
    done,
    dumps,
    field,
    json_reply,
    not_found,
    read_body,
    written,
)
from cluster.mgmt.resource import Guarding, Resource
from cluster.session.broker import Broker

HASHING_ALGORITHM = "rabbit_password_hashing_sha256"
HASH_BYTES = 4 + 32  # salt and SHA-256 digest, as `cluster.core.users.hash_password` stores


def _tags(value: Any) -> list[str]:
    # RabbitMQ takes tags both as "a,b" and as ["a", "b"].
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(tag, str) for tag in value):
        raise bad_request(
            f"tags must be a comma-separated string or a list of strings, got {dumps(value)}"
        )
    return [tag.strip() for tag in value if tag.strip()]


def _password_hash(body: dict[str, Any]) -> str:
    algorithm = field(body, "hashing_algorithm", str, HASHING_ALGORITHM)
    if algorithm != HASHING_ALGORITHM:
        raise bad_request(f"hashing_algorithm must be {HASHING_ALGORITHM}, got {algorithm!r}")
    value = field(body, "password_hash", str)
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
        pattern = field(body, key, str)
        try:
            re.compile(pattern)
        except re.error as error:
            raise bad_request(f"{key} {pattern!r} is not a valid regex: {error}") from error
        patterns.append(pattern)
    return Permission(*patterns)


class UserRoutes(Resource):
    def routes(self, guarded: Guarding) -> list[web.RouteDef]:
        management, admin = Guard.MANAGEMENT, Guard.ADMINISTRATOR
        return [
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
        ]

    # -- vhosts --------------------------------------------------------------------------

    async def list_vhosts(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply([shapes.vhost_json(vhost)
                           for vhost in self._vhosts(broker, request, Listing.VHOSTS)])

    async def get_vhost(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply(shapes.vhost_json(self._vhost(broker, request.match_info["vhost"])))

    async def put_vhost(self, request: web.Request) -> web.Response:
        broker = self.broker()
        name = request.match_info["vhost"]
        created = name not in broker.vhosts
        if created:
            broker.add_vhost(name)
            # As RabbitMQ does: its creator may use it, through AMQP and queue writes here.
            broker.set_permissions(request["user"].name, name, Permission())
            self._persist(broker)
        return written(created)

    async def delete_vhost(self, request: web.Request) -> web.Response:
        broker = self.broker()
        name = request.match_info["vhost"]
        if not broker.delete_vhost(name):
            raise not_found(f"no vhost '{name}'")
        self._persist(broker)
        return done()

    # -- users ---------------------------------------------------------------------------

    @staticmethod
    def _user(broker: Broker, name: str) -> User:
        user = broker.users.users.get(name)
        if user is None:
            raise not_found(f"no user '{name}'")
        return user

    async def list_users(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply([shapes.user_json(broker.users.users[name])
                           for name in sorted(broker.users.users)])

    async def get_user(self, request: web.Request) -> web.Response:
        broker = self.broker()
        return json_reply(shapes.user_json(self._user(broker, request.match_info["user"])))

    async def put_user(self, request: web.Request) -> web.Response:
        """Body: ``tags`` and exactly one of ``password`` and ``password_hash`` (the
        latter is how a client changes tags and keeps the password, as with RabbitMQ)."""
        broker = self.broker()
        name = request.match_info["user"]
        body = await read_body(request)
        tags = _tags(body.get("tags", []))
        if ("password" in body) == ("password_hash" in body):
            raise bad_request("give exactly one of password and password_hash")
        created = name not in broker.users.users
        if "password" in body:
            broker.add_user(name, field(body, "password", str), tags)
        else:
            broker.users.users[name] = User(name, _password_hash(body), tags)
        self._persist(broker)
        return written(created)

    async def delete_user(self, request: web.Request) -> web.Response:
        broker = self.broker()
        name = request.match_info["user"]
        if not broker.users.delete(name):
            raise not_found(f"no user '{name}'")
        self._persist(broker)
        return done()

    # -- permissions ---------------------------------------------------------------------

    async def list_permissions(self, request: web.Request) -> web.Response:
        broker = self.broker()
        wanted = {vhost.name for vhost in self._vhosts(broker, request)}
        return json_reply([
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
        return json_reply(shapes.permission_json(user, vhost, permission))

    async def put_permission(self, request: web.Request) -> web.Response:
        broker = self.broker()
        user, vhost = self._permission_key(broker, request)
        permission = _permission(await read_body(request))
        created = (user, vhost) not in broker.users.permissions
        broker.set_permissions(user, vhost, permission)
        self._persist(broker)
        return written(created)

    async def delete_permission(self, request: web.Request) -> web.Response:
        broker = self.broker()
        user, vhost = self._permission_key(broker, request)
        if broker.users.permissions.pop((user, vhost), None) is None:
            raise not_found(f"user '{user}' has no permissions in vhost '{vhost}'")
        self._persist(broker)
        return done()
