"""The management HTTP server's wiring: the aiohttp app with its middleware (errors,
authentication, the work after a write) and every group's routes, and its start-up (see
the package docstring for the API it serves)."""

from __future__ import annotations

import logging

from aiohttp import hdrs, web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler, Middleware

from cluster.mgmt.auth import Authenticator
from cluster.mgmt.clients import ClientRoutes
from cluster.mgmt.managed import ManagedNode
from cluster.mgmt.nodes import NodeRoutes
from cluster.mgmt.policies import PolicyRoutes
from cluster.mgmt.protocol import NOT_AUTHENTICATED, ApiError, error_reply
from cluster.mgmt.queues import QueueRoutes
from cluster.mgmt.users import UserRoutes

log = logging.getLogger("mirrorchaos.mgmt")

REALM = 'Basic realm="RabbitMQ Management"'
READS = ("GET", "HEAD")


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ApiError as error:
        headers = {hdrs.WWW_AUTHENTICATE: REALM} if error.error == NOT_AUTHENTICATED else None
        return error_reply(error.status, error.error, error.reason, headers)
    except web.HTTPException as error:  # aiohttp's own: no such route, method not allowed
        if error.status < 400:
            raise
        allow = error.headers.get(hdrs.ALLOW)
        name = "Object Not Found" if error.status == 404 else error.reason
        return error_reply(error.status, name,
                           f"{request.method} {request.raw_path}: {error.reason}",
                           {hdrs.ALLOW: allow} if allow is not None else None)
    except Exception as error:  # a bug must cost one request, not the listener
        log.exception("management request %s %s failed", request.method, request.path)
        return error_reply(500, "internal_error", f"{type(error).__name__}: {error}")


def _auth_middleware(node: ManagedNode, auth: Authenticator) -> Middleware:
    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        # Each route's `Guard` then decides what this user may do there.
        request["user"] = auth.authenticate(request.headers.get(hdrs.AUTHORIZATION),
                                            request.remote or "")
        response = await handler(request)
        if request.method not in READS:
            # A write's effects (definitions, policies, queue changes) go to the peers and
            # to waiting clients now, not at the next AMQP input; the answer goes once
            # the definitions it changed are on disk.
            node.pump()
            await node.definitions.saved()
        return response

    return authenticate


class _UnparsedRequests(logging.Filter):
    """aiohttp logs a request it cannot parse (a request line or header too long, bad
    syntax) with a traceback, before any handler or authentication runs: anyone could
    fill the log with them. One warning line says what was refused instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError):
            record.msg = f"{record.getMessage()}: refused ({type(error).__name__}, " \
                         f"{error.code} {error.message})"
            record.args, record.exc_info, record.exc_text = (), None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_AIOHTTP_SERVER_LOG = logging.getLogger("aiohttp.server")
_AIOHTTP_SERVER_LOG.addFilter(_UnparsedRequests())

_RESOURCES = (NodeRoutes, QueueRoutes, ClientRoutes, UserRoutes, PolicyRoutes)


async def start_management(node: ManagedNode, host: str, port: int) -> web.AppRunner:
    """Serve the management API for ``node``; the caller stops it with ``cleanup()``."""
    auth = Authenticator(node)
    app = web.Application(middlewares=[_errors, _auth_middleware(node, auth)])
    for resource in _RESOURCES:
        app.add_routes(resource(node).routes(auth.guarded))
    # No access log: the harness polls the API, and the node log is for the broker.
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, reuse_address=True).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner
