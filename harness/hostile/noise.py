"""Random bytes at any point, random mutations of a valid session, and a valid input
that the runners and the judge must let through."""

from __future__ import annotations

from pamqp import commands, frame, header

from harness.hostile import methods, wire
from harness.hostile.context import STAGES, Built, Context
from harness.hostile.expect import ANY, SERVED, Expect


def random_bytes(ctx: Context) -> Built:
    stage = ctx.rng.choice(["none", *STAGES])
    size = ctx.rng.choice([ctx.rng.randint(1, 300), ctx.rng.randint(1, 20000)])
    data = ctx.rng.randbytes(size)
    if stage == "none" and ctx.rng.random() < 0.5:  # get past the header check at times
        data = wire.PROTOCOL_HEADER + data
    return Built(stage, data, Expect(ANY))


def _conversation(ctx: Context) -> bytes:
    """A valid session: handshake, declares, a bind, publishes with headers, consumes."""
    rng = ctx.rng
    headers = commands.Basic.Properties(headers={"h": {"n": [1, "two", {"three": 3}]}},
                                        delivery_mode=2, content_type="text/plain")
    steps = [ctx.prefix("open"),
             wire.method(1, commands.Queue.Declare(queue=ctx.name, exclusive=True,
                                                   arguments={"x-max-length": 100})),
             wire.method(1, commands.Queue.Bind(queue=ctx.name, exchange="amq.fanout")),
             wire.method(1, commands.Confirm.Select())]
    for _ in range(rng.randint(1, 4)):
        body = rng.randbytes(rng.randrange(200))
        steps.append(wire.publish(1, ctx.name) + frame.marshal(
            header.ContentHeader(0, len(body), headers), 1) + (wire.body(1, body) if body
                                                                else b""))
    steps.append(wire.method(1, commands.Basic.Consume(queue=ctx.name, consumer_tag="c")))
    steps.append(wire.method(1, commands.Basic.Ack(delivery_tag=1)))
    steps.append(wire.method(0, methods.build("Connection.Close")))
    return b"".join(steps)


def random_mutation(ctx: Context) -> Built:
    """A valid session with a few octets flipped, overwritten, dropped or inserted,
    anywhere: in the protocol header, the handshake, or later."""
    data = bytearray(_conversation(ctx))
    rng = ctx.rng
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(data))
        roll = rng.random()
        if roll < 0.35:
            data[at] ^= 1 << rng.randrange(8)
        elif roll < 0.6:
            data[at] = rng.choice([0x00, 0xFF, 0xCE, 0x7F, rng.randrange(256)])
        elif roll < 0.8:
            del data[at : at + rng.randint(1, 8)]
        else:
            data[at:at] = rng.randbytes(rng.randint(1, 8))
    return Built("none", bytes(data), Expect(ANY))


def served(ctx: Context) -> Built:
    """A valid input: the judge and runners must let a good one through."""
    data = (wire.method(1, commands.Queue.Declare(queue=ctx.name, exclusive=True))
            + wire.method(1, commands.Confirm.Select()) + wire.publish(1, ctx.name)
            + wire.content_header(1, 5) + wire.body(1, b"hello"))
    return Built("open", data, Expect(SERVED, replies=(
        (1, "Queue.DeclareOk"), (1, "Confirm.SelectOk"), (1, "Basic.Ack"))))


