"""Request bodies decoded the way toxiproxy's Go server decodes them.

Go's ``json.Decoder`` reads one value and ignores what follows, reports an empty body
as ``EOF``, leaves a field alone when it is absent or ``null``, matches keys
case-insensitively and refuses a value of the wrong JSON type. Clients see those
rules, so the server keeps them.
"""

from __future__ import annotations

import json
from typing import Any, Final

from .errors import ApiError, bad_request_body

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def _reject_constant(name: str) -> None:
    # Python would accept NaN and Infinity; JSON (and Go) do not.
    raise ValueError(f"invalid character '{name[0]}' looking for beginning of value")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def decode_body(raw: bytes) -> Any:
    """The first JSON value of a request body, or toxiproxy's "bad request body" error."""
    text = raw.decode("utf-8", errors="replace").lstrip(" \t\r\n")
    if not text:
        raise bad_request_body("EOF")
    try:
        value, _ = _DECODER.raw_decode(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text):
            raise bad_request_body("unexpected EOF") from None
        raise bad_request_body(
            f"invalid character {text[exc.pos]!r} at offset {exc.pos}: {exc.msg}"
        ) from None
    except ValueError as exc:
        raise bad_request_body(str(exc)) from None
    return value


def json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def type_error(value: object, where: str, go_type: str) -> ApiError:
    kind = json_kind(value)
    return bad_request_body(f"json: cannot unmarshal {kind} into {where} of type {go_type}")


def expect_object(value: object, go_type: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise type_error(value, "Go value", go_type)
    return value


def lookup(obj: dict[str, Any], key: str) -> Any:
    """A field by exact name, else by case-insensitive name; None when absent or null."""
    if key in obj:
        return obj[key]
    return next((v for k, v in obj.items() if k.lower() == key), None)


def string_field(obj: dict[str, Any], key: str, struct: str) -> str | None:
    value = lookup(obj, key)
    if value is None or isinstance(value, str):
        return value
    raise type_error(value, f"Go struct field {struct}.{key}", "string")


def bool_field(obj: dict[str, Any], key: str, struct: str) -> bool | None:
    value = lookup(obj, key)
    if value is None or isinstance(value, bool):
        return value
    raise type_error(value, f"Go struct field {struct}.{key}", "bool")


def float_field(obj: dict[str, Any], key: str, struct: str) -> float | None:
    value = lookup(obj, key)
    if value is None:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    raise type_error(value, f"Go struct field {struct}.{key}", "float32")


def int_field(obj: dict[str, Any], key: str, struct: str) -> int | None:
    value = lookup(obj, key)
    if value is None:
        return value
    # Go refuses 1.0 or 1e3 for an integer field, and so does this.
    if isinstance(value, int) and not isinstance(value, bool) and _INT64_MIN <= value <= _INT64_MAX:
        return value
    raise type_error(value, f"Go struct field {struct}.{key}", "int64")
