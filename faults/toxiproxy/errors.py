"""Toxiproxy's API errors, with the texts and status codes its clients match on."""

from __future__ import annotations


class ApiError(Exception):
    """An error the HTTP API reports as ``{"error": message, "status": code}``."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.message = message
        self.status = status

    def to_json(self) -> dict[str, object]:
        return {"error": self.message, "status": self.status}


def bad_request_body(reason: str) -> ApiError:
    return ApiError(f"bad request body: {reason}", 400)


def missing_field(what: str) -> ApiError:
    return ApiError(f"missing required field: {what}", 400)


def proxy_not_found() -> ApiError:
    return ApiError("proxy not found", 404)


def proxy_already_exists() -> ApiError:
    return ApiError("proxy already exists", 409)


def invalid_stream() -> ApiError:
    return ApiError("stream was invalid, can be either upstream or downstream", 400)


def invalid_toxic_type() -> ApiError:
    return ApiError("invalid toxic type", 400)


def toxic_already_exists() -> ApiError:
    return ApiError("toxic already exists", 409)


def toxic_not_found() -> ApiError:
    return ApiError("toxic not found", 404)


def server_error(message: str) -> ApiError:
    """Toxiproxy passes listen and address failures through as 500s; clients expect that."""
    return ApiError(message, 500)
