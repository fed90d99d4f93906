"""The broker's client-visible AMQP 0-9-1 semantics through a real `pika` client against a
real node process."""

from __future__ import annotations

import pika
import pika.exceptions
import pytest
from pamqp import commands, encode

from faults.process.node import NodeProcess
from tests.node.helpers import (
    PROTOCOL_HEADER,
    NodeFactory,
    RawClient,
    channel_error,
    config_toml,
    connect,
    consume_events,
    get_bodies,
    numbered,
    pika_channel,
    publish_bodies,
    pump_until,
    queue_count,
    refused_at_open,
    settle_quietly,
    start_node,
    start_ok,
)


@pytest.fixture
def node(node_factory: NodeFactory) -> NodeProcess:
    return start_node(node_factory)


# -- publishing and consuming -----------------------------------------------------------

def test_every_confirmed_publish_is_delivered_in_order(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.confirm_delivery()
    channel.queue_declare("q")
    bodies = numbered(300)
    publish_bodies(channel, "q", bodies)  # each call returns only once it is acked
    assert queue_count(channel, "q") == 300
    events = consume_events(connection, channel, "q", 300)
    assert [body for _, body in events] == bodies
    assert [m.delivery_tag for m, _ in events] == list(range(1, 301))
    assert not any(m.redelivered for m, _ in events)
    assert {(m.exchange, m.routing_key) for m, _ in events} == {("", "q")}
    connection.close()


def test_large_and_empty_bodies_and_properties_round_trip(node: NodeProcess) -> None:
    properties = pika.BasicProperties(
        content_type="application/octet-stream", content_encoding="gzip",
        headers={"n": 1, "s": "text", "nested": {"list": [1, "two"]}, "flag": True},
        delivery_mode=2, priority=3, correlation_id="c-1", reply_to="r", expiration="60000",
        message_id="id-1", timestamp=1_700_000_000, type="t", user_id="guest", app_id="app",
    )
    bodies = [b"", bytes(range(256)) * 4096, b"x" * 4089]  # 0, 1 MiB, just over a frame
    with pika_channel(node, frame_max=4096) as channel:
        channel.confirm_delivery()
        channel.queue_declare("q")
        publish_bodies(channel, "q", bodies, properties=properties)
    with pika_channel(node) as channel:  # another frame_max on the consuming side
        for body in bodies:
            _, got_properties, got_body = channel.basic_get("q", auto_ack=True)
            assert got_body == body
            assert vars(got_properties) == vars(properties)


def test_prefetch_limits_unacked_deliveries(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.queue_declare("q")
    publish_bodies(channel, "q", numbered(10))
    channel.basic_qos(prefetch_count=3)
    events = consume_events(connection, channel, "q", 3)
    settle_quietly(connection)
    assert [body for _, body in events] == numbered(3)
    channel.basic_ack(events[0][0].delivery_tag)
    settle_quietly(connection)
    assert [body for _, body in events] == numbered(4)
    channel.basic_ack(events[3][0].delivery_tag, multiple=True)
    settle_quietly(connection)
    assert [body for _, body in events] == numbered(7)
    connection.close()


def test_basic_get_reports_remaining_count_and_empty(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.queue_declare("q")
        publish_bodies(channel, "q", numbered(3))
        for remaining, expected in zip((2, 1, 0), numbered(3), strict=True):
            method, _, body = channel.basic_get("q")
            assert (body, method.message_count, method.redelivered) == (expected, remaining, False)
        assert channel.basic_get("q") == (None, None, None)
        channel.basic_ack(0, multiple=True)
        assert queue_count(channel, "q") == 0


def test_requeued_messages_keep_their_position_and_are_redelivered(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.queue_declare("q")
        publish_bodies(channel, "q", numbered(5))
        tags = [channel.basic_get("q")[0].delivery_tag for _ in range(3)]  # m0, m1, m2
        channel.basic_reject(tags[1], requeue=True)
        channel.basic_nack(tags[0], requeue=True)
        got = [channel.basic_get("q", auto_ack=True) for _ in range(4)]
        assert [(body, m.redelivered) for m, _, body in got] == [
            (b"m0", True), (b"m1", True), (b"m3", False), (b"m4", False),
        ]
        channel.basic_ack(tags[2])
        assert queue_count(channel, "q") == 0


def test_reject_without_requeue_drops_the_message(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.queue_declare("q")
        publish_bodies(channel, "q", numbered(2))
        channel.basic_reject(channel.basic_get("q")[0].delivery_tag, requeue=False)
        channel.basic_nack(channel.basic_get("q")[0].delivery_tag, requeue=False)
        channel.basic_recover(requeue=True)  # nothing is unacked any more
        assert channel.basic_get("q") == (None, None, None)


def test_multiple_ack_and_nack_cover_all_earlier_tags(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.queue_declare("q")
    publish_bodies(channel, "q", numbered(6))
    events = consume_events(connection, channel, "q", 6)
    channel.basic_ack(3, multiple=True)  # m0..m2
    channel.basic_nack(5, multiple=True, requeue=True)  # m3, m4
    channel.basic_cancel(events[0][0].consumer_tag)
    assert queue_count(channel, "q") == 2
    got = [channel.basic_get("q", auto_ack=True) for _ in range(2)]
    assert [(body, m.redelivered) for m, _, body in got] == [(b"m3", True), (b"m4", True)]
    channel.basic_ack(6)
    channel.close()
    assert get_bodies(connection.channel(), "q") == []
    connection.close()


def test_basic_recover_requeues_all_unacked_in_order(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.queue_declare("q")
        publish_bodies(channel, "q", numbered(4))
        for _ in range(3):
            channel.basic_get("q")
        channel.basic_recover(requeue=True)
        got = [channel.basic_get("q", auto_ack=True) for _ in range(4)]
        assert [(body, m.redelivered) for m, _, body in got] == [
            (b"m0", True), (b"m1", True), (b"m2", True), (b"m3", False),
        ]


# -- consumers --------------------------------------------------------------------------

def test_cancelled_consumer_gets_nothing_more(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.queue_declare("q")
    publish_bodies(channel, "q", [b"before"])
    events = consume_events(connection, channel, "q", 1)
    assert channel.basic_cancel(events[0][0].consumer_tag) == []
    publish_bodies(channel, "q", [b"after"])
    settle_quietly(connection)
    assert [body for _, body in events] == [b"before"]
    assert queue_count(channel, "q") == 1  # the cancelled consumer's delivery stays unacked
    channel.close()
    assert get_bodies(connection.channel(), "q") == [b"before", b"after"]
    connection.close()


def test_deleting_the_queue_cancels_its_consumers(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.queue_declare("q")
    cancelled: list[str] = []
    channel.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    tag = channel.basic_consume("q", lambda *_: None)
    with pika_channel(node) as other:
        other.queue_delete("q")
    pump_until(connection, lambda: cancelled, what="basic.cancel")
    assert cancelled == [tag]
    assert channel.is_open
    channel.queue_declare("q2")  # the channel is still usable
    connection.close()


def test_no_server_cancel_for_clients_without_the_capability(node: NodeProcess) -> None:
    with RawClient(node) as client:  # its client properties lack consumer_cancel_notify
        client.handshake()
        client.open_channel(1)
        client.send_method(1, commands.Queue.Declare(queue="q"))
        client.expect(commands.Queue.DeclareOk)
        client.send_method(1, commands.Basic.Consume(queue="q", consumer_tag="tag"))
        client.expect(commands.Basic.ConsumeOk)
        with pika_channel(node) as other:
            other.queue_delete("q")
        client.send_method(1, commands.Queue.Declare(queue="q2"))
        client.expect(commands.Queue.DeclareOk)  # and no basic.cancel before it


def test_exclusive_consumer_locks_out_others(node: NodeProcess) -> None:
    with pika_channel(node) as first, pika_channel(node) as second:
        first.queue_declare("q")
        first.basic_consume("q", lambda *_: None, exclusive=True)
        with channel_error(403):
            second.basic_consume("q", lambda *_: None)


# -- transactions -----------------------------------------------------------------------

def test_tx_commit_publishes_and_rollback_discards(node: NodeProcess) -> None:
    with pika_channel(node) as channel, pika_channel(node) as observer:
        channel.queue_declare("q")
        channel.tx_select()
        publish_bodies(channel, "q", [b"r1", b"r2"])
        assert queue_count(observer, "q") == 0
        channel.tx_rollback()
        publish_bodies(channel, "q", [b"c1", b"c2"])
        assert queue_count(observer, "q") == 0
        channel.tx_commit()
        assert queue_count(observer, "q") == 2
        assert get_bodies(observer, "q") == [b"c1", b"c2"]


def test_acks_inside_a_transaction_apply_only_on_commit(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.queue_declare("q")
        publish_bodies(channel, "q", numbered(2))
        channel.tx_select()
        tags = [channel.basic_get("q")[0].delivery_tag for _ in range(2)]
        channel.basic_ack(tags[-1], multiple=True)
        channel.tx_rollback()
        channel.basic_recover(requeue=True)  # the rolled-back acks left both unacked
        tags = [channel.basic_get("q")[0].delivery_tag for _ in range(2)]
        channel.basic_ack(tags[0])
        channel.basic_ack(tags[1])
        channel.tx_commit()
        channel.basic_recover(requeue=True)
        assert channel.basic_get("q") == (None, None, None)


# -- mandatory --------------------------------------------------------------------------

def test_unroutable_mandatory_publish_is_returned(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    returned: list[tuple[int, str, str, str, bytes]] = []
    channel.add_on_return_callback(lambda _ch, m, _p, body: returned.append(
        (m.reply_code, m.reply_text, m.exchange, m.routing_key, body)))
    channel.queue_declare("bound")
    channel.basic_publish("", "nowhere", b"lost", mandatory=True)
    channel.basic_publish("", "bound", b"kept", mandatory=True)
    channel.basic_publish("", "nowhere", b"silently dropped")
    pump_until(connection, lambda: returned, what="basic.return")
    settle_quietly(connection)
    assert returned == [(312, "NO_ROUTE", "", "nowhere", b"lost")]
    assert get_bodies(channel, "bound") == [b"kept"]
    connection.close()


def test_unroutable_mandatory_publish_with_confirms_raises(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.confirm_delivery()
        with pytest.raises(pika.exceptions.UnroutableError) as info:
            channel.basic_publish("amq.direct", "nowhere", b"x", mandatory=True)
        assert [m.body for m in info.value.messages] == [b"x"]
        channel.basic_publish("amq.direct", "nowhere", b"y")  # confirmed, though dropped


# -- queue kinds ------------------------------------------------------------------------

def test_exclusive_queue_is_locked_and_dies_with_its_connection(node: NodeProcess) -> None:
    owner = connect(node)
    owner.channel().queue_declare("xq", exclusive=True)
    with pika_channel(node) as other, channel_error(405):
        other.queue_declare("xq", passive=True)
    with pika_channel(node) as other, channel_error(405):
        other.basic_consume("xq", lambda *_: None)
    with pika_channel(node) as other, channel_error(405):
        other.queue_declare("xq", exclusive=True)
    owner.close()
    with pika_channel(node) as other, channel_error(404):
        other.queue_declare("xq", passive=True)


def test_auto_delete_queue_goes_when_its_last_consumer_cancels(node: NodeProcess) -> None:
    with pika_channel(node) as channel, pika_channel(node) as observer:
        channel.queue_declare("ad", auto_delete=True)
        first = channel.basic_consume("ad", lambda *_: None)
        second = channel.basic_consume("ad", lambda *_: None)
        channel.basic_cancel(first)
        assert queue_count(observer, "ad") == 0  # still there
        channel.basic_cancel(second)
        with channel_error(404):
            observer.queue_declare("ad", passive=True)


def test_auto_delete_queue_without_consumers_stays(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.queue_declare("ad", auto_delete=True)
        publish_bodies(channel, "ad", [b"x"])
        assert queue_count(channel, "ad") == 1


def test_unknown_queue_arguments_are_accepted_and_ignored(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.queue_declare("q", arguments={"x-custom": 1, "x-max-length": 5})
        channel.queue_declare("q", arguments={"x-custom": 2, "x-max-length": 5})
        channel.queue_declare("q", arguments={"x-max-length": 5, "x-other": "y"})
        with channel_error(406):
            channel.queue_declare("q", arguments={"x-custom": 1})  # x-max-length is known


def test_server_named_queues(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        names = [channel.queue_declare("", exclusive=True).method.queue for _ in range(3)]
        assert all(name.startswith("amq.gen-") for name in names)
        assert len(set(names)) == 3
        publish_bodies(channel, names[1], [b"x"])
        assert [queue_count(channel, name) for name in names] == [0, 1, 0]


# -- exchanges and bindings -------------------------------------------------------------

def test_direct_fanout_and_topic_routing_with_unbind(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        for name, kind in (("d", "direct"), ("f", "fanout"), ("t", "topic")):
            channel.exchange_declare(name, kind)
        for queue in ("q1", "q2", "q3"):
            channel.queue_declare(queue)
        channel.queue_bind("q1", "d", "red")
        channel.queue_bind("q2", "d", "blue")
        channel.queue_bind("q1", "f")
        channel.queue_bind("q2", "f", "ignored")
        channel.queue_bind("q1", "t", "a.*.c")
        channel.queue_bind("q2", "t", "a.#")
        channel.queue_bind("q3", "t", "#.c")
        for exchange, key in (("d", "red"), ("d", "blue"), ("d", "green"), ("f", "any"),
                              ("t", "a.b.c"), ("t", "a"), ("t", "x.c"), ("t", "a.b.b.c")):
            publish_bodies(channel, key, [f"{exchange}:{key}".encode()], exchange=exchange)
        assert get_bodies(channel, "q1") == [b"d:red", b"f:any", b"t:a.b.c"]
        assert get_bodies(channel, "q2") == [b"d:blue", b"f:any", b"t:a.b.c", b"t:a",
                                             b"t:a.b.b.c"]
        assert get_bodies(channel, "q3") == [b"t:a.b.c", b"t:x.c", b"t:a.b.b.c"]
        channel.queue_unbind("q1", "d", "red")
        channel.queue_unbind("q2", "f", "ignored")
        channel.queue_unbind("q3", "t", "#.c")
        for exchange, key in (("d", "red"), ("f", "any"), ("t", "a.b.c")):
            publish_bodies(channel, key, [f"{exchange}:{key}".encode()], exchange=exchange)
        assert get_bodies(channel, "q1") == [b"f:any", b"t:a.b.c"]
        assert get_bodies(channel, "q2") == [b"t:a.b.c"]
        assert get_bodies(channel, "q3") == []


TOPIC_CASES = {  # binding key -> routing keys it matches, as RabbitMQ 3.10 routes them
    "*": ["a", "b"],
    "#": ["", "a", "a.b", "a.b.c", ".", "a.", "a..b", "b"],
    "": [""],
    "a.*": ["a.b", "a."],
    "a.#": ["a", "a.b", "a.b.c", "a.", "a..b"],
    "#.a": ["a"],
    "*.*": ["a.b", ".", "a."],
    "a.#.b": ["a.b", "a..b"],
    "#.b.#": ["a.b", "a.b.c", "a..b", "b"],
}


def test_topic_wildcards_match_words(node: NodeProcess) -> None:
    keys = ["", "a", "a.b", "a.b.c", ".", "a.", "a..b", "b"]
    with pika_channel(node) as channel:
        channel.exchange_declare("t", "topic")
        for i, binding in enumerate(TOPIC_CASES):
            channel.queue_declare(f"q{i}")
            channel.queue_bind(f"q{i}", "t", binding)
        for key in keys:
            publish_bodies(channel, key, [f"<{key}>".encode()], exchange="t")
        for i, expected in enumerate(TOPIC_CASES.values()):
            assert get_bodies(channel, f"q{i}") == [f"<{key}>".encode() for key in expected]


def test_predeclared_exchanges_route(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.queue_declare("q")
        for name, kind in (("amq.direct", "direct"), ("amq.fanout", "fanout"),
                           ("amq.topic", "topic")):
            channel.exchange_declare(name, passive=True)
            channel.exchange_declare(name, kind, durable=True)  # an equivalent redeclare
        channel.queue_bind("q", "amq.direct", "k")
        channel.queue_bind("q", "amq.fanout")
        channel.queue_bind("q", "amq.topic", "k.#")
        publish_bodies(channel, "k", [b"direct"], exchange="amq.direct")
        publish_bodies(channel, "zzz", [b"fanout"], exchange="amq.fanout")
        publish_bodies(channel, "k.x.y", [b"topic"], exchange="amq.topic")
        publish_bodies(channel, "other", [b"dropped"], exchange="amq.direct")
        assert get_bodies(channel, "q") == [b"direct", b"fanout", b"topic"]


def test_deleted_exchange_loses_its_bindings(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.exchange_declare("e", "fanout")
        channel.queue_declare("q")
        channel.queue_bind("q", "e")
        channel.exchange_delete("e")
        channel.exchange_declare("e", "fanout")
        publish_bodies(channel, "", [b"x"], exchange="e")
        assert queue_count(channel, "q") == 0


# -- requeue when consumers go away -----------------------------------------------------

def test_channel_close_requeues_unacked_to_another_consumer(node: NodeProcess) -> None:
    first, second = connect(node), connect(node)
    channel = first.channel()
    channel.queue_declare("q")
    publish_bodies(channel, "q", numbered(6))
    events = consume_events(first, channel, "q", 6)
    channel.basic_ack(events[1][0].delivery_tag)
    channel.basic_ack(events[3][0].delivery_tag)
    other = second.channel()
    received = consume_events(second, other, "q", 0)  # nothing for it to take yet
    settle_quietly(second)
    assert received == []
    channel.close()
    pump_until(second, lambda: len(received) >= 4)
    assert [(body, m.redelivered) for m, body in received] == [
        (b"m0", True), (b"m2", True), (b"m4", True), (b"m5", True)]
    publish_bodies(first.channel(), "q", [b"fresh"])
    pump_until(second, lambda: len(received) >= 5)
    assert (received[4][1], received[4][0].redelivered) == (b"fresh", False)
    first.close()
    second.close()


def test_connection_close_requeues_unacked_into_their_original_positions(
    node: NodeProcess,
) -> None:
    first = connect(node)
    channel = first.channel()
    channel.queue_declare("q")
    publish_bodies(channel, "q", numbered(10))
    channel.basic_qos(prefetch_count=4)
    events = consume_events(first, channel, "q", 4)
    settle_quietly(first)
    assert len(events) == 4
    channel.basic_ack(events[1][0].delivery_tag)
    settle_quietly(first)
    assert [body for _, body in events] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
    first.close()
    second = connect(node)
    got = consume_events(second, second.channel(), "q", 9, auto_ack=True)
    assert [(body, m.redelivered) for m, body in got] == [
        (b"m0", True), (b"m2", True), (b"m3", True), (b"m4", True),
        *((f"m{i}".encode(), False) for i in range(5, 10)),
    ]
    second.close()


# -- purge, delete ----------------------------------------------------------------------

def test_purge_and_delete_report_message_counts(node: NodeProcess) -> None:
    with pika_channel(node) as channel:
        channel.queue_declare("q")
        publish_bodies(channel, "q", numbered(5))
        unacked = channel.basic_get("q")[0].delivery_tag
        assert channel.queue_purge("q").method.message_count == 4
        channel.basic_nack(unacked, requeue=True)  # unacked messages survive a purge
        assert get_bodies(channel, "q") == [b"m0"]
        publish_bodies(channel, "q", numbered(3))
        assert channel.queue_delete("q").method.message_count == 3
        with channel_error(404):
            channel.queue_declare("q", passive=True)


def test_delete_if_unused_and_if_empty(node: NodeProcess) -> None:
    connection = connect(node)
    channel = connection.channel()
    channel.queue_declare("q")
    tag = channel.basic_consume("q", lambda *_: None)
    with channel_error(406):
        connection.channel().queue_delete("q", if_unused=True)
    channel.basic_cancel(tag)
    publish_bodies(channel, "q", [b"x"])
    with channel_error(406):
        connection.channel().queue_delete("q", if_empty=True)
    assert queue_count(channel, "q") == 1
    channel.queue_purge("q")
    assert channel.queue_delete("q", if_unused=True, if_empty=True).method.message_count == 0
    connection.close()


# -- qos --------------------------------------------------------------------------------

def _consume_two_queues(node: NodeProcess, per_consumer: int, global_: int) -> list[str]:
    """Two consumers on one channel, ten messages each; returns the queues of what is
    delivered before any ack."""
    connection = connect(node)
    channel = connection.channel()
    delivered: list[str] = []
    for queue in ("qa", "qb"):
        channel.queue_declare(queue)
        publish_bodies(channel, queue, numbered(10))
    if per_consumer:
        channel.basic_qos(prefetch_count=per_consumer)
    if global_:
        channel.basic_qos(prefetch_count=global_, global_qos=True)
    for queue in ("qa", "qb"):
        channel.basic_consume(queue, lambda _c, m, _p, _b: delivered.append(m.routing_key))
    settle_quietly(connection, 0.5)
    connection.close()
    return delivered


def test_per_consumer_prefetch(node: NodeProcess) -> None:
    assert sorted(_consume_two_queues(node, 3, 0)) == ["qa"] * 3 + ["qb"] * 3


def test_global_prefetch_is_shared_by_the_channel(node: NodeProcess) -> None:
    delivered = _consume_two_queues(node, 0, 4)
    assert len(delivered) == 4
    assert delivered == ["qa"] * 4  # qa's consumer started first and took all the credit


def test_per_consumer_and_global_prefetch_together(node: NodeProcess) -> None:
    assert sorted(_consume_two_queues(node, 2, 3)) == ["qa", "qa", "qb"]


# -- authentication and authorisation ---------------------------------------------------

def test_start_and_tune_advertise_what_clients_rely_on(node: NodeProcess) -> None:
    with RawClient(node) as client:
        client.send(PROTOCOL_HEADER)
        start = client.expect(commands.Connection.Start)
        assert (start.version_major, start.version_minor) == (0, 9)
        assert set(start.mechanisms.split()) >= {"PLAIN", "AMQPLAIN"}
        assert "en_US" in start.locales.split()
        capabilities = start.server_properties["capabilities"]
        for name in ("publisher_confirms", "consumer_cancel_notify", "basic.nack",
                     "connection.blocked", "per_consumer_qos", "authentication_failure_close"):
            assert capabilities[name] is True, name
        client.send_method(0, start_ok())
        tune = client.expect(commands.Connection.Tune)
        assert (tune.channel_max, tune.frame_max, tune.heartbeat) == (2047, 131072, 60)


def _amqplain_login(node: NodeProcess, password: str) -> object:
    response = encode.field_table({"LOGIN": "guest", "PASSWORD": password})[4:].decode()
    with RawClient(node) as client:
        client.send(PROTOCOL_HEADER)
        client.expect(commands.Connection.Start)
        client.send_method(0, commands.Connection.StartOk(
            client_properties={"capabilities": {"authentication_failure_close": True}},
            mechanism="AMQPLAIN", response=response, locale="en_US"))
        return client.read_frame()[1]


def test_amqplain_login(node: NodeProcess) -> None:
    assert isinstance(_amqplain_login(node, "guest"), commands.Connection.Tune)
    refused = _amqplain_login(node, "wrong")
    assert isinstance(refused, commands.Connection.Close)
    assert refused.reply_code == 403


ALICE = {"name": "alice", "password": "secret", "tags": []}
LIMITED = {"user": "alice", "vhost": "/", "configure": "^cfg-", "write": "^w-", "read": "^r-"}


@pytest.fixture
def secured(node_factory: NodeFactory) -> NodeProcess:
    return start_node(node_factory, config_toml(
        users=[ALICE, {"name": "nobody", "password": "pw"}],
        vhosts=["other"],
        permissions=[LIMITED, {"user": "guest", "vhost": "other"}],
    ))


def test_wrong_password_and_unknown_user_are_refused(secured: NodeProcess) -> None:
    with refused_at_open(403):
        connect(secured, user="alice", password="wrong")
    with refused_at_open(403):
        connect(secured, user="mallory", password="secret")
    connect(secured, user="alice", password="secret").close()


def test_unknown_vhost_is_refused(secured: NodeProcess) -> None:
    with refused_at_open(530):
        connect(secured, vhost="missing")
    connect(secured, vhost="other").close()


def test_user_without_permission_on_vhost_is_refused(secured: NodeProcess) -> None:
    with refused_at_open(530):
        connect(secured, user="nobody", password="pw")
    with refused_at_open(530):
        connect(secured, user="alice", password="secret", vhost="other")


def test_vhosts_are_separate(secured: NodeProcess) -> None:
    with pika_channel(secured) as default, pika_channel(secured, vhost="other") as other:
        default.queue_declare("q")
        publish_bodies(default, "q", [b"x"])
        with channel_error(404):
            other.queue_declare("q", passive=True)


def test_configure_write_and_read_permissions(secured: NodeProcess) -> None:
    with pika_channel(secured) as admin:
        for queue in ("r-q", "w-q", "cfg-q"):
            admin.queue_declare(queue)
        for exchange in ("w-x", "r-x", "cfg-x"):
            admin.exchange_declare(exchange, "fanout")
        admin.queue_bind("w-q", "w-x")
        admin.queue_bind("cfg-q", "cfg-x")
    user = {"user": "alice", "password": "secret"}
    with pika_channel(secured, **user) as channel:
        channel.queue_declare("cfg-new")
        channel.exchange_declare("cfg-x2", "direct")
        channel.queue_bind("w-q", "r-x")  # write on the queue, read on the exchange
        channel.confirm_delivery()
        channel.basic_publish("w-x", "", b"written")
        channel.basic_consume("r-q", lambda *_: None)
    denied = [
        lambda ch: ch.queue_declare("plain"),  # configure
        lambda ch: ch.exchange_delete("w-x"),  # configure
        lambda ch: ch.queue_delete("r-q"),  # configure
        lambda ch: ch.basic_publish("cfg-x", "", b"not writable", mandatory=True),  # write
        lambda ch: ch.basic_consume("cfg-q", lambda *_: None),  # read
        lambda ch: ch.basic_get("w-q"),  # read
        lambda ch: ch.queue_purge("w-q"),  # read
        lambda ch: ch.queue_bind("r-q", "r-x"),  # write on the queue
        lambda ch: ch.queue_bind("w-q", "w-x"),  # read on the exchange
    ]
    for operation in denied:
        with pika_channel(secured, **user) as channel, channel_error(403):
            channel.confirm_delivery()
            operation(channel)
    with pika_channel(secured) as admin:
        assert [queue_count(admin, q) for q in ("r-q", "w-q", "cfg-q")] == [0, 1, 0]
