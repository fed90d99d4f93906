"""A toxiproxy-compatible server (HTTP API v2 and TCP proxies) in asyncio.

Used where no real toxiproxy is available; official clients work against it
unchanged. Unlike upstream, every random choice comes from a seed, so runs replay.
"""

from .api import VERSION
from .errors import ApiError
from .server import ToxiproxyServer, serve

__all__ = ["VERSION", "ApiError", "ToxiproxyServer", "serve"]
