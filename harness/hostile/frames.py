"""Frame-level and method-level input classes: oversized, badly ended, unknown and cut
frames, frames where none may come, methods cut short, unknown, out of turn or only a
server's to send, and valid declarations the broker must serve: long multibyte names,
unusual names, arguments of types JSON lacks."""

from __future__ import annotations

import struct

from pamqp import commands

from harness.hostile import methods, tables, wire
from harness.hostile.context import STAGES, Built, Context, after_handshake, close, probed
from harness.hostile.expect import (
    CHANNEL_ERROR,
    COMMAND_INVALID,
    FRAME_ERROR,
    NOT_ALLOWED,
    NOT_FOUND,
    SERVED,
    SYNTAX_ERROR,
    UNEXPECTED_FRAME,
    WAITING,
    Expect,
)


def frame_over_max(ctx: Context) -> Built:
    stage = after_handshake(ctx.rng)
    # Over the negotiated frame_max only where it surely binds: after open's answer.
    limit = ctx.negotiated if stage == "open" and ctx.rng.random() < 0.5 else max(
        ctx.limit(stage), ctx.limits.frame_max)
    size = min(limit - 8 + ctx.rng.choice([1, 2, 1000, 1 << 24]), 0xFFFFFFFF)
    if ctx.rng.random() < 0.2:
        size = 0xFFFFFFFF
    head = struct.pack(">BHI", ctx.rng.choice([1, 2, 3, 8]), ctx.rng.choice([0, 1, 7]), size)
    return close(stage, head + ctx.rng.randbytes(ctx.rng.randrange(60)), FRAME_ERROR,
                  "exceeds frame_max")


def bad_frame_end(ctx: Context) -> Built:
    stage = after_handshake(ctx.rng)
    payload = ctx.rng.randbytes(ctx.rng.randrange(min(200, ctx.limit(stage) - 8)))
    end = ctx.rng.choice([0x00, 0xCD, 0xCF, 0xFF, ctx.rng.randrange(0xCE)])
    data = wire.raw_frame(ctx.rng.choice([1, 2, 3, 8]), ctx.rng.choice([0, 1, 5]), payload, end)
    return close(stage, data, FRAME_ERROR, "frame end octet")


def unknown_frame_type(ctx: Context) -> Built:
    stage = after_handshake(ctx.rng)
    kind = ctx.rng.choice([0, 4, 5, 6, 7, 9, 0x41, 0xCE, 0xFF, ctx.rng.randrange(9, 256)])
    data = wire.raw_frame(kind, ctx.rng.choice([0, 1, 300]), ctx.rng.randbytes(
        ctx.rng.randrange(50)))
    return close(stage, data, FRAME_ERROR, "unknown frame type")


def _next_frame(ctx: Context, stage: str) -> bytes:
    """A valid frame a client could send after ``stage``."""
    if stage == "none":
        return wire.PROTOCOL_HEADER
    if stage == "header":
        return wire.start_ok()
    if stage == "start_ok":
        return wire.tune_ok(ctx.frame_max)
    if stage == "tune_ok":
        return wire.connection_open()
    return ctx.rng.choice([
        wire.method(1, ctx.rng.choice(methods.CHANNEL_METHODS)),
        wire.content_header(1, 10),
        wire.body(1, ctx.rng.randbytes(ctx.rng.randint(1, 100))),
        wire.publish(1) + wire.content_header(1, 50) + wire.body(1, b"x" * 50),
    ])


def truncated_frame(ctx: Context) -> Built:
    """Stops inside a frame (or the protocol header): the broker waits for the rest."""
    stage = ctx.rng.choice(["none", *STAGES])
    frame = _next_frame(ctx, stage)
    return Built(stage, frame[: ctx.rng.randrange(1, len(frame))], Expect(WAITING))


def heartbeat_on_channel(ctx: Context) -> Built:
    data = wire.raw_frame(wire.HEARTBEAT, ctx.rng.randint(1, 65535), b"")
    return close(after_handshake(ctx.rng), data, UNEXPECTED_FRAME, "heartbeat frame on channel")


