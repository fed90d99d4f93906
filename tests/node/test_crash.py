"""Durability across crashes (SIGKILL) and restarts: what was confirmed is there, in
order; what was acknowledged stays gone; transient state is gone; a torn store tail is
cut at the last whole record (durable queues and persistent messages)."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pika
import pytest
from pamqp import commands

from cluster.amqp import tablejson
from faults.process.node import NodeProcess
from tests.node.helpers import (
    PERSISTENT,
    NodeFactory,
    RawClient,
    assert_no_traceback,
    assert_node_serves,
    body_frame,
    connect,
    content_header_frame,
    get_bodies,
    method_frame,
    numbered,
    pika_channel,
    publish_bodies,
    read_events,
    start_node,
)

TRANSIENT = pika.BasicProperties(delivery_mode=1)


@pytest.fixture
def node(node_factory: NodeFactory) -> Iterator[NodeProcess]:
    node = start_node(node_factory)
    yield node
    assert_no_traceback(node)


def _crash_and_restart(node: NodeProcess) -> None:
    node.kill()
    node.start()


def _newest_segment(node: NodeProcess) -> Path:
    segments = sorted((node.data_dir / "messages").glob("*.seg"))
    assert segments, "the store wrote no segment"
    return segments[-1]


def test_confirmed_persistent_messages_survive_kill_9(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.confirm_delivery()
        channel.queue_declare("durable", durable=True)
        channel.queue_declare("transient-queue", durable=False)
        for i in range(200):
            properties = PERSISTENT if i % 4 else TRANSIENT
            publish_bodies(channel, "durable", [f"m{i}".encode()], properties=properties)
        publish_bodies(channel, "transient-queue", [b"gone"], properties=PERSISTENT)
    _crash_and_restart(node)
    with pika_channel(node) as channel:
        assert get_bodies(channel, "durable") == [f"m{i}".encode() for i in range(200) if i % 4]
        with pytest.raises(pika.exceptions.ChannelClosedByBroker) as info:
            channel.queue_declare("transient-queue", passive=True)
        assert info.value.reply_code == 404


def test_acked_and_rejected_messages_stay_gone(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.queue_declare("q", durable=True)
    publish_bodies(channel, "q", numbered(30), properties=PERSISTENT)
    tags = [channel.basic_get("q")[0].delivery_tag for _ in range(12)]
    channel.basic_ack(tags[4], multiple=True)  # m0..m4
    channel.basic_reject(tags[5], requeue=False)  # m5
    channel.basic_nack(tags[6], requeue=True)  # m6 goes back
    channel.basic_ack(tags[8])  # m8
    # A confirmed publish after the acks: its fsync covers the removals staged before it.
    publish_bodies(channel, "q", [b"marker"], properties=PERSISTENT)
    _crash_and_restart(node)  # m7, m9..m11 were delivered but never acked
    with pika_channel(node) as channel:
        expected = [b"m6", b"m7", *numbered(30)[9:], b"marker"]
        assert get_bodies(channel, "q") == expected


def test_committed_transactions_survive_and_purges_and_deletes_stay(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        for queue in ("tx", "purged", "recreated"):
            channel.queue_declare(queue, durable=True)
        publish_bodies(channel, "purged", numbered(5), properties=PERSISTENT)
        publish_bodies(channel, "recreated", numbered(5, "old"), properties=PERSISTENT)
        channel.queue_purge("purged")
        channel.queue_delete("recreated")
        channel.queue_declare("recreated", durable=True)
        channel.tx_select()
        publish_bodies(channel, "recreated", [b"new"], properties=PERSISTENT)
        publish_bodies(channel, "tx", [b"committed"], properties=PERSISTENT)
        channel.tx_commit()  # commit-ok comes once the commit (and all before it) is on disk
        publish_bodies(channel, "tx", [b"uncommitted"], properties=PERSISTENT)
    _crash_and_restart(node)
    with pika_channel(node) as channel:
        assert get_bodies(channel, "tx") == [b"committed"]
        assert get_bodies(channel, "purged") == []
        assert get_bodies(channel, "recreated") == [b"new"]


def test_graceful_restart_keeps_unacked_messages_in_place(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.queue_declare("q", durable=True)
    publish_bodies(channel, "q", numbered(5), properties=PERSISTENT)
    channel.basic_get("q")
    channel.basic_ack(channel.basic_get("q")[0].delivery_tag)  # m1
    publish_bodies(channel, "q", [b"marker"], properties=PERSISTENT)
    node.stop()
    node.start()
    with pika_channel(node) as channel:
        assert get_bodies(channel, "q") == [b"m0", b"m2", b"m3", b"m4", b"marker"]


def test_durable_exchanges_and_bindings_survive_restart(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.exchange_declare("dx", "direct", durable=True)
        channel.exchange_declare("tx", "fanout", durable=False)
        channel.queue_declare("dq", durable=True)
        channel.queue_declare("tq", durable=False)
        channel.queue_bind("dq", "dx", "k")
        channel.queue_bind("dq", "amq.topic", "a.#")
        channel.queue_bind("tq", "dx", "k")
        channel.queue_bind("dq", "tx")
        channel.queue_declare("unbound", durable=True)
        channel.queue_bind("unbound", "dx", "u")
        channel.queue_unbind("unbound", "dx", "u")
    _crash_and_restart(node)
    with pika_channel(node) as channel:
        channel.exchange_declare("dx", passive=True)
        channel.exchange_declare("dx", "direct", durable=True)  # still equivalent
        channel.confirm_delivery()
        publish_bodies(channel, "k", [b"direct"], exchange="dx", properties=PERSISTENT)
        publish_bodies(channel, "a.b", [b"topic"], exchange="amq.topic", properties=PERSISTENT)
        publish_bodies(channel, "u", [b"unbound"], exchange="dx", properties=PERSISTENT)
        assert get_bodies(channel, "dq") == [b"direct", b"topic"]
        assert get_bodies(channel, "unbound") == []
    for kind, name in (("exchange", "tx"), ("queue", "tq")):
        with pika_channel(node) as channel, pytest.raises(
            pika.exceptions.ChannelClosedByBroker
        ) as info:
            if kind == "exchange":
                channel.exchange_declare(name, passive=True)
            else:
                channel.queue_declare(name, passive=True)
        assert info.value.reply_code == 404


def test_torn_segment_tail_is_cut_at_the_last_whole_record(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.confirm_delivery()
        channel.queue_declare("q", durable=True)
        publish_bodies(channel, "q", numbered(20), properties=PERSISTENT)
    node.kill()
    segment = _newest_segment(node)
    size = segment.stat().st_size
    with segment.open("r+b") as file:
        file.truncate(size - 5)  # into the last record: m19's append
    node.start()
    cuts = [e for e in read_events(node) if e["event"] == "store_tail_truncated"]
    assert len(cuts) == 1
    assert Path(cuts[0]["file"]) == segment
    assert cuts[0]["offset"] + cuts[0]["bytes_cut"] == size - 5
    assert 0 < cuts[0]["bytes_cut"] < size
    with pika_channel(node) as channel:
        assert get_bodies(channel, "q") == numbered(19)
    assert_node_serves(node)
    with pika_channel(node) as channel:  # the cut store takes new records after the cut
        channel.confirm_delivery()
        publish_bodies(channel, "q", [b"after"], properties=PERSISTENT)
    _crash_and_restart(node)
    with pika_channel(node) as channel:
        assert get_bodies(channel, "q") == [b"after"]
    assert [e["event"] for e in read_events(node)].count("store_tail_truncated") == 1


# -- SIGKILL while confirms are in flight -----------------------------------------------

def _publish_frames(count: int, size: int) -> list[bytes]:
    """Persistent publishes to queue "q", body = index padded to ``size`` bytes."""
    frames = []
    publish = method_frame(1, commands.Basic.Publish(exchange="", routing_key="q"))
    for i in range(count):
        body = f"{i:08d}".encode().ljust(size, b".")
        properties = commands.Basic.Properties(delivery_mode=2)
        frames.append(publish + content_header_frame(1, len(body), properties)
                      + body_frame(1, body))
    return frames


def _send_quietly(client: RawClient, frames: list[bytes]) -> None:
    for start in range(0, len(frames), 50):
        try:
            client.send(b"".join(frames[start:start + 50]))
        except OSError:  # the node was killed under us
            return


def test_kill_9_with_confirms_in_flight_loses_nothing_confirmed(node: NodeProcess) -> None:
    total = 4000
    with pika_channel(node) as channel:
        channel.queue_declare("q", durable=True)
    client = RawClient(node)
    client.handshake()
    client.open_channel(1)
    client.send_method(1, commands.Confirm.Select())
    client.expect(commands.Confirm.SelectOk)
    sender = threading.Thread(target=_send_quietly, args=(client, _publish_frames(total, 512)))
    sender.start()
    confirmed = 0
    while confirmed < total // 4:
        _, ack = client.read_frame()
        assert isinstance(ack, commands.Basic.Ack), ack
        confirmed = max(confirmed, int(ack.delivery_tag))
    _crash_and_restart(node)
    sender.join()
    client.close()
    with pika_channel(node) as channel:
        survivors = [int(body[:8]) for body in get_bodies(channel, "q")]
    assert len(survivors) >= confirmed
    assert survivors == list(range(len(survivors)))  # a prefix: no gap, no duplicate


def test_arguments_of_types_json_lacks_survive_a_restart(node: NodeProcess) -> None:
    """definitions.json holds a durable queue's and exchange's arguments of every type
    JSON has no form for (saving them failed with 541, and every later definitions
    change with it); after a crash both are back, and so is what was declared after."""
    arguments = {"x-decimal": Decimal("2.5"), "x-bytes": b"\x00\xff",
                 "x-when": datetime.datetime(2026, 11, 27, tzinfo=datetime.UTC)}
    with pika_channel(node) as channel:
        channel.queue_declare("typed", durable=True, arguments=arguments)
        channel.exchange_declare("typed", "direct", durable=True, arguments=arguments)
        channel.queue_declare("after", durable=True)
    _crash_and_restart(node)
    with pika_channel(node) as channel:
        for queue in ("typed", "after"):
            channel.queue_declare(queue, passive=True)
        channel.exchange_declare("typed", passive=True)
    saved = tablejson.loads((node.data_dir / "definitions.json").read_text())
    (typed,) = [q for q in saved["vhosts"]["/"]["queues"] if q["name"] == "typed"]
    assert {key: (type(value), value) for key, value in typed["arguments"].items()} == {
        "x-decimal": (Decimal, Decimal("2.5")), "x-bytes": (bytearray, b"\x00\xff"),
        "x-when": (datetime.datetime, arguments["x-when"])}
