"""Flow control and liveness: the memory high-water mark blocks publishers (and only
publishers) until consumers bring usage back down; heartbeats disconnect silent peers
and keep idle but live ones connected."""

from __future__ import annotations

import time
from collections.abc import Callable

import pika
import pytest
from pamqp import commands
from pika.adapters.blocking_connection import BlockingChannel

from faults.process.node import NodeProcess
from tests.node.helpers import (
    HEARTBEAT_FRAME,
    NodeFactory,
    RawClient,
    assert_no_traceback,
    config_toml,
    connect,
    get_bodies,
    pump_until,
    queue_count,
    read_events,
    settle_quietly,
    start_node,
)

WATERMARK = 50_000
BODY = 1000


@pytest.fixture
def node(node_factory: NodeFactory) -> NodeProcess:
    return start_node(node_factory)


@pytest.fixture
def limited(node_factory: NodeFactory) -> NodeProcess:
    return start_node(node_factory, config_toml({"memory_high_watermark": WATERMARK}))


class FlowLog:
    """Records connection.blocked / connection.unblocked notifications."""

    def __init__(self, connection: pika.BlockingConnection) -> None:
        self.events: list[str] = []
        connection.add_on_connection_blocked_callback(
            lambda _c, frame: self.events.append(f"blocked: {frame.method.reason}"))
        connection.add_on_connection_unblocked_callback(
            lambda _c, _frame: self.events.append("unblocked"))


def _body(i: int) -> bytes:
    return f"m{i}".encode().ljust(BODY, b".")


def _publish_until_blocked(channel: BlockingChannel, flow: FlowLog) -> int:
    """Publish 1000-byte messages to "q" until the node blocks the connection; returns
    how many were sent."""
    connection = channel.connection
    sent = 0
    while not flow.events:
        channel.basic_publish("", "q", _body(sent))
        sent += 1
        connection.process_data_events(time_limit=0)
        assert sent < 10 * WATERMARK // BODY, "the node never blocked the publisher"
    return sent


def _drain(publisher: pika.BlockingConnection, consumer: BlockingChannel,
           until: Callable[[list[bytes]], bool]) -> list[bytes]:
    """Consume "q" through a connection that never published (so is never blocked),
    pumping the publisher's I/O, until ``until(received)``; returns what was received."""
    received: list[bytes] = []

    def done() -> bool:
        received.extend(get_bodies(consumer, "q"))
        return until(received)

    pump_until(publisher, done, what="the queue to drain")
    return received


def test_memory_alarm_blocks_publishers_until_consumers_drain(limited: NodeProcess) -> None:
    publisher, observer = connect(limited), connect(limited)
    publisher_flow, observer_flow = FlowLog(publisher), FlowLog(observer)
    consumer = observer.channel()
    consumer.queue_declare("q")
    channel = publisher.channel()
    sent = _publish_until_blocked(channel, publisher_flow)
    assert publisher_flow.events == ["blocked: low on memory"]
    assert sent > WATERMARK // BODY
    held = queue_count(consumer, "q")
    assert held * BODY > WATERMARK
    for i in range(sent, sent + 20):  # written to the socket, but the node is not reading
        channel.basic_publish("", "q", _body(i))
    settle_quietly(publisher, 0.5)
    assert queue_count(consumer, "q") == held
    total = sent + 20
    received = _drain(publisher, consumer, lambda got: len(got) >= total)
    assert received == [_body(i) for i in range(total)]
    pump_until(publisher, lambda: publisher_flow.events[-1] == "unblocked")
    # What the node had not read yet may raise the alarm again while it drains.
    rounds = len(publisher_flow.events) // 2
    assert publisher_flow.events == ["blocked: low on memory", "unblocked"] * rounds
    assert observer_flow.events == []
    alarms = [e["state"] for e in read_events(limited) if e["event"] == "memory_alarm"]
    assert alarms == ["set", "cleared"] * rounds
    channel.confirm_delivery()
    channel.basic_publish("", "q", b"after")  # confirmed: publishing works again
    assert get_bodies(consumer, "q") == [b"after"]
    publisher.close()
    observer.close()
    assert_no_traceback(limited)


def test_publisher_connecting_during_an_alarm_is_blocked(limited: NodeProcess) -> None:
    first = connect(limited)
    first.channel().queue_declare("q")
    _publish_until_blocked(first.channel(), FlowLog(first))
    late = connect(limited)
    flow = FlowLog(late)
    settle_quietly(late)
    assert flow.events == []  # it has not published yet
    late.channel().basic_publish("", "q", b"late")
    pump_until(late, lambda: flow.events)
    assert flow.events == ["blocked: low on memory"]
    with connect(limited) as cleaner:
        _drain(late, cleaner.channel(), lambda _: "unblocked" in flow.events)
    late.close()
    first.close()


def test_blocked_publisher_is_not_dropped_for_unread_heartbeats(limited: NodeProcess) -> None:
    """While the node does not read a blocked connection it cannot see its heartbeats;
    like RabbitMQ it must not count them as missed."""
    publisher = connect(limited, heartbeat=1)
    flow = FlowLog(publisher)
    channel = publisher.channel()
    channel.queue_declare("q")
    sent = _publish_until_blocked(channel, flow)
    publisher.sleep(4.0)  # pika keeps sending heartbeats the node does not read
    assert publisher.is_open
    with connect(limited) as cleaner:
        received = _drain(publisher, cleaner.channel(),
                          lambda got: len(got) == sent and flow.events[-1] == "unblocked")
    assert received == [_body(i) for i in range(sent)]
    channel.confirm_delivery()
    channel.basic_publish("", "q", b"after")
    assert publisher.is_open
    publisher.close()


# -- heartbeats -------------------------------------------------------------------------

def test_silent_client_is_disconnected_after_missed_heartbeats(node: NodeProcess) -> None:
    with RawClient(node, timeout=15.0) as client:
        client.handshake(heartbeat=1)
        client.open_channel(1)
        beats = 0
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:  # a live client: beats both ways
            client.send(HEARTBEAT_FRAME)
            client.sock.settimeout(0.5)
            try:
                data = client.recv_raw()
            except TimeoutError:
                continue
            assert data, "the node closed a connection that was sending heartbeats"
            beats += data.count(HEARTBEAT_FRAME)
        assert beats >= 2
        client.sock.settimeout(15.0)
        client.send_method(1, commands.Channel.Close(
            reply_code=200, reply_text="ok", class_id=0, method_id=0))
        client.expect(commands.Channel.CloseOk)
        silent_since = time.monotonic()
        client.expect_eof()  # stop sending: the node must hang up
        assert time.monotonic() - silent_since > 1.5  # not before two missed beats (2 s)
    assert node.running


def test_idle_client_with_heartbeats_stays_connected(node: NodeProcess) -> None:
    connection = connect(node, heartbeat=2)
    channel = connection.channel()
    channel.queue_declare("q")
    connection.sleep(6.0)  # no traffic but pika's heartbeats
    assert connection.is_open
    channel.confirm_delivery()
    channel.basic_publish("", "q", b"still here")
    assert get_bodies(channel, "q") == [b"still here"]
    connection.close()



def test_default_heartbeat_is_sixty_seconds(node: NodeProcess) -> None:
    with RawClient(node) as client:
        assert client.handshake().heartbeat == 60
