"""The server's proxies by name: create, update, delete, populate and reset."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from faults import seeds

from . import errors, wire
from .proxy import Proxy

_PROXY = "Proxy"
_POPULATE_ENTRY = "struct { toxiproxy.Proxy; Enabled *bool }"


@dataclass(frozen=True)
class _Spec:
    name: str
    listen: str
    upstream: str
    enabled: bool


def _decode_spec(body: Any, go_type: str) -> _Spec:
    obj = wire.expect_object(body, go_type)
    enabled = wire.bool_field(obj, "enabled", _PROXY)
    return _Spec(
        name=wire.string_field(obj, "name", _PROXY) or "",
        listen=wire.string_field(obj, "listen", _PROXY) or "",
        upstream=wire.string_field(obj, "upstream", _PROXY) or "",
        enabled=True if enabled is None else enabled,
    )


class ProxyCollection:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._serials = seeds.Serials()
        self._proxies: dict[str, Proxy] = {}

    def _new_proxy(self, spec: _Spec) -> Proxy:
        seed = seeds.derive(self.seed, "proxy", spec.name, self._serials.next(spec.name))
        return Proxy(spec.name, spec.listen, spec.upstream, seed)

    def by_name(self) -> dict[str, Proxy]:
        """Sorted by name, as Go marshals a map."""
        return dict(sorted(self._proxies.items()))

    def get(self, name: str) -> Proxy:
        proxy = self._proxies.get(name)
        if proxy is None:
            raise errors.proxy_not_found()
        return proxy

    async def create(self, body: Any) -> Proxy:
        spec = _decode_spec(body, "toxiproxy.Proxy")
        if not spec.name:
            raise errors.missing_field("name")
        if not spec.upstream:
            raise errors.missing_field("upstream")
        if spec.name in self._proxies:
            raise errors.proxy_already_exists()
        proxy = self._new_proxy(spec)
        if spec.enabled:
            await proxy.start()
        self._proxies[spec.name] = proxy
        return proxy

    async def update(self, name: str, body: Any) -> Proxy:
        proxy = self.get(name)
        obj = wire.expect_object(body, "toxiproxy.Proxy")
        await proxy.update(
            listen=wire.string_field(obj, "listen", _PROXY),
            upstream=wire.string_field(obj, "upstream", _PROXY),
            enabled=wire.bool_field(obj, "enabled", _PROXY),
        )
        return proxy

    async def remove(self, name: str) -> None:
        proxy = self.get(name)
        await proxy.stop()
        del self._proxies[name]

    async def populate(self, body: Any) -> tuple[list[Proxy], errors.ApiError | None]:
        """Create or replace a list of proxies; one whose addresses are unchanged is
        kept as it is, toxics included. Returns what was done before any failure."""
        if not isinstance(body, list):
            raise wire.type_error(body, "Go value", f"[]{_POPULATE_ENTRY}")
        specs = [_decode_spec(item, _POPULATE_ENTRY) for item in body]
        # Toxiproxy checks every entry before touching any proxy.
        for number, spec in enumerate(specs, start=1):
            if not spec.name:
                raise errors.missing_field(f"name at proxy {number}")
            if not spec.upstream:
                raise errors.missing_field(f"upstream at proxy {number}")
        done: list[Proxy] = []
        for spec in specs:
            try:
                done.append(await self._add_or_replace(spec))
            except errors.ApiError as exc:
                return done, exc
        return done, None

    async def _add_or_replace(self, spec: _Spec) -> Proxy:
        existing = self._proxies.get(spec.name)
        if existing is not None:
            if not await existing.differs(spec.listen, spec.upstream):
                return existing
            await existing.stop()
        proxy = self._new_proxy(spec)
        if spec.enabled:
            await proxy.start()
        self._proxies[spec.name] = proxy
        return proxy

    async def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        for proxy in list(self._proxies.values()):
            await proxy.start()
            await proxy.toxics.reset()

    async def close(self) -> None:
        for proxy in list(self._proxies.values()):
            await proxy.stop()
        self._proxies.clear()
