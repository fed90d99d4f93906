"""AMQP URLs for the bench and the flood clients: ``amqp://user:pass@host:port/vhost``
parsed with RabbitMQ's defaults, and shown with the password masked."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit


@dataclass(frozen=True)
class AmqpUrl:
    host: str
    port: int
    user: str
    password: str
    vhost: str

    @property
    def display(self) -> str:
        """The URL with the password masked, for output and error messages."""
        vhost = "" if self.vhost == "/" else quote(self.vhost, safe="")
        return f"amqp://{self.user}:***@{self.host}:{self.port}/{vhost}"


def parse_amqp_url(url: str) -> AmqpUrl:
    """Parse amqp://user:pass@host:port/vhost with RabbitMQ's defaults; ValueError if bad."""
    parts = urlsplit(url)
    if parts.scheme != "amqp":
        raise ValueError(f"{url!r}: only amqp:// URLs are supported")
    if not parts.hostname:
        raise ValueError(f"{url!r}: no host")
    try:
        port = parts.port or 5672
    except ValueError as err:
        raise ValueError(f"{url!r}: bad port") from err
    # As in RabbitMQ's URI spec: no path means "/", "/%2F" means "/", "/x" means "x".
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    vhost = unquote(path) if path else "/"
    return AmqpUrl(
        host=parts.hostname,
        port=port,
        user=unquote(parts.username or "guest"),
        password=unquote(parts.password or "guest"),
        vhost=vhost,
    )
