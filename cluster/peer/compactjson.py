"""Compact JSON for the peer protocol's headers and skeletons, with the json module's C
encoder and scanner built once.

`json.dumps` and `json.loads` (and a `JSONEncoder`'s ``encode``) build a new C encoder
or go through three Python calls on every call, which costs as much again as encoding
a frame's header itself; a node encodes and decodes several per message it replicates.
What is written and read is the json module's own JSON, compact (no spaces).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json import encoder, scanner
from typing import Any

Encode = Callable[[Any], str]
Decode = Callable[[str], Any]


def _no_default(value: object) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def make_encoder(default: Callable[[Any], Any] = _no_default) -> Encode:
    """A function from a value to its compact JSON; ``default`` turns what JSON has no
    type for into something it has (or raises `TypeError`)."""
    make = getattr(encoder, "c_make_encoder", None)  # not in the stubs: CPython's own
    if make is None:  # an interpreter without the json accelerator
        return json.JSONEncoder(separators=(",", ":"), default=default).encode
    # No check for cycles (markers None): what the protocol encodes is built fresh.
    chunks = make(None, default, encoder.encode_basestring_ascii, None, ":", ",", False,
                  False, True)
    return lambda value: "".join(chunks(value, 0))


def make_decoder(object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Decode:
    """A function from JSON text to its value, as `json.loads` reads it; ``object_hook``
    as `json.JSONDecoder`'s. A text that is not one JSON value and nothing after it
    raises `json.JSONDecodeError`."""
    decoder: Any = json.JSONDecoder(object_hook=object_hook)  # the stubs want a scanner
    scan = scanner.make_scanner(decoder)

    def decode(text: str) -> Any:
        try:
            value, end = scan(text, 0)
        except StopIteration as error:
            raise json.JSONDecodeError("Expecting value", text, error.value) from None
        if end != len(text):
            raise json.JSONDecodeError("Extra data", text, end)
        return value

    return decode


dumps = make_encoder()
loads = make_decoder()
