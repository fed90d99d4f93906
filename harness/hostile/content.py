"""Input classes of content: frames out of place, bodies longer or shorter than their
header says, body sizes over max_message_size, content headers that do not decode."""

from __future__ import annotations

import struct

from pamqp import commands

from harness.hostile import wire
from harness.hostile.context import Built, Context, close, probed
from harness.hostile.expect import (
    PRECONDITION_FAILED,
    SYNTAX_ERROR,
    UNEXPECTED_FRAME,
    WAITING,
    Expect,
)


def content_out_of_place(ctx: Context) -> Built:
    """Content frames where none may come (505), each variant with its reply text."""
    rng = ctx.rng
    publish, qos = wire.publish(1), wire.method(1, commands.Basic.Qos(prefetch_count=1))
    size = rng.randint(1, 300)
    head = wire.content_header(1, size)
    body = wire.body(1, b"b" * size)
    variants = [
        (head, "unexpected content header"),
        (body, "unexpected content body"),
        (publish + body, "unexpected content body"),
        (publish + qos, "expected content header"),
        (publish + head + qos, "expected content header"),
        (publish + head + head, "unexpected content header"),
        (publish + wire.content_header(1, size, class_id=rng.choice([0, 10, 50, 61, 65535])),
         "got one for class"),
        (publish + head + wire.body(1, b"b" * (size + rng.randint(1, 100))),
         "longer than its header's body size"),
        (publish + head + wire.body(1, b"b" * (size - 1)) + wire.body(1, b"bb"),
         "longer than its header's body size"),
        (publish + wire.content_header(1, 0) + wire.body(1, b"late"), "unexpected content body"),
    ]
    data, text = rng.choice(variants)
    return close("open", data, UNEXPECTED_FRAME, text)


def body_shorter(ctx: Context) -> Built:
    """Fewer body bytes than the header announced: the broker waits for the rest."""
    size = ctx.rng.randint(2, 20000)
    sent = ctx.rng.randrange(size)
    room = ctx.negotiated - 8  # body frames within the frame_max
    data = wire.publish(1) + wire.content_header(1, size) + b"".join(
        wire.body(1, b"s" * min(room, sent - start)) for start in range(0, sent, room))
    return Built("open", data, Expect(WAITING))


def body_over_max_size(ctx: Context) -> Built:
    """A body size over max_message_size closes the channel (406); the body frames that
    follow are dropped and the connection goes on (a new channel opens)."""
    size = ctx.rng.choice([ctx.limits.max_message_size + 1, (1 << 63) - 1, (1 << 64) - 1,
                           ctx.rng.randint(ctx.limits.max_message_size + 1, 1 << 40)])
    data = wire.publish(1) + wire.content_header(1, size) + b"".join(
        wire.body(1, b"z" * 100) for _ in range(ctx.rng.randrange(3)))
    return probed(data, PRECONDITION_FAILED, "larger than configured max size")


def malformed_content_header(ctx: Context) -> Built:
    rng = ctx.rng
    head = struct.pack(">HHQ", 60, 0, rng.randrange(100))
    payload = rng.choice([
        rng.randbytes(rng.randrange(14)),  # shorter than class, weight, size and flags
        head + b"\x80\x00",  # content type announced, missing
        head + b"\x80\x00" + bytes((rng.randint(10, 255),)) + b"abc",  # running past the end
        head + b"\x10\x00",  # delivery mode announced, missing
        head + b"\x00\x40" + rng.randbytes(rng.randrange(8)),  # timestamp cut short
        # Every property announced, in fewer octets than even empty ones take.
        head + b"\xff\xfc" + rng.randbytes(rng.randrange(24)),
    ])
    publish = wire.publish(1) if rng.random() < 0.5 else b""
    return close("open", publish + wire.raw_frame(wire.HEADER, 1, payload), SYNTAX_ERROR,
                  "malformed content header")


