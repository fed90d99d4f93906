"""A toxiproxy API client over the ``toxiproxy-python`` package, fixing what it lacks.

toxiproxy-python 0.1.1 keeps the server's host and port as class attributes of
``APIConsumer`` (one server per process), passes no HTTP timeout, cannot update a
toxic, and lets 5xx answers through as if they had succeeded. Here each client binds
its own subclass of ``APIConsumer`` (the package's request code, with this client's
address), passes a timeout on every call, adds toxic update
(``POST /proxies/{p}/toxics/{t}``) and turns every error answer into a typed
exception naming the call. The package is used as it is, not patched.

The calls block; never make them on the event loop thread of an in-process server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import requests
from toxiproxy.api import APIConsumer
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists

from . import errors


@dataclass(frozen=True)
class ToxicInfo:
    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict[str, Any]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ToxicInfo:
        return cls(body["name"], body["type"], body["stream"], float(body["toxicity"]),
                   dict(body.get("attributes") or {}))


@dataclass(frozen=True)
class ProxyInfo:
    name: str
    listen: str
    upstream: str
    enabled: bool
    toxics: tuple[ToxicInfo, ...]

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ProxyInfo:
        toxics = tuple(ToxicInfo.from_json(t) for t in body.get("toxics") or ())
        return cls(body["name"], body["listen"], body["upstream"], bool(body["enabled"]),
                   toxics)

    def toxic_names(self) -> set[str]:
        return {toxic.name for toxic in self.toxics}


def _bound_consumer(host: str, port: int) -> type[APIConsumer]:
    # APIConsumer's classmethods read cls.host and cls.port, so a subclass carrying
    # this client's address sends the package's requests to our server only.
    return type("BoundAPIConsumer", (APIConsumer,), {"host": host, "port": port})


def _error_text(content: bytes | str) -> str:
    """The ``error`` of toxiproxy's JSON error body, or the body as it came."""
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(body, dict) and "error" in body:
        return str(body["error"])
    return text.strip()


def _path(*parts: str) -> str:
    # Proxy names such as "link:n1->n2" must reach the server as one path segment.
    return "/" + "/".join(quote(part, safe="") for part in parts)


class ToxiproxyClient:
    """One toxiproxy server at ``url`` (``http://host:port``); calls give up after
    ``timeout`` seconds with `ToxiproxyUnavailable`."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or parts.hostname is None or parts.port is None:
            raise ValueError(f"toxiproxy URL must be http://host:port, got {url!r}")
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        self.url = f"http://{host}:{parts.port}"
        self.timeout = timeout
        self._consumer = _bound_consumer(host, parts.port)

    def __repr__(self) -> str:
        return f"ToxiproxyClient({self.url!r}, timeout={self.timeout})"

    # -- transport ----------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        call = f"{method} {unquote(path)}"
        send: dict[str, Callable[..., requests.Response]] = {
            "GET": self._consumer.get, "POST": self._consumer.post,
            "DELETE": self._consumer.delete,
        }
        options: dict[str, Any] = {"timeout": self.timeout}
        if body is not None:
            options["json"] = body
        try:
            response = send[method](path, **options)
        except NotFound as exc:
            raise errors.NotFound(call, 404, _error_text(exc.args[0])) from None
        except ProxyExists as exc:
            raise errors.AlreadyExists(call, 409, _error_text(exc.args[0])) from None
        except InvalidToxic as exc:
            raise errors.InvalidRequest(call, 400, _error_text(exc.args[0])) from None
        except requests.Timeout:
            raise errors.ToxiproxyUnavailable(
                call, f"no answer from {self.url} within {self.timeout:g}s") from None
        except requests.RequestException as exc:
            raise errors.ToxiproxyUnavailable(call, f"{self.url}: {exc}") from None
        status = response.status_code
        if status >= 500:
            raise errors.ToxiproxyServerError(call, status, _error_text(response.content))
        if status >= 400:
            raise errors.ToxiproxyRequestError(call, status, _error_text(response.content))
        return response.json() if response.content else None

    # -- server -------------------------------------------------------------------------

    def version(self) -> str:
        return str(self._call("GET", "/version")["version"])

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._call("POST", "/reset")

    # -- proxies ------------------------------------------------------------------------

    def proxies(self) -> dict[str, ProxyInfo]:
        return {name: ProxyInfo.from_json(body)
                for name, body in self._call("GET", "/proxies").items()}

    def proxy(self, name: str) -> ProxyInfo:
        return ProxyInfo.from_json(self._call("GET", _path("proxies", name)))

    def create_proxy(self, name: str, upstream: str, listen: str = "127.0.0.1:0",
                     enabled: bool = True) -> ProxyInfo:
        """The server reports the bound address, so a port of 0 comes back real."""
        body = {"name": name, "listen": listen, "upstream": upstream, "enabled": enabled}
        return ProxyInfo.from_json(self._call("POST", "/proxies", body))

    def update_proxy(self, name: str, *, enabled: bool | None = None,
                     listen: str | None = None, upstream: str | None = None) -> ProxyInfo:
        changes = {key: value for key, value in
                   (("enabled", enabled), ("listen", listen), ("upstream", upstream))
                   if value is not None}
        return ProxyInfo.from_json(self._call("POST", _path("proxies", name), changes))

    def enable(self, name: str) -> ProxyInfo:
        return self.update_proxy(name, enabled=True)

    def disable(self, name: str) -> ProxyInfo:
        """Stop listening and drop every connection of the proxy."""
        return self.update_proxy(name, enabled=False)

    def delete_proxy(self, name: str) -> None:
        self._call("DELETE", _path("proxies", name))

    # -- toxics -------------------------------------------------------------------------

    def toxics(self, proxy: str) -> list[ToxicInfo]:
        return [ToxicInfo.from_json(body)
                for body in self._call("GET", _path("proxies", proxy, "toxics"))]

    def toxic(self, proxy: str, name: str) -> ToxicInfo:
        return ToxicInfo.from_json(self._call("GET", _path("proxies", proxy, "toxics", name)))

    def add_toxic(self, proxy: str, name: str, type: str, *, stream: str = "downstream",
                  toxicity: float = 1.0,
                  attributes: Mapping[str, Any] | None = None) -> ToxicInfo:
        body = {"name": name, "type": type, "stream": stream, "toxicity": toxicity,
                "attributes": dict(attributes or {})}
        return ToxicInfo.from_json(self._call("POST", _path("proxies", proxy, "toxics"), body))

    def update_toxic(self, proxy: str, name: str, *,
                     attributes: Mapping[str, Any] | None = None,
                     toxicity: float | None = None) -> ToxicInfo:
        """Change a live toxic in place; connections keep flowing through it."""
        body: dict[str, Any] = {}
        if attributes is not None:
            body["attributes"] = dict(attributes)
        if toxicity is not None:
            body["toxicity"] = toxicity
        return ToxicInfo.from_json(
            self._call("POST", _path("proxies", proxy, "toxics", name), body))

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", _path("proxies", proxy, "toxics", name))
