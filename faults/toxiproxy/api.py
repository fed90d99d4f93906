"""Toxiproxy's HTTP API (v2) over aiohttp: routes, status codes and JSON shapes."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Final

from aiohttp import web

from . import wire
from .errors import ApiError
from .proxies import ProxyCollection

log = logging.getLogger(__name__)

# Toxiproxy's API version this server implements, marked as this implementation.
VERSION: Final = "2.12.0+mirrorchaos"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(value: Any, status: int = 200) -> web.Response:
    # Compact, like Go's encoding/json.
    return web.Response(
        text=json.dumps(value, separators=(",", ":")),
        status=status,
        content_type="application/json",
    )


@web.middleware
async def _toxiproxy_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    # Toxiproxy refuses browsers so that a web page cannot drive it (CSRF).
    if request.headers.get("User-Agent", "").startswith("Mozilla/"):
        return web.Response(status=403, text="User agent not allowed\n")
    try:
        return await handler(request)
    except ApiError as exc:
        return _json(exc.to_json(), exc.status)
    except web.HTTPNotFound:
        return web.Response(status=404, text="404 page not found\n")
    except web.HTTPMethodNotAllowed:
        return web.Response(status=405)
    except web.HTTPException:
        raise
    except Exception as exc:
        # Never a traceback to the client: the error JSON, as toxiproxy answers a 500.
        log.exception("%s %s failed", request.method, request.path)
        return _json({"error": str(exc) or type(exc).__name__, "status": 500}, 500)


class _Routes:
    def __init__(self, proxies: ProxyCollection) -> None:
        self._proxies = proxies
        # One change at a time, as toxiproxy's collection locks do.
        self._lock = asyncio.Lock()

    async def version(self, request: web.Request) -> web.Response:
        return web.Response(
            body=f'{{"version": "{VERSION}"}}\n'.encode(),
            headers={"Content-Type": "application/json;charset=utf-8"},
        )

    async def reset(self, request: web.Request) -> web.Response:
        async with self._lock:
            await self._proxies.reset()
        return web.Response(status=204)

    async def proxy_index(self, request: web.Request) -> web.Response:
        return _json({name: proxy.to_json() for name, proxy in self._proxies.by_name().items()})

    async def proxy_create(self, request: web.Request) -> web.Response:
        body = wire.decode_body(await request.read())
        async with self._lock:
            proxy = await self._proxies.create(body)
        return _json(proxy.to_json(), 201)

    async def populate(self, request: web.Request) -> web.Response:
        failure: ApiError | None
        async with self._lock:
            try:
                done, failure = await self._proxies.populate(wire.decode_body(await request.read()))
            except ApiError as exc:
                done, failure = [], exc
        # The error, if any, sits beside the proxies handled before it; an empty list
        # is null because Go marshals a nil slice that way.
        listed = [proxy.to_json() for proxy in done] or None
        if failure is None:
            return _json({"proxies": listed}, 201)
        return _json({**failure.to_json(), "proxies": listed}, failure.status)

    async def proxy_show(self, request: web.Request) -> web.Response:
        return _json(self._proxies.get(request.match_info["proxy"]).to_json())

    async def proxy_update(self, request: web.Request) -> web.Response:
        name = request.match_info["proxy"]
        async with self._lock:
            self._proxies.get(name)
            body = wire.decode_body(await request.read())
            proxy = await self._proxies.update(name, body)
        return _json(proxy.to_json())

    async def proxy_delete(self, request: web.Request) -> web.Response:
        async with self._lock:
            await self._proxies.remove(request.match_info["proxy"])
        return web.Response(status=204)

    async def toxic_index(self, request: web.Request) -> web.Response:
        proxy = self._proxies.get(request.match_info["proxy"])
        return _json([toxic.to_json() for toxic in proxy.toxics.all()])

    async def toxic_create(self, request: web.Request) -> web.Response:
        async with self._lock:
            proxy = self._proxies.get(request.match_info["proxy"])
            toxic = await proxy.toxics.add(wire.decode_body(await request.read()))
        return _json(toxic.to_json())

    async def toxic_show(self, request: web.Request) -> web.Response:
        proxy = self._proxies.get(request.match_info["proxy"])
        return _json(proxy.toxics.get(request.match_info["toxic"]).to_json())

    async def toxic_update(self, request: web.Request) -> web.Response:
        async with self._lock:
            toxics = self._proxies.get(request.match_info["proxy"]).toxics
            name = request.match_info["toxic"]
            toxics.get(name)
            toxic = await toxics.update(name, wire.decode_body(await request.read()))
        return _json(toxic.to_json())

    async def toxic_delete(self, request: web.Request) -> web.Response:
        async with self._lock:
            proxy = self._proxies.get(request.match_info["proxy"])
            await proxy.toxics.remove(request.match_info["toxic"])
        return web.Response(status=204)


def build_app(proxies: ProxyCollection) -> web.Application:
    routes = _Routes(proxies)
    app = web.Application(middlewares=[_toxiproxy_errors])
    app.router.add_post("/reset", routes.reset)
    app.router.add_get("/proxies", routes.proxy_index, allow_head=False)
    app.router.add_post("/proxies", routes.proxy_create)
    app.router.add_post("/populate", routes.populate)
    app.router.add_get("/proxies/{proxy}", routes.proxy_show, allow_head=False)
    app.router.add_post("/proxies/{proxy}", routes.proxy_update)
    app.router.add_patch("/proxies/{proxy}", routes.proxy_update)
    app.router.add_delete("/proxies/{proxy}", routes.proxy_delete)
    app.router.add_get("/proxies/{proxy}/toxics", routes.toxic_index, allow_head=False)
    app.router.add_post("/proxies/{proxy}/toxics", routes.toxic_create)
    app.router.add_get("/proxies/{proxy}/toxics/{toxic}", routes.toxic_show, allow_head=False)
    app.router.add_post("/proxies/{proxy}/toxics/{toxic}", routes.toxic_update)
    app.router.add_patch("/proxies/{proxy}/toxics/{toxic}", routes.toxic_update)
    app.router.add_delete("/proxies/{proxy}/toxics/{toxic}", routes.toxic_delete)
    app.router.add_get("/version", routes.version, allow_head=False)
    return app
