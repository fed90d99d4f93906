"""A node's memory under clients that write and never read (harness.flood): bodies
still arriving count toward the memory high-water mark, output a client does not read
stops the node reading it, deliveries wait for the socket, and a client that reads
nothing for send_timeout seconds is dropped.

Each test bounds the node's resident memory growth by the watermark plus MARGIN.
Why MARGIN is enough: beyond the bodies the watermark counts, each connection may hold
one frame being assembled (frame_max, 128 KiB), one socket read of input processed
after the alarm or the stall (256 KiB), an outbox up to OUTBOX_LIMIT (1 MiB) and the
transport's write buffer above its high-water mark (64 KiB): under 1.5 MiB for each
of the at most three flooding connections here; a completed body is copied once when
its frames are joined; the rest is the interpreter's allocator slack. Before the fixes
these floods grew a node by 199 MiB (bodies, 6 s), 1.5 GiB (returns, 6 s) and 120 MiB
(deliveries of a 48 MiB queue).
"""

from __future__ import annotations

import asyncio

import pytest

from faults.process.node import NodeProcess
from harness.bench.url import parse_amqp_url
from harness.flood import FloodResult, FloodSpec, run_flood
from tests.node.helpers import (
    NodeFactory,
    assert_no_traceback,
    config_toml,
    connect,
    get_bodies,
    read_events,
    start_node,
)

MiB = 1 << 20
MARGIN = 24 * MiB


def flood(node: NodeProcess, kind: str, spec: FloodSpec) -> FloodResult:
    assert node.process is not None
    return asyncio.run(run_flood(parse_amqp_url(node.amqp_url), node.process.pid, kind, spec))


def assert_still_serves(node: NodeProcess) -> None:
    with connect(node) as connection:
        channel = connection.channel()
        channel.queue_declare("after-the-flood")
        channel.confirm_delivery()
        channel.basic_publish("", "after-the-flood", b"served")
        assert get_bodies(channel, "after-the-flood") == [b"served"]
    assert_no_traceback(node)


def test_bodies_still_arriving_are_held_to_the_watermark(node_factory: NodeFactory) -> None:
    watermark = 8 * MiB
    node = start_node(node_factory, config_toml({"memory_high_watermark": watermark}))
    result = flood(node, "bodies", FloodSpec(seconds=3, connections=3, body_size=24 * MiB))
    assert result.sent > watermark  # the flood got past the watermark's worth
    assert result.growth < watermark + MARGIN, result.as_json()
    alarms = [e for e in read_events(node) if e["event"] == "memory_alarm"]
    assert alarms and alarms[0]["state"] == "set"
    assert_still_serves(node)


@pytest.mark.parametrize("kind, spec", [
    ("returns", FloodSpec(seconds=2)),
    ("deliveries", FloodSpec(seconds=2, prefill=24 * MiB)),
])
def test_output_a_client_does_not_read_stays_bounded(
    node_factory: NodeFactory, kind: str, spec: FloodSpec
) -> None:
    node = start_node(node_factory)
    result = flood(node, kind, spec)
    assert result.growth < MARGIN, result.as_json()
    assert result.dropped_after is None  # not before send_timeout (15 s)
    assert_still_serves(node)


def test_a_client_that_reads_nothing_is_dropped_after_send_timeout(
    node_factory: NodeFactory,
) -> None:
    node = start_node(node_factory, config_toml({"send_timeout": 1}))
    result = flood(node, "returns", FloodSpec(seconds=10))
    assert result.dropped_after is not None, result.as_json()
    drops = [e for e in read_events(node) if e["event"] == "connection_error"]
    assert [e["text"] for e in drops] == [
        "CONNECTION_FORCED - client did not read its output for 1 s (send_timeout)"]
    assert_still_serves(node)
