"""JSON for documents that hold AMQP field values (queue and exchange arguments), and back.

Field tables carry types JSON lacks: decimals, timestamps, byte arrays, and long strings
that are not UTF-8 (pamqp gives those as bytes). Each such value is written as a tagged
object ``{"__amqp__": TYPE, "value": TEXT}``; a table that itself has an ``__amqp__``
key is written as its list of entries, ``{"__amqp__": "table", "value": [[KEY, VALUE],
...]}``, so every document reads back exactly as written. Documents without such values
are plain JSON, unchanged.
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

TAG = "__amqp__"

_DECODERS: dict[str, Callable[[Any], Any]] = {
    "decimal": Decimal,
    "timestamp": datetime.datetime.fromisoformat,
    "bytes": base64.b64decode,
    "byte-array": lambda text: bytearray(base64.b64decode(text)),
    "table": dict,
}


def _tagged(value: Any) -> Any:
    if isinstance(value, dict):
        table = {key: _tagged(item) for key, item in value.items()}
        return {TAG: "table", "value": list(table.items())} if TAG in table else table
    if isinstance(value, list | tuple):
        return [_tagged(item) for item in value]
    if isinstance(value, Decimal):
        return {TAG: "decimal", "value": str(value)}
    if isinstance(value, datetime.datetime):
        return {TAG: "timestamp", "value": value.isoformat()}
    if isinstance(value, bytearray):
        return {TAG: "byte-array", "value": base64.b64encode(value).decode("ascii")}
    if isinstance(value, bytes):
        return {TAG: "bytes", "value": base64.b64encode(value).decode("ascii")}
    return value


def _untagged(obj: dict[str, Any]) -> Any:
    if TAG not in obj:
        return obj
    kind = obj[TAG]
    if kind not in _DECODERS or set(obj) != {TAG, "value"}:
        raise ValueError(f"not a tagged AMQP value: {obj!r}")
    return _DECODERS[kind](obj["value"])


def dumps(document: Any) -> str:
    return json.dumps(_tagged(document))


def loads(text: str | bytes) -> Any:
    """The document `dumps` wrote; raises ValueError (json.JSONDecodeError for text that
    is not JSON) for a malformed tagged value."""
    return json.loads(text, object_hook=_untagged)
