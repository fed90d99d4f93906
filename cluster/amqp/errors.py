"""AMQP errors, typed by who is at fault and by how much they close.

A `ChannelError` (soft) closes one channel; a `ConnectionError_` (hard) closes the
whole connection. Both carry the reply code and text the peer receives, plus the
class and method id of the offending method when there is one.
"""

from __future__ import annotations

# Reply codes of AMQP 0-9-1 (section 1.2 of the spec) that the broker uses.
CONTENT_TOO_LARGE = 311
NO_ROUTE = 312
ACCESS_REFUSED = 403
NOT_FOUND = 404
RESOURCE_LOCKED = 405
PRECONDITION_FAILED = 406
CONNECTION_FORCED = 320
FRAME_ERROR = 501
SYNTAX_ERROR = 502
COMMAND_INVALID = 503
CHANNEL_ERROR = 504
UNEXPECTED_FRAME = 505
RESOURCE_ERROR = 506
NOT_ALLOWED = 530
NOT_IMPLEMENTED = 540
INTERNAL_ERROR = 541

REPLY_NAMES = {
    CONTENT_TOO_LARGE: "CONTENT_TOO_LARGE",
    NO_ROUTE: "NO_ROUTE",
    CONNECTION_FORCED: "CONNECTION_FORCED",
    ACCESS_REFUSED: "ACCESS_REFUSED",
    NOT_FOUND: "NOT_FOUND",
    RESOURCE_LOCKED: "RESOURCE_LOCKED",
    PRECONDITION_FAILED: "PRECONDITION_FAILED",
    FRAME_ERROR: "FRAME_ERROR",
    SYNTAX_ERROR: "SYNTAX_ERROR",
    COMMAND_INVALID: "COMMAND_INVALID",
    CHANNEL_ERROR: "CHANNEL_ERROR",
    UNEXPECTED_FRAME: "UNEXPECTED_FRAME",
    RESOURCE_ERROR: "RESOURCE_ERROR",
    NOT_ALLOWED: "NOT_ALLOWED",
    NOT_IMPLEMENTED: "NOT_IMPLEMENTED",
    INTERNAL_ERROR: "INTERNAL_ERROR",
}


class AMQPError(Exception):
    """An error the client caused; the broker answers it with a close method."""

    def __init__(self, code: int, text: str, class_id: int = 0, method_id: int = 0) -> None:
        super().__init__(text)
        self.code = code
        self.text = text
        self.class_id = class_id
        self.method_id = method_id

    @property
    def reply_text(self) -> str:
        """Reply text in RabbitMQ's form, e.g. ``NOT_FOUND - no queue 'q' in vhost '/'``,
        cut to the 255 octets a short string holds (not characters: a name it echoes
        may be of two-octet ones)."""
        text = f"{REPLY_NAMES.get(self.code, str(self.code))} - {self.text}"
        return text.encode()[:255].decode("utf-8", "ignore")


class ChannelError(AMQPError):
    """Soft error: closes the channel it happened on."""


class ConnectionError_(AMQPError):
    """Hard error: closes the whole connection."""
