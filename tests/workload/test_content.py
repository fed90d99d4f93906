"""What a published message carries and what a delivery is checked for: every
difference a broker could make to a message is named, a whole one passes."""

from __future__ import annotations

import dataclasses

import aio_pika

from cluster.core.exchange import topic_regex
from harness.workload import WorkloadSpec
from harness.workload.content import (
    HEADER,
    binding_key,
    body,
    differences,
    message,
    message_id,
    publish_fields,
    routing_key,
)

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


def test_every_nth_message_is_transient_and_its_publish_line_says_so() -> None:
    spec = WorkloadSpec(transient_every=4)
    modes = {msg: message(msg, spec).delivery_mode for msg in ("p1-3", "p1-4", "t1-8")}
    assert modes == {"p1-3": aio_pika.DeliveryMode.PERSISTENT,
                     "p1-4": aio_pika.DeliveryMode.NOT_PERSISTENT,
                     "t1-8": aio_pika.DeliveryMode.NOT_PERSISTENT}
    assert [publish_fields(msg, spec) for msg in ("p1-3", "p1-4")] == [
        {}, {"persistent": False}]
    made_persistent = aio_pika.Message(b"p1-4", delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                                       message_id="p1-4", headers={HEADER: "p1-4"})
    assert differences("p1-4", b"p1-4", made_persistent, spec) == (
        "delivery_mode 2, 1 published")
    # A run of transient messages says so once, in its config: no line repeats it.
    everything_transient = dataclasses.replace(spec, persistent=False)
    assert publish_fields("p1-3", everything_transient) == {}
    assert message("p1-3", everything_transient).delivery_mode == (
        aio_pika.DeliveryMode.NOT_PERSISTENT)


def test_the_first_transient_publishers_publish_nothing_else() -> None:
    spec = WorkloadSpec(publishers=3, transient_publishers=2, transient_every=2)
    transient = {msg for msg in ("p1-1", "p2-3", "p3-1", "p3-2", "t1-1", "p12-1")
                 if publish_fields(msg, spec)}
    assert transient == {"p1-1", "p2-3", "p3-2"}


def test_topic_keys_give_the_binding_hash_zero_one_and_two_words() -> None:
    topic = WorkloadSpec(exchange="x", exchange_type="topic")
    keys = [routing_key(f"p1-{seq}", "q1", topic) for seq in (3, 4, 5)]
    assert keys == ["q1", "q1.p1", "q1.p1.5"]
    pattern = topic_regex(binding_key("q1", topic))
    assert all(pattern.match("." + key) for key in keys)  # the broker's own matching
    assert not pattern.match(".q2.p1")
    direct = WorkloadSpec(exchange="x")
    assert routing_key("p1-5", "q1", direct) == binding_key("q1", direct) == "q1"
    assert routing_key("p1-5", "q1", WorkloadSpec()) == "q1"  # the default exchange
