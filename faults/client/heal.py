"""Verified heals: a toxic removed or a proxy re-enabled is checked through the API
and by traffic, with fallbacks, and a heal that cannot be verified raises.

Steps: undo the fault; check (the proxy exists with its address and upstream, is
enabled, none of the healed toxics is left, and a probe gets bytes through it) until
a timeout; if that fails, recreate the proxy (keeping other faults' toxics) and check
again; then ``POST /reset`` and check again; then `HealError`. The upstream is probed
directly too: when it does not answer, traffic cannot prove anything and no fallback
can help (a reset would only wipe other faults), so the heal fails at once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal

from .api import ProxyInfo, ToxiproxyClient
from .errors import HealError, NotFound, ToxiproxyError, ToxiproxyUnavailable, UpstreamDown
from .probes import Probe

HealMethod = Literal["direct", "recreate", "reset"]


@dataclass(frozen=True)
class ProxySpec:
    """What a proxy must be after a heal, and how to tell that bytes flow through it."""

    name: str
    listen: str  # as the server reported it at creation (a real port, never 0)
    upstream: str
    address: str  # where the harness dials the listener
    probe: Probe


@dataclass(frozen=True)
class HealOutcome:
    proxy: str
    method: HealMethod  # "direct" unless a fallback was needed
    failures: tuple[str, ...] = ()  # why the earlier methods were not verified


class _UpstreamDown(Exception):
    """The upstream does not answer when dialled directly."""


class HealVerifier:
    """``upstream_wait``: how long an upstream may go unanswered before the heal gives
    up on it (`UpstreamDown`) rather than wait the whole ``timeout``: a node that is
    down stays down until someone starts it, and a composed heal retries its links once
    the processes are back (faults/nemesis/core.py)."""

    def __init__(self, client: ToxiproxyClient, timeout: float = 5.0,
                 interval: float = 0.05, upstream_wait: float = 1.0) -> None:
        self.client = client
        self.timeout = timeout
        self.interval = interval
        self.upstream_wait = upstream_wait

    def heal(self, spec: ProxySpec, *, toxics: Collection[str] = (),
             enable: bool = False) -> HealOutcome:
        """Remove ``toxics`` from the proxy (and enable it if ``enable``), verified;
        `UpstreamDown` when the upstream does not answer."""
        failures: list[str] = []
        steps: list[tuple[HealMethod, Callable[[], None]]] = [
            ("direct", lambda: self.undo(spec, toxics=toxics, enable=enable)),
            ("recreate", lambda: self._recreate(spec, toxics)),
            ("reset", self.client.reset),
        ]
        for method, step in steps:
            try:
                step()
            except ToxiproxyUnavailable as exc:
                raise HealError(spec.name, f"{method}: {exc}") from exc
            except ToxiproxyError as exc:
                failures.append(f"{method}: {exc}")
                continue
            try:
                problem = self._check(spec, toxics)
            except _UpstreamDown as exc:
                raise UpstreamDown(spec.name, "; ".join([*failures, str(exc)])) from None
            if problem is None:
                return HealOutcome(spec.name, method, tuple(failures))
            failures.append(f"{method}: {problem}")
        raise HealError(spec.name, "; ".join(failures))

    def undo(self, spec: ProxySpec, *, toxics: Collection[str] = (),
             enable: bool = False) -> None:
        """Remove ``toxics`` (and enable the proxy if ``enable``), unverified."""
        for name in toxics:
            # Already gone (or the proxy is): the check decides what that means.
            with contextlib.suppress(NotFound):
                self.client.remove_toxic(spec.name, name)
        if enable:
            self.client.enable(spec.name)

    def _recreate(self, spec: ProxySpec, healed: Collection[str]) -> None:
        """Delete and create the proxy at its address, re-adding the toxics that other
        faults still hold on it."""
        try:
            others = [t for t in self.client.toxics(spec.name) if t.name not in healed]
            self.client.delete_proxy(spec.name)
        except NotFound:
            others = []
        self.client.create_proxy(spec.name, spec.upstream, listen=spec.listen)
        for toxic in others:
            self.client.add_toxic(spec.name, toxic.name, toxic.type, stream=toxic.stream,
                                  toxicity=toxic.toxicity, attributes=toxic.attributes)

    def _check(self, spec: ProxySpec, healed: Collection[str]) -> str | None:
        """None once the proxy is as it must be and bytes cross it; else the last
        problem seen before the timeout."""
        deadline = time.monotonic() + self.timeout
        unanswered_since: float | None = None
        while True:
            problem = self._problem(spec, healed, max(0.1, deadline - time.monotonic()))
            if problem is None:
                return None
            now = time.monotonic()
            if problem.upstream_down:
                unanswered_since = now if unanswered_since is None else unanswered_since
                if now >= deadline or now - unanswered_since >= self.upstream_wait:
                    raise _UpstreamDown(problem.text)
            else:
                unanswered_since = None
            if now >= deadline:
                return problem.text
            time.sleep(self.interval)

    def _problem(self, spec: ProxySpec, healed: Collection[str], wait: float) -> _Problem | None:
        try:
            proxy = self.client.proxy(spec.name)
        except NotFound:
            return _Problem("the proxy is gone")
        except ToxiproxyError as exc:
            return _Problem(str(exc))
        wrong = _differences(proxy, spec, healed)
        if wrong:
            return _Problem(wrong)
        if not spec.probe(spec.upstream, wait):
            return _Problem(f"upstream {spec.upstream} does not answer when dialled directly",
                            upstream_down=True)
        if not spec.probe(spec.address, wait):
            return _Problem(f"no bytes through the proxy at {spec.address}")
        return None


@dataclass(frozen=True)
class _Problem:
    text: str
    upstream_down: bool = False


def _differences(proxy: ProxyInfo, spec: ProxySpec, healed: Collection[str]) -> str:
    problems = []
    if not proxy.enabled:
        problems.append("the proxy is disabled")
    if proxy.listen != spec.listen:
        problems.append(f"it listens on {proxy.listen}, not {spec.listen}")
    if proxy.upstream != spec.upstream:
        problems.append(f"its upstream is {proxy.upstream}, not {spec.upstream}")
    left = sorted(proxy.toxic_names() & set(healed))
    if left:
        problems.append(f"toxics still present: {', '.join(left)}")
    return "; ".join(problems)
