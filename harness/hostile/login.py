"""Input classes of the handshake: protocol headers not ours, logins that are
malformed, unknown or refused, tune-ok out of range, a vhost that does not exist."""

from __future__ import annotations

from harness.hostile import wire
from harness.hostile.context import Built, Context, close
from harness.hostile.expect import (
    ACCESS_REFUSED,
    COMMAND_INVALID,
    HANG_UP,
    HEADER,
    NOT_ALLOWED,
    Expect,
)


def unknown_mechanism(ctx: Context) -> Built:
    mechanism = ctx.rng.choice(["EXTERNAL", "CRAM-MD5", "plain", "", "PLAIN ", "X" * 200])
    data = wire.start_ok(mechanism=mechanism)
    return close("header", data, COMMAND_INVALID, "unknown authentication mechanism")


def malformed_plain(ctx: Context) -> Built:
    response = ctx.rng.choice([b"guest", b"\x00guest", b"\x00a\x00b\x00c", b"",
                               b"\x00\xff\xfe\x00guest", b"\x00guest\x00\xc3\x28"])
    return close("header", wire.start_ok(response=response), ACCESS_REFUSED,
                  "malformed PLAIN response")


def wrong_password(ctx: Context) -> Built:
    """A refused login: connection.close 403 for a client that said it can take one
    (authentication_failure_close), a hung-up socket for others."""
    response = ctx.rng.choice([b"\x00guest\x00wrong", b"\x00nobody\x00guest", b"\x00\x00"])
    if ctx.rng.random() < 0.5:
        return close("header", wire.start_ok(response=response), ACCESS_REFUSED,
                      "Login was refused")
    return Built("header", wire.start_ok(capabilities=False, response=response),
                 Expect(HANG_UP))


def tune_ok_out_of_range(ctx: Context) -> Built:
    if ctx.rng.random() < 0.6:
        frame_max = ctx.rng.choice([1, 8, 4095, ctx.limits.frame_max + 1, 0xFFFFFFFF])
        data = wire.tune_ok(frame_max)
        return close("start_ok", data, NOT_ALLOWED, f"frame_max={frame_max}")
    channel_max = ctx.rng.randint(ctx.limits.channel_max + 1, 65535)
    return close("start_ok", wire.tune_ok(0, channel_max), NOT_ALLOWED,
                  f"channel_max={channel_max}")


def unknown_vhost(ctx: Context) -> Built:
    vhost = ctx.rng.choice(["", "nope", "//", "%2F", "v" * 100])
    return close("tune_ok", wire.connection_open(vhost), NOT_ALLOWED, "not found")


def bad_protocol_header(ctx: Context) -> Built:
    """Not AMQP 0-9-1: an older or newer AMQP, another protocol, or noise. At most the
    eight octets of a header, so that the broker has read all it was sent when it
    hangs up (unread input would reset the socket before its answer is read)."""
    sent = bytearray(ctx.rng.choice([
        b"AMQP\x00\x00\x09\x00", b"AMQP\x01\x01\x00\x0a", b"AMQP\x00\x00\x08\x00",
        b"AMQP\x03\x01\x00\x00", b"GET / HT", b"\x16\x03\x01\x02\x00\x01\x00\x01",
        b"\x01\x00\x00\x00\x00\x00\x0c\x00"]))
    if ctx.rng.random() < 0.3:
        sent[ctx.rng.randrange(8)] ^= ctx.rng.randint(1, 255)
    if sent == wire.PROTOCOL_HEADER:  # the flip made it ours
        sent[0] ^= 0x20
    size = ctx.rng.randint(1, 8)
    while wire.PROTOCOL_HEADER.startswith(bytes(sent[:size])):  # a prefix just waits
        size += 1
    return Built("none", bytes(sent[:size]), Expect(HEADER))


