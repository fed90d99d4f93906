"""Field tables that are deep, wide, lying or wrongly typed, and where a client can put
one: its client properties, an AMQPLAIN response, declare/bind/consume arguments and a
message's headers.

The broker decodes tables by `cluster.amqp.fields` rules: nesting up to
`fields.MAX_DEPTH` containers inside the outermost table, every length within its
container. A table breaking them is refused with the code of the frame it came in.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

from cluster.amqp.fields import MAX_DEPTH, TOO_DEEP
from harness.hostile import wire
from harness.hostile.context import Built
from harness.hostile.expect import (
    ACCESS_REFUSED,
    CLOSE,
    FRAME_ERROR,
    SERVED,
    SYNTAX_ERROR,
    Expect,
    Reply,
)

# Type octets pamqp's table decoder does not know.
UNKNOWN_TYPES = b"cCeEghHjJkKmMnNoOpPqQrRUvwWXyYzZ\x01\x7f\xff"


def scalar(rng: random.Random) -> bytes:
    """A valid field value of a random type (type octet first)."""
    kind = rng.choice(b"tbBsuIilfdDSTVx")
    value: bytes
    if kind in b"tbB":
        value = bytes((rng.randrange(256),))
    elif kind in b"su":
        value = rng.randbytes(2)
    elif kind in b"Iif":
        value = rng.randbytes(4)
    elif kind in b"ld":
        value = rng.randbytes(8)
    elif kind == ord("D"):
        value = rng.randbytes(5)
    elif kind == ord("T"):  # seconds before 2106: pamqp reads larger ones as milliseconds
        value = struct.pack(">Q", rng.randrange(1 << 32))
    elif kind == ord("V"):
        value = b""
    else:  # S, x: a long string or byte array, text or not
        value = wire.long(rng.choice([b"", b"text", rng.randbytes(rng.randrange(40))]))
    return bytes((kind,)) + value


def entries(rng: random.Random, count: int) -> list[bytes]:
    return [wire.entry(f"k{i}", b"", scalar(rng)) for i in range(count)]


def _leaf(rng: random.Random, innermost: bytes) -> tuple[bytes, list[int]]:
    """Content for the innermost container: entries of a table or values of an array,
    and the size of each."""
    values = [scalar(rng) for _ in range(rng.randrange(4))]
    items = values if innermost == b"A" else [
        wire.entry(f"e{i}", b"", v) for i, v in enumerate(values)]
    return b"".join(items), [len(item) for item in items]


def depth_for(rng: random.Random) -> int:
    """Nesting depths around and far past the limit, up to thousands of levels."""
    roll = rng.random()
    if roll < 0.4:
        return rng.randint(0, MAX_DEPTH)
    if roll < 0.55:
        return rng.choice([MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2])
    return int(10 ** rng.uniform(2.01, 3.7))


@dataclass(frozen=True)
class Table:
    """An encoded field table (length prefix first) and whether the broker must take it;
    when not, what its reply text must say."""

    raw: bytes
    valid: bool
    refusal: str = ""


_KINDS = bytes(b"FA"[i % 2] for i in range(256))  # a random octet to a container type


def kinds(rng: random.Random, depth: int) -> bytes:
    """Container types for ``depth`` levels: all tables, all arrays, or mixed."""
    roll = rng.random()
    if roll < 0.2:
        return b"F" * depth
    if roll < 0.4:
        return b"A" * depth
    return rng.randbytes(depth).translate(_KINDS)


def deep(rng: random.Random) -> Table:
    depth = depth_for(rng)
    levels = kinds(rng, depth)
    leaf, _ = _leaf(rng, levels[-1:] or b"F")
    return Table(wire.nested(levels, leaf), depth <= MAX_DEPTH, TOO_DEEP)


def wide(rng: random.Random, room: int) -> Table:
    """Many entries (up to tens of thousands), or a few long values, in ``room`` bytes."""
    if rng.random() < 0.3:
        size = rng.randrange(max(1, room - 40))
        return Table(wire.table([wire.entry("big", b"S", wire.long(b"x" * size))]), True)
    array = b""
    if rng.random() < 0.5:  # an array of many values too
        array = wire.entry("arr", b"A", wire.long(b"V" * rng.randrange(room // 4)))
    # Entries of a void value, keys counting up in hex.
    key_size = rng.choice([1, 4, 20])
    one = 2 + key_size
    count = min(int(10 ** rng.uniform(0, 4.7)), (room - 4 - len(array)) // one)
    pattern = b"%c%0" + str(key_size).encode() + b"xV"
    items = b"".join(pattern % (key_size, i % 16 ** key_size) for i in range(count))
    return Table(wire.long(array + items), True)


def lying(rng: random.Random, nested_only: bool = False) -> Table:
    """A length prefix that lies: longer than what is left of its container, or shorter
    so that it ends inside its last item (ending between items would be valid). The
    outer table of client properties has arguments after it, so a longer outer length
    goes past the whole frame."""
    depth = rng.randint(1 if nested_only else 0, 6)
    levels = kinds(rng, depth)
    innermost = levels[-1:] or b"F"
    leaf, sizes = _leaf(rng, innermost)
    if not sizes:  # something to cut into
        leaf = scalar(rng) if innermost == b"A" else wire.entry("e", b"", scalar(rng))
        sizes = [len(leaf)]
    level = rng.randint(1 if nested_only else 0, depth)
    # A level holds one item, the next container, except the innermost: the leaf's.
    last = sizes[-1] if level == depth else wire.content_sizes(levels, leaf)[level]
    if last > 1 and rng.random() < 0.5:
        delta = -rng.randint(1, last - 1)
    else:
        delta = rng.choice([1, 2, 7, 1000, 1 << 20, 1 << 31] if level else [1000, 1 << 31])
    return Table(wire.nested(levels, leaf, (level, delta)), False)


def bad_value(rng: random.Random) -> Table:
    """An unknown type octet, a key that is not UTF-8, or a timestamp past year 9999."""
    good = entries(rng, rng.randrange(3))
    roll = rng.random()
    if roll < 0.5:
        bad = wire.entry("odd", bytes((rng.choice(UNKNOWN_TYPES),)), rng.randbytes(4))
    elif roll < 0.75:
        bad = wire.short(b"\xff\xfe") + scalar(rng)
    else:
        bad = wire.entry("when", b"T", struct.pack(">Q", rng.randrange(253402300800000, 1 << 64)))
    rng.shuffle(good)
    return Table(wire.table([*good, bad]), False)


# -- where a table goes -----------------------------------------------------------------

def _with_entries(raw: bytes, extra: bytes) -> bytes:
    """``raw`` with ``extra`` entries first, its (possibly lying) length grown to match."""
    declared = struct.unpack_from(">I", raw)[0]
    return struct.pack(">I", (declared + len(extra)) & 0xFFFFFFFF) + extra + raw[4:]


EXCLUSIVE = 0x04  # queue.declare's exclusive bit: the queue goes with its connection


def _declare(name: str, arguments: bytes = b"\x00\x00\x00\x00", flags: int = EXCLUSIVE) -> bytes:
    return wire.method_raw(1, 50, 10, b"\x00\x00" + wire.short(name) + bytes((flags,))
                           + arguments)


def _answer(table: Table, replies: tuple[Reply, ...], served: tuple[Reply, ...], code: int,
            what: str) -> Expect:
    if table.valid:
        return Expect(SERVED, replies=replies + served)
    return Expect(CLOSE, code, table.refusal or what, replies)


Location = Callable[[Table, str], Built]


def in_client_properties(table: Table, name: str) -> Built:
    data = wire.start_ok_raw(table.raw)
    return Built("header", data, _answer(table, (), ((0, "Connection.Tune"),), FRAME_ERROR,
                                          "malformed method"))


def in_amqplain(table: Table, name: str) -> Built:
    """The response is a table without its length prefix (the broker adds one); a login
    that does not decode is refused with 403."""
    login = wire.entry("LOGIN", b"S", wire.long(b"guest")) + wire.entry(
        "PASSWORD", b"S", wire.long(b"guest"))
    response = _with_entries(table.raw, login)[4:]
    properties = wire.table([wire.entry("capabilities", b"F", wire.table([
        wire.entry("authentication_failure_close", b"t", b"\x01")]))])
    data = wire.start_ok_raw(properties, "AMQPLAIN", response)
    return Built("header", data, _answer(table, (), ((0, "Connection.Tune"),),
                                          ACCESS_REFUSED, "malformed AMQPLAIN response"))


def in_queue_declare(table: Table, name: str) -> Built:
    return Built("open", _declare(name, table.raw), _answer(
        table, (), ((1, "Queue.DeclareOk"),), FRAME_ERROR, "malformed method"))


def in_exchange_declare(table: Table, name: str) -> Built:
    arguments = b"\x00\x00" + wire.short(name) + wire.short("direct") + b"\x04" + table.raw
    return Built("open", wire.method_raw(1, 40, 10, arguments), _answer(
        table, (), ((1, "Exchange.DeclareOk"),), FRAME_ERROR, "malformed method"))


def _on_queue(method_id: int, reply: str, class_id: int = 50) -> Location:
    def place(table: Table, name: str) -> Built:
        if class_id == 60:  # basic.consume: queue, consumer tag, bits
            arguments = wire.short(name) + wire.short("") + b"\x02"
        else:  # queue.bind / unbind: queue, exchange, routing key (bind: a bit)
            arguments = wire.short(name) + wire.short("amq.direct") + wire.short(name) + (
                b"\x00" if method_id == 20 else b"")
        data = _declare(name) + wire.method_raw(1, class_id, method_id,
                                                b"\x00\x00" + arguments + table.raw)
        return Built("open", data, _answer(table, ((1, "Queue.DeclareOk"),),
                                            ((1, reply),), FRAME_ERROR, "malformed method"))
    return place


def in_headers(table: Table, name: str) -> Built:
    """A message's headers, published with confirms: a valid one is acknowledged."""
    body = b"hostile"
    data = (wire.method_raw(1, 85, 10, b"\x00") + wire.publish(1)
            + wire.content_header(1, len(body), b"\x20\x00" + table.raw) + wire.body(1, body))
    return Built("open", data, _answer(table, ((1, "Confirm.SelectOk"),),
                                        ((1, "Basic.Ack"),), SYNTAX_ERROR,
                                        "malformed content header"))


LOCATIONS: dict[str, Location] = {
    "client-properties": in_client_properties,
    "amqplain": in_amqplain,
    "queue-declare": in_queue_declare,
    "exchange-declare": in_exchange_declare,
    "queue-bind": _on_queue(20, "Queue.BindOk"),
    "queue-unbind": _on_queue(50, "Queue.UnbindOk"),
    "basic-consume": _on_queue(20, "Basic.ConsumeOk", class_id=60),
    "headers": in_headers,
}