def content_on_channel_zero(ctx: Context) -> Built:
    kind = ctx.rng.choice([wire.HEADER, wire.BODY])
    data = wire.raw_frame(kind, 0, ctx.rng.randbytes(ctx.rng.randrange(40)))
    return close(after_handshake(ctx.rng), data, UNEXPECTED_FRAME, "content frame on channel 0")


def frame_before_open(ctx: Context) -> Built:
    stage = ctx.rng.choice(STAGES[:3])
    kind = ctx.rng.choice([wire.METHOD, wire.HEADER, wire.BODY])
    data = wire.raw_frame(kind, ctx.rng.randint(1, 65535), ctx.rng.randbytes(
        ctx.rng.randrange(40)))
    return close(stage, data, CHANNEL_ERROR, "before the connection is open")


# -- method frames ----------------------------------------------------------------------

def _method_channel(ctx: Context, stage: str) -> int:
    return ctx.rng.choice([0, 1, 2]) if stage == "open" else 0


def short_method(ctx: Context) -> Built:
    stage = after_handshake(ctx.rng)
    data = wire.raw_frame(wire.METHOD, _method_channel(ctx, stage), ctx.rng.randbytes(
        ctx.rng.randrange(4)))
    return close(stage, data, FRAME_ERROR, "too short")


def unknown_method(ctx: Context) -> Built:
    stage = after_handshake(ctx.rng)
    while True:
        index = ctx.rng.choice([ctx.rng.randrange(1 << 32), (10 << 16) | ctx.rng.randrange(
            100, 1 << 16), (ctx.rng.randrange(1 << 16) << 16) | 10])
        if index not in commands.INDEX_MAPPING:
            break
    data = wire.raw_frame(wire.METHOD, _method_channel(ctx, stage), struct.pack(
        ">I", index) + ctx.rng.randbytes(ctx.rng.randrange(20)))
    return close(stage, data, SYNTAX_ERROR, "unknown method")


def _method_for(ctx: Context, stage: str) -> tuple[int, bytes]:
    """A valid method frame's channel and payload, one the client could send next."""
    if stage == "open":
        method = ctx.rng.choice(methods.CHANNEL_METHODS)
        channel = 1
    else:
        frame = _next_frame(ctx, stage)
        return 0, frame[7:-1]
    return channel, wire.method(channel, method)[7:-1]


def truncated_arguments(ctx: Context) -> Built:
    """A method whose arguments stop short, in a frame of the shortened size."""
    stage = after_handshake(ctx.rng)
    channel, payload = _method_for(ctx, stage)
    while len(payload) <= 4:  # no arguments to cut
        channel, payload = _method_for(ctx, stage)
    cut = payload[: ctx.rng.randrange(4, len(payload))]
    return close(stage, wire.raw_frame(wire.METHOD, channel, cut), FRAME_ERROR,
                  "malformed method")


def bad_utf8(ctx: Context) -> Built:
    """A short string argument (a name, a routing key, a mechanism) that is not UTF-8."""
    junk = wire.short(ctx.rng.choice([b"\xff", b"\xc3\x28", b"ok\xe2\x82", b"\xed\xa0\x80"]))
    stage = ctx.rng.choice(["header", "tune_ok", "open", "open"])
    if stage == "header":
        data = wire.start_ok_raw(wire.table([]), junk)
    elif stage == "tune_ok":
        data = wire.method_raw(0, 10, 40, junk + b"\x00\x00")
    elif ctx.rng.random() < 0.5:
        data = wire.method_raw(1, 50, 10, b"\x00\x00" + junk + b"\x00" + wire.table([]))
    else:  # basic.publish's fast path
        data = wire.method_raw(1, 60, 40, b"\x00\x00" + wire.short("") + junk + b"\x00")
    return close(stage, data, FRAME_ERROR, "malformed method")


