"""How the management API speaks HTTP: JSON answers, errors in RabbitMQ's ``{"error",
"reason"}`` shape, and the JSON request bodies of its writes."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from aiohttp import web
from aiohttp.typedefs import LooseHeaders

from cluster.amqp.errors import NOT_FOUND, AMQPError

# RabbitMQ's two 401s: credentials wrong or missing (a browser asks for others), and a
# user who is known but may not do this.
NOT_AUTHENTICATED = "not_authorized"
NOT_AUTHORISED = "not_authorised"

T = TypeVar("T")


class ApiError(Exception):
    """An answer other than success, rendered as RabbitMQ's ``{"error", "reason"}``."""

    def __init__(self, status: int, error: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.error = error
        self.reason = reason


def bad_request(reason: str) -> ApiError:
    return ApiError(400, "bad_request", reason)


def not_found(reason: str) -> ApiError:
    return ApiError(404, "Object Not Found", reason)


def not_authorised(reason: str) -> ApiError:
    return ApiError(401, NOT_AUTHORISED, reason)


def from_amqp(error: AMQPError) -> ApiError:
    """A broker rule the request broke, with the reply text an AMQP client would get."""
    if error.code == NOT_FOUND:
        return not_found(error.reply_text)
    return bad_request(error.reply_text)


# -- answers ----------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    # Client field tables (client_properties, arguments) may carry bytes, decimals and
    # timestamps, which JSON has no type for.
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def dumps(data: Any) -> str:
    return json.dumps(data, default=_jsonable)


def json_reply(data: Any) -> web.Response:
    return web.json_response(data, dumps=dumps)


def error_reply(status: int, error: str, reason: str,
                headers: LooseHeaders | None = None) -> web.Response:
    return web.json_response({"error": error, "reason": reason}, status=status, headers=headers)


def written(created: bool) -> web.Response:
    return web.Response(status=201 if created else 204)


def done() -> web.Response:
    return web.Response(status=204)


# -- request bodies ---------------------------------------------------------------------

_KINDS: dict[type, str] = {
    bool: "true or false", str: "a string", int: "an integer", dict: "a JSON object",
}
_REQUIRED: Any = object()


async def read_body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as error:  # JSONDecodeError, or bytes that are no Unicode text
        raise bad_request(f"body is not valid JSON: {error}") from error
    except RecursionError:
        raise bad_request("body is JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise bad_request("body must be a JSON object")
    return body


def field(body: dict[str, Any], key: str, kind: type[T], default: T = _REQUIRED) -> T:
    if key not in body:
        if default is _REQUIRED:
            raise bad_request(f"{key} is required")
        return default
    value = body[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise bad_request(f"{key} must be {_KINDS[kind]}, got {dumps(value)}")
    return value
