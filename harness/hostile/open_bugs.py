"""Broker bugs reported and not fixed yet, and the input classes made to trigger them
(drawn only on request: `Generator(open_bugs=True)`, ``scripts/fuzz-hostile --open-bugs``).
`known_bug` tells their tracebacks from new ones."""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from pamqp import commands

from harness.hostile import tables, wire
from harness.hostile.context import Built, Context
from harness.hostile.expect import ANY, SERVED, Expect


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
    "name-validation": OpenBug(
        "a queue or exchange name that pamqp's reply constructors refuse (outside "
        "[a-zA-Z0-9-_.:@#,/+ ]): queue.declare-ok, basic.return and basic.get-ok raise "
        "ValueError",
        re.compile(r"ValueError: Invalid value for (queue|exchange)")),
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


UNUSUAL = "!$%&'()*;<=>?[]^`{|}~\"\u00e9\u4e2d"  # characters RabbitMQ takes in names


def unusual_names(ctx: Context) -> Built:
    """Valid names (any UTF-8 up to 255 octets) outside pamqp's narrower pattern: a
    queue declared, or an exchange whose messages are returned or fetched."""
    odd = ctx.name + "".join(ctx.rng.choice(UNUSUAL) for _ in range(ctx.rng.randint(1, 5)))
    if ctx.rng.random() < 0.4:
        data = wire.method_raw(1, 50, 10, b"\x00\x00" + wire.short(odd) + bytes((
            tables.EXCLUSIVE,)) + wire.table([]))
        return Built("open", data, Expect(SERVED, replies=((1, "Queue.DeclareOk"),)))
    declare = wire.method_raw(1, 40, 10, b"\x00\x00" + wire.short(odd) + wire.short("fanout")
                              + b"\x04" + wire.table([]))
    message = wire.content_header(1, 2) + wire.body(1, b"hi")
    if ctx.rng.random() < 0.5:  # unroutable and mandatory: returned
        publish = wire.method_raw(1, 60, 40, b"\x00\x00" + wire.short(odd) + wire.short("k")
                                  + b"\x01")
        return Built("open", declare + publish + message, Expect(SERVED, replies=(
            (1, "Exchange.DeclareOk"), (1, "Basic.Return"))))
    queue = wire.method(1, commands.Queue.Declare(queue=ctx.name, exclusive=True))
    bind = wire.method_raw(1, 50, 20, b"\x00\x00" + wire.short(ctx.name) + wire.short(odd)
                           + wire.short("k") + b"\x00" + wire.table([]))
    publish = wire.method_raw(1, 60, 40, b"\x00\x00" + wire.short(odd) + wire.short("k")
                              + b"\x00")
    get = wire.method(1, commands.Basic.Get(queue=ctx.name, no_ack=True))
    return Built("open", declare + queue + bind + publish + message + get, Expect(
        SERVED, replies=((1, "Exchange.DeclareOk"), (1, "Queue.DeclareOk"),
                         (1, "Queue.BindOk"), (1, "Basic.GetOk"))))