def out_of_turn(ctx: Context) -> Built:
    """A connection method out of its turn (503), another class's method on channel 0
    (504), or a connection method on a channel (503)."""
    stage = after_handshake(ctx.rng)
    roll = ctx.rng.random()
    if roll < 0.4:
        name = ctx.rng.choice([n for n in methods.CONNECTION_METHODS
                               if n != methods.EXPECTED_NEXT[stage]
                               and n not in methods.NEVER_OUT_OF_TURN])
        return close(stage, wire.method(0, methods.build(name)), COMMAND_INVALID,
                      "is not valid on channel 0")
    if roll < 0.8 or stage != "open":
        name = ctx.rng.choice(methods.OTHER_METHODS)
        return close(stage, wire.method(0, methods.build(name)), CHANNEL_ERROR,
                      "is not valid on channel 0")
    name = ctx.rng.choice(methods.CONNECTION_METHODS)
    return close(stage, wire.method(1, methods.build(name)), COMMAND_INVALID,
                  "connection method")


def unopened_channel(ctx: Context) -> Built:
    channel = ctx.rng.randint(2, 65535)
    if ctx.rng.random() < 0.6:
        name = ctx.rng.choice([n for n in methods.OTHER_METHODS if n != "Channel.Open"])
        return close("open", wire.method(channel, methods.build(name)), CHANNEL_ERROR,
                      "expected 'channel.open'")
    data = wire.raw_frame(ctx.rng.choice([wire.HEADER, wire.BODY]), channel, b"\x00" * 14)
    return close("open", data, UNEXPECTED_FRAME, "which is not open")


def second_channel_open(ctx: Context) -> Built:
    return close("open", wire.channel_open(1), CHANNEL_ERROR, "second 'channel.open'")


def server_only_method(ctx: Context) -> Built:
    name = ctx.rng.choice(methods.SERVER_ONLY)
    return close("open", wire.method(1, methods.build(name)), COMMAND_INVALID,
                  "is not valid from a client")


def multibyte_reply_text(ctx: Context) -> Built:
    """Names of up to 254 octets of two-octet characters, echoed in a reply text that
    must be cut to 255 octets, not characters (the end of the text may go)."""
    name = ctx.rng.choice("\u00e9\u00fc\u0436") * ctx.rng.randint(110, 127)
    roll = ctx.rng.random()
    if roll < 0.25:
        data = wire.method(1, commands.Exchange.Declare(exchange=ctx.name, exchange_type=name))
        return close("open", data, COMMAND_INVALID, "unknown exchange type")
    if roll < 0.5:
        return close("header", wire.start_ok(mechanism=name), COMMAND_INVALID,
                      "unknown authentication mechanism")
    if roll < 0.75:
        return close("tune_ok", wire.connection_open(name), NOT_ALLOWED, "vhost")
    data = wire.method_raw(1, 50, 10, b"\x00\x00" + wire.short(name) + b"\x01"
                           + wire.table([]))  # passive
    return probed(data, NOT_FOUND, "no queue")


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


DURABLE = 0x02  # queue.declare's and exchange.declare's durable bit: saved in definitions
# Argument values of types JSON lacks: a decimal, a byte array, a long string that is not
# UTF-8 (pamqp gives bytes), a timestamp.
UNJSONABLE = (b"D\x02\x00\x00\x00\x05", b"x" + wire.long(b"\x00\x01"),
              b"S" + wire.long(b"\xff\xfe"), b"T" + struct.pack(">Q", 1))


def _durable_queue(name: str, arguments: bytes) -> bytes:
    return wire.method_raw(1, 50, 10, b"\x00\x00" + wire.short(name) + bytes((DURABLE,))
                           + arguments)


def typed_arguments(ctx: Context) -> Built:
    """A durable queue or exchange whose arguments hold a value JSON lacks, so saving
    definitions must encode it; declared again with the same arguments (equivalent),
    then another durable queue, to show that later definitions changes still save."""
    arguments = wire.table([wire.entry("x-custom", b"", ctx.rng.choice(UNJSONABLE))])
    if ctx.rng.random() < 0.5:
        declare = _durable_queue(ctx.name, arguments)
        reply = (1, "Queue.DeclareOk")
    else:
        declare = wire.method_raw(1, 40, 10, b"\x00\x00" + wire.short(ctx.name)
                                  + wire.short("direct") + bytes((DURABLE,)) + arguments)
        reply = (1, "Exchange.DeclareOk")
    after = _durable_queue(ctx.name + "-after", wire.table([]))
    return Built("open", declare + declare + after, Expect(SERVED, replies=(
        reply, reply, (1, "Queue.DeclareOk"))))
