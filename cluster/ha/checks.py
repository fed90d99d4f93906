"""Taking a peer's envelope apart: `MalformedEnvelope`, and the checks `cluster.ha.wire`
reads every decoded value through. A value passes only if it is exactly of its type
(True is no number here); the error names the value and what belongs there."""

from __future__ import annotations

from typing import Any, TypeVar

from cluster.core.message import Message
from cluster.ha.messages import QueueRef
from cluster.peer.codec import CodecError

T = TypeVar("T")
Fields = dict[str, Any]


class MalformedEnvelope(CodecError):
    """A peer's envelope that is framed right but is none of the protocol's: an unknown
    kind, a field missing or of the wrong type, a payload that does not parse. Nothing
    of it has been acted on; the node drops it."""


def expect(value: object, kind: type[T], what: str) -> T:
    """``value`` if it is exactly a ``kind``."""
    if type(value) is not kind:
        raise wrong(value, what)
    return value


def wrong(value: object, what: str) -> MalformedEnvelope:
    return MalformedEnvelope(f"{value!r} where {what} belongs")


# What a value of each type is called in an error.
_WHAT: dict[type, str] = {int: "a number", str: "a string", bool: "true or false",
                          list: "a list", Message: "a message"}


def record(values: object, types: tuple[type, ...]) -> list[Any]:
    """``values``, a list of exactly ``types``, one for one. The check is one pass in C
    (``map``): it runs for every message a replica receives. The error names the first
    value that is wrong."""
    if type(values) is list and tuple(map(type, values)) == types:
        return values
    given = items(values)
    for value, kind in zip(given, types, strict=False):
        if type(value) is not kind:
            raise wrong(value, _WHAT[kind])
    raise MalformedEnvelope(f"{len(given)} values where {len(types)} belong")


# The readers of single values: each checks its type itself, rather than through
# `expect`, since they run for every field of every envelope received.

def number(value: object) -> int:
    if type(value) is int:
        return value
    raise wrong(value, "a number")


def string(value: object) -> str:
    if type(value) is str:
        return value
    raise wrong(value, "a string")


def flag(value: object) -> bool:
    if type(value) is bool:
        return value
    raise wrong(value, "true or false")


def member(value: object) -> str:
    if type(value) is str:
        return value
    raise wrong(value, "a member")


def message(value: object) -> Message:
    return expect(value, Message, "a message")


def owner(value: object) -> str | None:
    if value is None or type(value) is str:
        return value
    raise wrong(value, "a channel or null")


def items(value: object) -> list[Any]:
    if type(value) is list:
        return value
    raise wrong(value, "a list")


_ONLY_INT = frozenset((int,))


def numbers(value: object) -> tuple[int, ...]:
    if type(value) is list and _ONLY_INT.issuperset(map(type, value)):
        return tuple(value)
    return tuple(number(i) for i in items(value))  # to name what is wrong


_QUEUE = (str, str)  # vhost, name


def queue(value: object) -> QueueRef:
    return QueueRef._make(record(value, _QUEUE))


def field(fields: Fields, key: str) -> Any:
    if key not in fields:
        raise MalformedEnvelope(f"no {key!r} field")
    return fields[key]
