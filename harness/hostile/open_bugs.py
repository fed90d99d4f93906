"""Broker bugs reported and not fixed yet, and the input classes made to trigger them
(drawn only on request: `Generator(open_bugs=True)`, ``scripts/fuzz-hostile --open-bugs``).
`known_bug` tells their tracebacks from new ones."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from harness.hostile import wire
from harness.hostile.context import Built, Context
from harness.hostile.expect import ANY, Expect


@dataclass(frozen=True)
class OpenBug:
    """A broker bug reported and not fixed yet: what triggers it, and the exception
    line (or 541 reply text) it shows as."""

    description: str
    signature: re.Pattern[str]


OPEN_BUGS = {
    "definitions-json": OpenBug(
        "a durable queue or exchange whose arguments hold a decimal, bytes, a byte array "
        "or a timestamp: saving definitions.json raises TypeError, then on every later "
        "definitions change, anyone's",
        re.compile(r"TypeError: Object of type \w+ is not JSON serializable")),
}


def known_bug(text: str) -> str:
    """The open bug an exception line or 541 reply text comes from, or ""."""
    return next((name for name, bug in OPEN_BUGS.items() if bug.signature.search(text)), "")


def unjsonable_arguments(ctx: Context) -> Built:
    value = ctx.rng.choice([b"D\x02\x00\x00\x00\x05", b"x" + wire.long(b"\x00\x01"),
                            b"S" + wire.long(b"\xff\xfe"), b"T" + struct.pack(">Q", 1)])
    arguments = wire.table([wire.entry("x-custom", b"", value)])
    if ctx.rng.random() < 0.5:
        data = wire.method_raw(1, 50, 10, b"\x00\x00" + wire.short(ctx.name) + b"\x02"
                               + arguments)
    else:
        data = wire.method_raw(1, 40, 10, b"\x00\x00" + wire.short(ctx.name)
                               + wire.short("direct") + b"\x02" + arguments)
    return Built("open", data, Expect(ANY))
