"""Errors of the toxiproxy client layer, typed by who is at fault.

Every error names the call that failed (``"POST /proxies/link:n1->n2/toxics"``) so a
run's record says which step of a fault or heal went wrong.
"""

from __future__ import annotations


class ToxiproxyError(Exception):
    """A toxiproxy call did not do what was asked."""

    def __init__(self, call: str, message: str) -> None:
        super().__init__(f"{call}: {message}")
        self.call = call
        self.message = message


class ToxiproxyUnavailable(ToxiproxyError):
    """No answer: the server is not running, unreachable or too slow (infrastructure)."""


class ToxiproxyServerError(ToxiproxyError):
    """The server answered 5xx: it failed to do what it was asked (e.g. the listen
    address of a proxy was taken). The request itself was acceptable."""

    def __init__(self, call: str, status: int, message: str) -> None:
        super().__init__(call, f"{status} {message}")
        self.status = status


class ToxiproxyRequestError(ToxiproxyError):
    """The server refused the request (4xx): the caller asked for something wrong."""

    def __init__(self, call: str, status: int, message: str) -> None:
        super().__init__(call, f"{status} {message}")
        self.status = status


class NotFound(ToxiproxyRequestError):
    """404: no such proxy or toxic."""


class AlreadyExists(ToxiproxyRequestError):
    """409: a proxy or toxic of that name exists."""


class InvalidRequest(ToxiproxyRequestError):
    """400: a bad body, toxic type, stream or attribute."""


class HealError(Exception):
    """A heal could not be verified: the toxic is still there, or bytes do not flow
    through the proxy, even after the fallbacks (recreate the proxy, reset)."""

    def __init__(self, proxy: str, reason: str) -> None:
        super().__init__(f"heal of proxy {proxy!r} not verified: {reason}")
        self.proxy = proxy
        self.reason = reason


class UpstreamDown(HealError):
    """The fault was undone, but the proxy's upstream does not answer when dialled
    directly, so nothing can show that bytes flow again (its node is down)."""
