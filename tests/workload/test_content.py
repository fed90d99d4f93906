"""What a published message carries and what a delivery is checked for: every
difference a broker could make to a message is named, a whole one passes."""

from __future__ import annotations

import dataclasses

import aio_pika

from harness.workload import WorkloadSpec
from harness.workload.content import HEADER, body, differences, message, message_id

SPEC = WorkloadSpec(large_every=3, large_size=200_000)


def test_every_third_message_is_large_and_every_body_starts_with_its_id() -> None:
    assert body("p1-2", SPEC) == b"p1-2"
    large = body("p1-3", SPEC)
    assert len(large) == 200_000 and large.startswith(b"p1-3|p1-3|")
    assert message_id(large) == message_id(b"p1-3") == "p1-3"
    assert body("p1-3", WorkloadSpec()) == b"p1-3"


def test_a_whole_delivery_has_no_differences() -> None:
    for msg in ("p1-2", "p1-3"):
        sent = message(msg, SPEC)
        assert differences(msg, sent.body, sent, SPEC) is None


def test_every_kind_of_damage_is_named() -> None:
    sent = message("p1-3", SPEC)
    cut = differences("p1-3", sent.body[:131_072], sent, SPEC)
    assert cut == "a body of 131072 bytes, 200000 published, different from byte 131072"
    spliced = sent.body[:1000] + body("p2-3", SPEC)[1000:]
    assert "different from byte" in str(differences("p1-3", spliced, sent, SPEC))
    bare = aio_pika.Message(sent.body)
    assert differences("p1-3", sent.body, bare, SPEC) == (
        f"message_id None; delivery_mode 1, 2 published; header {HEADER} None")
    transient = dataclasses.replace(SPEC, persistent=False)
    assert differences("p1-3", sent.body, sent, transient) == "delivery_mode 2, 1 published"
