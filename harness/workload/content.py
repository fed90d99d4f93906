"""What every published message carries, and how a delivery is checked against it.

The body starts with the message id; every ``large_every``-th message of a publisher
(by its sequence number) is padded to ``large_size`` bytes, past one frame (the
broker's frame_max is 128 KiB), so that bodies in several frames go through the
broker's store, its mirrors, their syncs and promotions. The padding repeats the id, so
a body that was cut, spliced or mixed with another message's shows. The properties a
broker must pass on unchanged are the message id, the delivery mode and one header
naming the message again.

A delivery is checked by recomputing all of it from its id: what differs is recorded
on the delivery's line (``corrupt``), for the checker's ``corrupted``.
"""

from __future__ import annotations

from typing import Any

import aio_pika

from harness.workload.spec import WorkloadSpec

SEPARATOR = b"|"
HEADER = "mirrorchaos-msg"  # names the message again, in the content header


def body(msg: str, spec: WorkloadSpec) -> bytes:
    """``msg``, padded to ``large_size`` when it is one of the large ones."""
    head = msg.encode()
    if not _large(msg, spec):
        return head
    unit = SEPARATOR + head
    repeats = -(-(spec.large_size - len(head)) // len(unit))
    return (head + unit * repeats)[:spec.large_size]


def message(msg: str, spec: WorkloadSpec) -> aio_pika.Message:
    mode = (aio_pika.DeliveryMode.PERSISTENT if spec.persistent
            else aio_pika.DeliveryMode.NOT_PERSISTENT)
    return aio_pika.Message(body(msg, spec), delivery_mode=mode, message_id=msg,
                            headers={HEADER: msg})


def message_id(payload: bytes) -> str:
    """The id a delivered body starts with (whatever follows it)."""
    return payload.split(SEPARATOR, 1)[0].decode("utf-8", "replace")


def differences(msg: str, payload: bytes, properties: Any, spec: WorkloadSpec) -> str | None:
    """What a delivery of ``msg`` has other than what was published, in words; None
    when it is whole. ``properties`` is the delivered message (its ``message_id``,
    ``delivery_mode`` and ``headers``)."""
    found = []
    expected = body(msg, spec)
    if payload != expected:
        same = next((i for i, (a, b) in enumerate(zip(payload, expected, strict=False))
                     if a != b), min(len(payload), len(expected)))
        found.append(f"a body of {len(payload)} bytes, {len(expected)} published, "
                     f"different from byte {same}")
    if properties.message_id != msg:
        found.append(f"message_id {properties.message_id!r}")
    mode = 2 if spec.persistent else 1
    if int(properties.delivery_mode or 1) != mode:
        found.append(f"delivery_mode {properties.delivery_mode}, {mode} published")
    header = (properties.headers or {}).get(HEADER)
    if header != msg:
        found.append(f"header {HEADER} {header!r}")
    return "; ".join(found) or None


def _large(msg: str, spec: WorkloadSpec) -> bool:
    if not spec.large_every:
        return False
    _, _, seq = msg.rpartition("-")
    return seq.isdigit() and int(seq) % spec.large_every == 0
