"""Node configuration: command-line settings plus an optional TOML file.

A config file may hold a ``[node]`` table (broker limits, ``loopback_users``), and
``[[users]]``, ``[[vhosts]]`` and ``[[permissions]]`` arrays. Any unknown or mistyped
key is an error naming the file and the key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from cluster.core.broker import BrokerConfig


class ConfigError(ValueError):
    """A bad config file; the message names the file, the key and what was expected."""


@dataclass
class UserSpec:
    name: str
    password: str
    tags: list[str] = field(default_factory=list)


@dataclass
class PermissionSpec:
    user: str
    vhost: str = "/"
    configure: str = ".*"
    write: str = ".*"
    read: str = ".*"


@dataclass
class NodeConfig:
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    users: list[UserSpec] = field(default_factory=list)
    vhosts: list[str] = field(default_factory=list)
    permissions: list[PermissionSpec] = field(default_factory=list)


_FILE_TYPES: dict[str, type] = {"int": int, "str": str, "list[str]": list}


def _typed(path: Path, where: str, value: Any, expected: type) -> Any:
    if expected is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ConfigError(f"{path}: {where} must be an integer, got {value!r}")
    if expected is list and not (isinstance(value, list)
                                 and all(isinstance(item, str) for item in value)):
        raise ConfigError(f"{path}: {where} must be a list of strings, got {value!r}")
    if expected is not int and not isinstance(value, expected):
        raise ConfigError(f"{path}: {where} must be {expected.__name__}, got {value!r}")
    return value


def _table(path: Path, where: str, raw: Any, spec: type) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: {where} must be a table")
    # Fields of other types (the planted bugs) are set on the command line only.
    known = {f.name: f for f in fields(spec) if str(f.type) in _FILE_TYPES}
    values = {}
    for key, value in raw.items():
        if key not in known:
            raise ConfigError(
                f"{path}: unknown key {where}.{key} (expected one of {', '.join(known)})"
            )
        expected = _FILE_TYPES[str(known[key].type)]
        values[key] = _typed(path, f"{where}.{key}", value, expected)
    try:
        return spec(**values)
    except TypeError as error:
        raise ConfigError(f"{path}: {where}: {error}") from error


def load_config(path: Path | None, node_name: str) -> NodeConfig:
    config = NodeConfig(broker=BrokerConfig(node_name=node_name))
    if path is None:
        return config
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror}") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from error
    unknown = set(raw) - {"node", "users", "vhosts", "permissions"}
    if unknown:
        raise ConfigError(
            f"{path}: unknown table {sorted(unknown)[0]!r} "
            "(expected node, users, vhosts, permissions)"
        )
    if "node" in raw:
        node = dict(raw["node"]) if isinstance(raw["node"], dict) else raw["node"]
        if isinstance(node, dict):
            node.setdefault("node_name", node_name)
        config.broker = _table(path, "node", node, BrokerConfig)
    config.users = [_table(path, f"users[{i}]", u, UserSpec)
                    for i, u in enumerate(raw.get("users", []))]
    config.permissions = [_table(path, f"permissions[{i}]", p, PermissionSpec)
                          for i, p in enumerate(raw.get("permissions", []))]
    for i, vhost in enumerate(raw.get("vhosts", [])):
        if not isinstance(vhost, dict) or set(vhost) != {"name"}:
            raise ConfigError(f"{path}: vhosts[{i}] must be a table with only 'name'")
        config.vhosts.append(_typed(path, f"vhosts[{i}].name", vhost["name"], str))
    return config
