"""Users, password checks, per-vhost permissions (configure / write / read regexes) and
which users may log in from loopback addresses only."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Literal

Access = Literal["configure", "write", "read"]


def hash_password(password: str, salt: bytes | None = None) -> str:
    """Salted SHA-256, stored as base64(salt + digest) like RabbitMQ's sha256 scheme."""
    salt = os.urandom(4) if salt is None else salt
    digest = hashlib.sha256(salt + password.encode()).digest()
    return base64.b64encode(salt + digest).decode()


def _check_password(password: str, stored: str) -> bool:
    raw = base64.b64decode(stored)
    return hmac.compare_digest(hash_password(password, raw[:4]), stored)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8 or ::1, also written as an IPv4-mapped IPv6 address (a dual-stack
    listener's form); anything else, a host name included, is not."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def may_log_in_from(user: str, host: str, loopback_users: Collection[str]) -> bool:
    """RabbitMQ's ``loopback_users``: the users named there (``guest`` by default, whose
    password everyone knows) log in only from a loopback address; others from anywhere."""
    return user not in loopback_users or is_loopback(host)


@dataclass(slots=True)
class Permission:
    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"

    def allows(self, access: Access, resource: str) -> bool:
        pattern = getattr(self, access)
        return pattern != "" and re.match(pattern, resource) is not None


@dataclass(slots=True)
class User:
    name: str
    password_hash: str
    tags: list[str] = field(default_factory=list)


class Users:
    def __init__(self) -> None:
        self.users: dict[str, User] = {}
        self.permissions: dict[tuple[str, str], Permission] = {}

    def add(self, name: str, password: str, tags: list[str] | None = None) -> User:
        user = User(name, hash_password(password), list(tags or []))
        self.users[name] = user
        return user

    def delete(self, name: str) -> bool:
        self.permissions = {k: v for k, v in self.permissions.items() if k[0] != name}
        return self.users.pop(name, None) is not None

    def authenticate(self, name: str, password: str) -> User | None:
        user = self.users.get(name)
        if user is None or not _check_password(password, user.password_hash):
            return None
        return user

    def set_permissions(self, user: str, vhost: str, permission: Permission) -> None:
        self.permissions[(user, vhost)] = permission

    def can_access_vhost(self, user: str, vhost: str) -> bool:
        return (user, vhost) in self.permissions

    def allows(self, user: str, vhost: str, access: Access, resource: str) -> bool:
        permission = self.permissions.get((user, vhost))
        return permission is not None and permission.allows(access, resource)

    def to_definitions(self) -> dict[str, Any]:
        return {
            "users": [
                {"name": u.name, "password_hash": u.password_hash, "tags": u.tags}
                for u in self.users.values()
            ],
            "permissions": [
                {"user": user, "vhost": vhost, "configure": p.configure, "write": p.write,
                 "read": p.read}
                for (user, vhost), p in self.permissions.items()
            ],
        }

    def load_definitions(self, definitions: dict[str, Any]) -> None:
        for entry in definitions.get("users", []):
            self.users[entry["name"]] = User(entry["name"], entry["password_hash"], entry["tags"])
        for entry in definitions.get("permissions", []):
            self.permissions[(entry["user"], entry["vhost"])] = Permission(
                entry["configure"], entry["write"], entry["read"]
            )
