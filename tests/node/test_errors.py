"""Every AMQP error with its exact reply code, through pika for channel and connection
errors and through a raw socket speaking hand-built frames for frame-level errors.
After each error the node must still serve a new client."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from pamqp import commands
from pika.adapters.blocking_connection import BlockingChannel

from faults.process.node import NodeProcess
from tests.node.helpers import (
    PROTOCOL_HEADER,
    NodeFactory,
    RawClient,
    assert_no_traceback,
    assert_node_serves,
    body_frame,
    channel_error,
    config_toml,
    connect,
    connection_error,
    content_header_frame,
    method_frame,
    pika_channel,
    publish_bodies,
    raw_frame,
    start_node,
)

Operation = Callable[[BlockingChannel], object]


@pytest.fixture
def node(node_factory: NodeFactory) -> Iterator[NodeProcess]:
    node = start_node(node_factory)
    with pika_channel(node) as channel:
        channel.queue_declare("q")
        channel.exchange_declare("x", "direct")
    yield node
    assert_node_serves(node)
    assert_no_traceback(node)


def _fails_on_channel(node: NodeProcess, code: int, operation: Operation) -> None:
    """``operation`` closes its channel with ``code``; the connection survives it."""
    connection = connect(node)
    channel = connection.channel()
    channel.confirm_delivery()  # publishes wait for the broker's answer
    with channel_error(code):
        operation(channel)
    assert connection.is_open
    connection.channel().queue_declare("q", passive=True)
    connection.close()


def _fails_on_connection(node: NodeProcess, code: int, operation: Operation) -> None:
    connection = connect(node)
    with connection_error(code):
        operation(connection.channel())
    assert connection.is_closed


# -- 404 NOT_FOUND ----------------------------------------------------------------------

@pytest.mark.parametrize("operation", [
    lambda ch: ch.queue_declare("missing", passive=True),
    lambda ch: ch.exchange_declare("missing", passive=True),
    lambda ch: ch.basic_publish("missing", "q", b"x"),
    lambda ch: ch.basic_consume("missing", lambda *_: None),
    lambda ch: ch.basic_get("missing"),
    lambda ch: ch.queue_purge("missing"),
    lambda ch: ch.queue_bind("missing", "x", "k"),
    lambda ch: ch.queue_bind("q", "missing", "k"),
], ids=["passive-queue", "passive-exchange", "publish", "consume", "get", "purge",
        "bind-queue", "bind-exchange"])
def test_not_found(node: NodeProcess, operation: Operation) -> None:
    _fails_on_channel(node, 404, operation)


# -- 405 RESOURCE_LOCKED ----------------------------------------------------------------

@pytest.mark.parametrize("operation", [
    lambda ch: ch.queue_declare("exclusive", passive=True),
    lambda ch: ch.queue_declare("exclusive", exclusive=True),
    lambda ch: ch.queue_declare("exclusive"),
    lambda ch: ch.basic_consume("exclusive", lambda *_: None),
    lambda ch: ch.basic_get("exclusive"),
    lambda ch: ch.queue_purge("exclusive"),
    lambda ch: ch.queue_delete("exclusive"),
    lambda ch: ch.queue_bind("exclusive", "x", "k"),
], ids=["passive", "redeclare-exclusive", "redeclare", "consume", "get", "purge", "delete",
        "bind"])
def test_resource_locked(node: NodeProcess, operation: Operation) -> None:
    owner = connect(node)
    owner.channel().queue_declare("exclusive", exclusive=True)
    _fails_on_channel(node, 405, operation)
    owner.close()


def _redeclare_own_exclusive_as_shared(channel: BlockingChannel) -> None:
    channel.queue_declare("mine", exclusive=True)
    channel.queue_declare("mine")


@pytest.mark.parametrize("operation", [
    lambda ch: ch.queue_declare("q", exclusive=True),
    _redeclare_own_exclusive_as_shared,
], ids=["shared-as-exclusive", "exclusive-as-shared"])
def test_redeclare_with_other_exclusivity_is_resource_locked(
    node: NodeProcess, operation: Operation,
) -> None:
    _fails_on_channel(node, 405, operation)


# -- 406 PRECONDITION_FAILED ------------------------------------------------------------

@pytest.mark.parametrize("operation", [
    lambda ch: ch.queue_declare("q", durable=True),
    lambda ch: ch.queue_declare("q", auto_delete=True),
    lambda ch: ch.queue_declare("q", arguments={"x-max-length": 5}),
    lambda ch: ch.exchange_declare("x", "fanout"),
    lambda ch: ch.exchange_declare("x", "direct", durable=True),
    lambda ch: ch.exchange_declare("amq.direct", "direct", durable=False),
    lambda ch: ch.exchange_declare("amq.topic", "direct", durable=True),
], ids=["queue-durable", "queue-auto-delete", "queue-arguments", "exchange-type",
        "exchange-durable", "amq-direct-durable", "amq-topic-type"])
def test_inequivalent_redeclare(node: NodeProcess, operation: Operation) -> None:
    _fails_on_channel(node, 406, operation)


def _ack_twice(channel: BlockingChannel) -> None:
    publish_bodies(channel, "q", [b"x"])
    tag = channel.basic_get("q")[0].delivery_tag
    channel.basic_ack(tag)
    channel.basic_ack(tag)
    channel.queue_declare("q", passive=True)  # a round trip to see the error


def _reject_unknown(channel: BlockingChannel) -> None:
    channel.basic_reject(42)
    channel.queue_declare("q", passive=True)


def _nack_unknown(channel: BlockingChannel) -> None:
    channel.basic_nack(7, multiple=True)
    channel.queue_declare("q", passive=True)


def _delete_used(channel: BlockingChannel) -> None:
    channel.basic_consume("q", lambda *_: None)
    channel.connection.channel().queue_delete("q", if_unused=True)


def _delete_full(channel: BlockingChannel) -> None:
    publish_bodies(channel, "q", [b"x"])
    channel.queue_delete("q", if_empty=True)


def _delete_used_exchange(channel: BlockingChannel) -> None:
    channel.queue_bind("q", "x", "k")
    channel.exchange_delete("x", if_unused=True)


@pytest.mark.parametrize("operation", [
    _ack_twice, _reject_unknown, _nack_unknown, _delete_used, _delete_full,
    _delete_used_exchange,
], ids=["double-ack", "unknown-reject", "unknown-nack", "if-unused", "if-empty",
        "exchange-if-unused"])
def test_precondition_failed(node: NodeProcess, operation: Operation) -> None:
    _fails_on_channel(node, 406, operation)


def test_if_unused_and_if_empty_failures_change_nothing(node: NodeProcess) -> None:
    _fails_on_channel(node, 406, _delete_full)
    with pika_channel(node) as channel:
        assert channel.queue_declare("q", passive=True).method.message_count == 1


def test_mode_switches_are_refused(node: NodeProcess) -> None:
    for first, second in ((lambda ch: ch.tx_select(), lambda ch: ch.confirm_delivery()),
                          (lambda ch: ch.confirm_delivery(), lambda ch: ch.tx_select())):
        with pika_channel(node) as channel, channel_error(406):
            first(channel)
            second(channel)
    with pika_channel(node) as channel, channel_error(406):
        channel.tx_commit()
    with pika_channel(node) as channel, channel_error(406):
        channel.tx_rollback()


def test_message_larger_than_max_message_size(node_factory: NodeFactory) -> None:
    node = start_node(node_factory, config_toml({"max_message_size": 1000}))
    with pika_channel(node) as channel:
        channel.queue_declare("q")
        channel.confirm_delivery()
        publish_bodies(channel, "q", [b"x" * 1000])
    _fails_on_channel(node, 406, lambda ch: publish_bodies(ch, "q", [b"x" * 1001]))
    with pika_channel(node) as channel:
        assert channel.queue_declare("q", passive=True).method.message_count == 1


# -- 403 ACCESS_REFUSED -----------------------------------------------------------------

def _exclusive_consume_on_used_queue(channel: BlockingChannel) -> None:
    channel.basic_consume("q", lambda *_: None)
    channel.connection.channel().basic_consume("q", lambda *_: None, exclusive=True)


def _consume_on_exclusively_used_queue(channel: BlockingChannel) -> None:
    channel.basic_consume("q", lambda *_: None, exclusive=True)
    channel.connection.channel().basic_consume("q", lambda *_: None)


@pytest.mark.parametrize("operation", [
    lambda ch: ch.exchange_declare("amq.custom", "direct"),
    lambda ch: ch.exchange_declare("amq.custom", "direct", durable=True),
    lambda ch: ch.queue_declare("amq.custom"),
    lambda ch: ch.exchange_delete("amq.fanout"),
    lambda ch: ch.queue_bind("q", "", "q"),
    lambda ch: ch.queue_unbind("q", "", "q"),
    _exclusive_consume_on_used_queue,
    _consume_on_exclusively_used_queue,
], ids=["declare-amq-exchange", "declare-amq-exchange-durable", "declare-amq-queue",
        "delete-amq-exchange", "bind-default-exchange", "unbind-default-exchange",
        "exclusive-consume-conflict", "consume-exclusive-conflict"])
def test_access_refused(node: NodeProcess, operation: Operation) -> None:
    _fails_on_channel(node, 403, operation)


# -- connection errors through pika -----------------------------------------------------

def test_unknown_exchange_type_is_command_invalid(node: NodeProcess) -> None:
    _fails_on_connection(node, 503, lambda ch: ch.exchange_declare("y", "headerz"))


@pytest.mark.parametrize("operation", [
    lambda ch: ch.basic_qos(prefetch_size=1024),
    lambda ch: ch.basic_recover(requeue=False),
    lambda ch: ch.flow(False),
], ids=["qos-prefetch-size", "recover-no-requeue", "flow-inactive"])
def test_not_implemented(node: NodeProcess, operation: Operation) -> None:
    _fails_on_connection(node, 540, operation)


# -- raw frames -------------------------------------------------------------------------

def _raw_close_code(node: NodeProcess, frames: list[bytes], *, channel: bool = True,
                    frame_max: int = 0, channel_max: int = 0) -> int:
    """Handshake (and open channel 1), send ``frames``, return the reply code of the
    broker's ``connection.close``."""
    with RawClient(node) as client:
        client.handshake(frame_max=frame_max, channel_max=channel_max)
        if channel:
            client.open_channel(1)
        client.send(b"".join(frames))
        return client.expect_connection_close().reply_code or 0


