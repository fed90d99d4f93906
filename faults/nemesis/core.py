"""The nemesis protocol (as Jepsen's): ``setup``, ``invoke(op) -> completed op``,
``teardown``; the `Op` record; a no-op nemesis; and composition.

Conventions: an op a nemesis does not handle or cannot read raises (the caller's
fault); a fault the environment would not let us start or end completes as ``fail``
(nothing happened) or ``info`` (part of it happened), with the reason in ``error``,
so it goes into the run's record. ``teardown`` ends every fault the nemesis started
and raises if it cannot. Calls block; a runner calls them from one thread.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, runtime_checkable

OpType = Literal["invoke", "ok", "fail", "info"]

HEAL = "heal"  # every nemesis takes it: end every fault it started


@dataclass(frozen=True)
class Op:
    """What to do (``f``) and with what (``value``); invoked as ``invoke``, completed
    as ``ok``, ``fail`` or ``info`` with ``value`` saying what was done."""

    f: str
    value: Any = None
    type: OpType = "invoke"
    error: str | None = None

    def ok(self, value: Any = None) -> Op:
        return replace(self, type="ok", value=self.value if value is None else value)

    def fail(self, error: str, value: Any = None) -> Op:
        return replace(self, type="fail", error=error,
                       value=self.value if value is None else value)

    def info(self, error: str, value: Any = None) -> Op:
        return replace(self, type="info", error=error,
                       value=self.value if value is None else value)


class UnsupportedOp(ValueError):
    """The nemesis does not handle this ``f``."""


class InvalidOp(ValueError):
    """The op's value cannot be read (unknown node, link, kind or attribute)."""


class Nemesis(Protocol):
    @property
    def fs(self) -> frozenset[str]:
        """The ``f`` values this nemesis handles, ``heal`` included."""

    def setup(self) -> None: ...

    def invoke(self, op: Op) -> Op: ...

    def teardown(self) -> None:
        """End every fault still in effect; raise if one cannot be ended."""


@runtime_checkable
class Undoes(Protocol):
    """An optional capability: end every fault at once, unverified, so that `Compose`
    can clear all the link faults before any heal checks that bytes flow (two faults
    can hold toxics on one link)."""

    def undo(self) -> None: ...


class NoopNemesis:
    """For runs without faults: every op completes ok and nothing happens."""

    fs = frozenset({HEAL})

    def setup(self) -> None:
        return None

    def invoke(self, op: Op) -> Op:
        return op.ok()

    def teardown(self) -> None:
        return None


def require(op: Op, fs: frozenset[str]) -> None:
    if op.f not in fs:
        raise UnsupportedOp(f"no nemesis here handles {op.f!r}; handled: {sorted(fs)}")


def option(op: Op, key: str, default: Any = None) -> Any:
    """A key of the op's value (a mapping, or None for no options)."""
    if op.value is None:
        return default
    if not isinstance(op.value, dict):
        raise InvalidOp(f"{op.f}: value must be a mapping, got {op.value!r}")
    return op.value.get(key, default)


class Compose:
    """Several nemeses as one: each op goes to the one that handles its ``f``;
    ``heal``, ``setup`` and ``teardown`` go to all of them in the given order. One
    part's heal may need another's first: a node cannot rejoin through links that
    are still cut, and a link cannot be verified healed to a node that is down. So
    link faults go first, all of them undone (`Undoes`) before any is verified (two
    faults may hold toxics on one link), and a part whose heal did not come out ``ok``
    gets a second go once every other part has healed."""

    def __init__(self, nemeses: Sequence[Nemesis]) -> None:
        self.nemeses = list(nemeses)
        self._routes: dict[str, Nemesis] = {}
        for nemesis in self.nemeses:
            for f in nemesis.fs - {HEAL}:
                if f in self._routes:
                    raise ValueError(f"two nemeses handle {f!r}")
                self._routes[f] = nemesis
        self.fs = frozenset(self._routes) | {HEAL}

    def setup(self) -> None:
        for nemesis in self.nemeses:
            nemesis.setup()

    def invoke(self, op: Op) -> Op:
        require(op, self.fs)
        if op.f != HEAL:
            return self._routes[op.f].invoke(op)
        for nemesis in self.nemeses:
            if isinstance(nemesis, Undoes):
                nemesis.undo()
        results = [nemesis.invoke(op) for nemesis in self.nemeses]
        results = [result if result.type == "ok" else nemesis.invoke(op)
                   for nemesis, result in zip(self.nemeses, results, strict=True)]
        return _merge(op, results)

    def teardown(self) -> None:
        failures: list[Exception] = []
        for nemesis in self.nemeses:
            try:
                nemesis.teardown()
            except Exception as exc:  # every part must get its chance to heal
                failures.append(exc)
        if failures:
            raise ExceptionGroup("faults left in effect at teardown", failures)


def _merge(op: Op, parts: Iterable[Op]) -> Op:
    parts = list(parts)
    value = [part.value for part in parts]
    errors = [part.error for part in parts if part.error is not None]
    if any(part.type == "fail" for part in parts):
        return op.fail("; ".join(errors), value)
    if any(part.type == "info" for part in parts):
        return op.info("; ".join(errors), value)
    return op.ok(value)
