"""Connection negotiation: what ``connection.start`` and ``connection.tune`` offer, and
whether a client's start-ok, tune-ok and open may have what they ask for.

Each check raises `ConnectionError_` with RabbitMQ's reply code and text when a client
asks for what it may not; `Connection` keeps the state and sends the replies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pamqp import commands

from cluster.amqp import framing
from cluster.amqp.errors import ACCESS_REFUSED, COMMAND_INVALID, NOT_ALLOWED, ConnectionError_
from cluster.core.users import may_log_in_from

if TYPE_CHECKING:
    from cluster.core.broker import BrokerConfig, BrokerModel
    from cluster.core.vhost import VirtualHost

# Frames before tune-ok may be no larger than the spec's minimum frame size.
FRAME_MIN_SIZE = 4096
MECHANISMS = ("PLAIN", "AMQPLAIN")


def start(server_properties: dict[str, Any]) -> commands.Connection.Start:
    return commands.Connection.Start(
        version_major=0,
        version_minor=9,
        server_properties=server_properties,
        mechanisms=" ".join(MECHANISMS),
        locales="en_US",
    )


def credentials(method: commands.Connection.StartOk) -> tuple[str, str]:
    """The user and password a start-ok gives."""
    if method.mechanism not in MECHANISMS:
        raise ConnectionError_(
            COMMAND_INVALID,
            f"unknown authentication mechanism '{method.mechanism}'",
        )
    try:
        response = method.response
        raw = response.encode() if isinstance(response, str) else bytes(response)
        return _decode_response(method.mechanism, raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise ConnectionError_(
            ACCESS_REFUSED, f"malformed {method.mechanism} response: {error}", 10, 11
        ) from error


def _decode_response(mechanism: str, response: bytes) -> tuple[str, str]:
    if mechanism == "PLAIN":
        parts = response.split(b"\x00")
        if len(parts) != 3:
            raise ValueError("PLAIN response is not authzid NUL user NUL password")
        return parts[1].decode(), parts[2].decode()
    # AMQPLAIN: a field table without its length prefix.
    _, table = framing.decode_field_table(len(response).to_bytes(4, "big") + response)
    login, password = table.get("LOGIN"), table.get("PASSWORD")
    if not isinstance(login, str | bytes) or not isinstance(password, str | bytes):
        raise ValueError("AMQPLAIN response lacks LOGIN or PASSWORD")
    as_text = [v.decode() if isinstance(v, bytes) else v for v in (login, password)]
    return as_text[0], as_text[1]


def login_refusal(broker: BrokerModel, user: str, password: str, peer_host: str) -> str | None:
    """Why ``user`` may not log in (RabbitMQ's wording), or None when she may."""
    if broker.users.authenticate(user, password) is None:
        return f"user '{user}' - invalid credentials"
    if not may_log_in_from(user, peer_host, broker.config.loopback_users):
        return f"user '{user}' can only connect via localhost"
    return None


def tune(config: BrokerConfig) -> commands.Connection.Tune:
    return commands.Connection.Tune(
        channel_max=config.channel_max,
        frame_max=config.frame_max,
        heartbeat=config.heartbeat,
    )


def tuned(method: commands.Connection.TuneOk, config: BrokerConfig) -> tuple[int, int]:
    """The frame_max and channel_max a tune-ok settles on (0: the broker's own)."""
    if method.frame_max and not FRAME_MIN_SIZE <= method.frame_max <= config.frame_max:
        raise ConnectionError_(
            NOT_ALLOWED,
            f"frame_max={method.frame_max} outside {FRAME_MIN_SIZE}..{config.frame_max}",
            10,
            31,
        )
    if method.channel_max > config.channel_max:
        raise ConnectionError_(
            NOT_ALLOWED,
            f"channel_max={method.channel_max} > {config.channel_max} max",
            10,
            31,
        )
    return method.frame_max or config.frame_max, method.channel_max or config.channel_max


def vhost_to_open(broker: BrokerModel, user: str, name: str) -> VirtualHost:
    """The vhost a connection.open names, if ``user`` may use it."""
    vhost = broker.vhosts.get(name)
    if vhost is None:
        raise ConnectionError_(NOT_ALLOWED, f"vhost {name} not found", 10, 40)
    if not broker.users.can_access_vhost(user, vhost.name):
        raise ConnectionError_(
            NOT_ALLOWED,
            f"access to vhost '{vhost.name}' refused for user '{user}'",
            10,
            40,
        )
    return vhost