def _publish(channel: int = 1, immediate: bool = False) -> bytes:
    return method_frame(channel, commands.Basic.Publish(exchange="", routing_key="q",
                                                        immediate=immediate))


def test_consumer_tag_reuse_is_not_allowed(node: NodeProcess) -> None:
    consume = method_frame(1, commands.Basic.Consume(queue="q", consumer_tag="tag"))
    assert _raw_close_code(node, [consume, consume]) == 530


def test_opening_more_channels_than_channel_max_is_not_allowed(node: NodeProcess) -> None:
    opens = [method_frame(n, commands.Channel.Open()) for n in (10, 20, 30)]
    assert _raw_close_code(node, opens, channel_max=3) == 530


def test_immediate_publish_is_not_implemented(node: NodeProcess) -> None:
    frames = [_publish(immediate=True), content_header_frame(1, 1), body_frame(1, b"x")]
    assert _raw_close_code(node, frames) == 540


def test_bad_frame_end_octet(node: NodeProcess) -> None:
    declare = method_frame(1, commands.Queue.Declare(queue="q"))
    assert _raw_close_code(node, [declare[:-1] + b"\x00"]) == 501


def test_frame_larger_than_negotiated_frame_max(node: NodeProcess) -> None:
    frames = [_publish(), content_header_frame(1, 5000), body_frame(1, b"x" * 5000)]
    assert _raw_close_code(node, frames, frame_max=4096) == 501


