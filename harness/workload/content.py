"""What every published message carries, and how a delivery is checked against it.

The body starts with the message id; every ``large_every``-th message of a publisher
(by its sequence number) is padded to ``large_size`` bytes, past one frame (the
broker's frame_max is 128 KiB), so that bodies in several frames go through the
broker's store, its mirrors, their syncs and promotions. The padding repeats the id, so
a body that was cut, spliced or mixed with another message's shows. Every
``transient_every``-th message, and every message of the first ``transient_publishers``
publishers, is published transient (delivery mode 1), so that the paths a message held
only in memory takes are tried too. The properties a broker must pass on unchanged are
the message id, the delivery mode and one header naming the message again. Through a
topic exchange, a message's routing key is its queue's name followed by nothing, by its
publisher's id, or by that and its sequence number (in turn), all bound by
``<queue>.#``.

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
    if not _nth(msg, spec.large_every):
        return head
    unit = SEPARATOR + head
    repeats = -(-(spec.large_size - len(head)) // len(unit))
    return (head + unit * repeats)[:spec.large_size]


def persistent(msg: str, spec: WorkloadSpec) -> bool:
    if not spec.persistent or _nth(msg, spec.transient_every):
        return False
    transient = spec.client_ids()["publisher"][:spec.transient_publishers]
    return msg.rpartition("-")[0] not in transient


def publish_fields(msg: str, spec: WorkloadSpec) -> dict[str, bool]:
    """What a publish line of ``msg`` says of it besides the run's config: a transient
    message among persistent ones says so (docs/history-format.md)."""
    return {} if persistent(msg, spec) == spec.persistent else {"persistent": False}


def message(msg: str, spec: WorkloadSpec) -> aio_pika.Message:
    mode = (aio_pika.DeliveryMode.PERSISTENT if persistent(msg, spec)
            else aio_pika.DeliveryMode.NOT_PERSISTENT)
    return aio_pika.Message(body(msg, spec), delivery_mode=mode, message_id=msg,
                            headers={HEADER: msg})


def routing_key(msg: str, queue: str, spec: WorkloadSpec) -> str:
    """Where ``msg`` goes: ``queue``, or through a topic exchange a key that
    `binding_key` matches with zero, one or two words for its ``#``."""
    if spec.exchange is None or spec.exchange_type == "direct":
        return queue
    producer, _, seq = msg.rpartition("-")
    words = [queue, producer, seq]
    return ".".join(words[:1 + int(seq) % 3]) if seq.isdigit() else queue


def binding_key(queue: str, spec: WorkloadSpec) -> str:
    """How ``queue`` is bound to the workload's exchange."""
    return f"{queue}.#" if spec.exchange_type == "topic" else queue


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
    mode = 2 if persistent(msg, spec) else 1
    if int(properties.delivery_mode or 1) != mode:
        found.append(f"delivery_mode {properties.delivery_mode}, {mode} published")
    header = (properties.headers or {}).get(HEADER)
    if header != msg:
        found.append(f"header {HEADER} {header!r}")
    return "; ".join(found) or None


def _nth(msg: str, every: int) -> bool:
    """Whether ``msg`` is one of every ``every``-th of its publisher (0: none is)."""
    if not every:
        return False
    _, _, seq = msg.rpartition("-")
    return seq.isdigit() and int(seq) % every == 0
