"""`framing.decode_confirm`: publisher confirms read without method objects, the
inverse of `confirm_frame`, and None for everything else."""

from __future__ import annotations

import pytest
from pamqp import commands

from cluster.amqp import framing


def _payload(frame: bytes) -> bytes:
    reader = framing.FrameReader(4096)
    reader.feed(frame)
    ((kind, _channel, payload),) = reader.frames()
    assert kind == framing.FRAME_METHOD
    return payload


@pytest.mark.parametrize("tag", [1, 255, 2**32 + 7, 2**63 - 1])
@pytest.mark.parametrize("multiple", [False, True])
@pytest.mark.parametrize("ack", [False, True])
def test_decode_confirm_reads_what_confirm_frame_encodes(tag: int, multiple: bool,
                                                         ack: bool) -> None:
    payload = _payload(framing.confirm_frame(3, tag, multiple, ack))
    assert framing.decode_confirm(payload) == (tag, multiple, ack)


@pytest.mark.parametrize("method", [
    commands.Basic.Ack(9, multiple=True),
    commands.Basic.Nack(9, multiple=False, requeue=False),
])
def test_decode_confirm_agrees_with_decode_method(
    method: commands.Basic.Ack | commands.Basic.Nack,
) -> None:
    payload = _payload(framing.method_frame(1, method))
    decoded = framing.decode_method(payload)
    assert isinstance(decoded, (framing.Ack, commands.Basic.Nack))
    assert framing.decode_confirm(payload) == (
        decoded.delivery_tag, decoded.multiple, isinstance(decoded, framing.Ack))


@pytest.mark.parametrize("method", [
    commands.Basic.Reject(9),  # same length as a confirm, another method
    commands.Basic.Qos(prefetch_count=10),
    commands.Basic.Deliver("c", 1, False, "", "q"),
    commands.Channel.Close(404, "NOT_FOUND", 50, 10),
])
def test_decode_confirm_leaves_other_methods_alone(method: object) -> None:
    assert framing.decode_confirm(_payload(framing.method_frame(1, method))) is None


def test_a_confirm_of_another_length_is_left_to_decode_method() -> None:
    payload = _payload(framing.confirm_frame(1, 5, False))
    assert framing.decode_confirm(payload + b"\x00") is None
    assert framing.decode_confirm(payload[:-1]) is None