def test_frame_within_negotiated_frame_max_is_accepted(node: NodeProcess) -> None:
    with RawClient(node) as client:
        client.handshake(frame_max=4096)
        client.open_channel(1)
        client.send(_publish() + content_header_frame(1, 4088) + body_frame(1, b"x" * 4088))
        client.send_method(1, commands.Queue.Declare(queue="q", passive=True))
        assert client.expect(commands.Queue.DeclareOk).message_count == 1


def test_unknown_frame_type_and_heartbeat_on_a_channel(node: NodeProcess) -> None:
    assert _raw_close_code(node, [raw_frame(9, 0, b"")]) == 501
    assert _raw_close_code(node, [raw_frame(8, 1, b"")]) == 505


def test_method_while_content_is_expected(node: NodeProcess) -> None:
    frames = [_publish(), method_frame(1, commands.Basic.Qos(prefetch_count=1))]
    assert _raw_close_code(node, frames) == 505


def test_content_without_publish(node: NodeProcess) -> None:
    assert _raw_close_code(node, [content_header_frame(1, 1)]) == 505
    assert _raw_close_code(node, [body_frame(1, b"x")]) == 505
    assert _raw_close_code(node, [_publish(), body_frame(1, b"x")]) == 505


def test_content_on_channel_zero(node: NodeProcess) -> None:
    assert _raw_close_code(node, [content_header_frame(0, 1)], channel=False) == 505


def test_methods_on_the_wrong_channel(node: NodeProcess) -> None:
    declare = method_frame(0, commands.Queue.Declare(queue="q"))
    assert _raw_close_code(node, [declare], channel=False) == 504
    assert _raw_close_code(node, [method_frame(1, commands.Connection.Open())]) == 503


def test_body_longer_than_declared(node: NodeProcess) -> None:
    frames = [_publish(), content_header_frame(1, 2), body_frame(1, b"xyz")]
    assert _raw_close_code(node, frames) == 505


def test_frames_on_an_unopened_channel(node: NodeProcess) -> None:
    declare = method_frame(3, commands.Queue.Declare(queue="q"))
    assert _raw_close_code(node, [declare]) == 504
    assert _raw_close_code(node, [content_header_frame(3, 1)]) == 505


def test_second_channel_open(node: NodeProcess) -> None:
    assert _raw_close_code(node, [method_frame(1, commands.Channel.Open())]) == 504


def test_truncated_method_arguments_are_a_frame_error(node: NodeProcess) -> None:
    declare = method_frame(1, commands.Queue.Declare(queue="a-long-queue-name"))
    payload = declare[7:-1]
    assert _raw_close_code(node, [raw_frame(1, 1, payload[:10])]) == 501


@pytest.mark.parametrize("header", [
    b"AMQP\x01\x01\x00\x09", b"AMQP\x00\x01\x00\x00", b"AMQP\x00\x00\x09\x02",
    b"GET / HTTP/1.1\r\n\r\n",
], ids=["0-9", "1-0", "0-9-2", "http"])
def test_wrong_protocol_header(node: NodeProcess, header: bytes) -> None:
    with RawClient(node) as client:
        client.send(header)
        received = b""
        while chunk := client.recv_raw():
            received += chunk
        assert received == PROTOCOL_HEADER
