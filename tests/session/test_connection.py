"""The I/O-free connection and channel state machines, driven in memory (no sockets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pamqp import commands, frame

from cluster.core.broker import BrokerConfig
from cluster.core.users import Permission
from cluster.mgmt.shapes import connection_json
from cluster.session.broker import Broker
from cluster.session.connection import OUTBOX_LIMIT
from cluster.session.error_log import BURST, WINDOW
from cluster.store import MessageStore
from tests.amqp.memory_client import PLAIN, FakeClock, MemoryClient, RecordedEvents, publish_frames


def make_broker(clock: FakeClock | None = None, store: MessageStore | None = None,
                **config: int) -> Broker:
    broker = Broker(BrokerConfig(**config), clock=clock or FakeClock(), log=store)
    broker.add_user("guest", "guest", ["administrator"])
    broker.set_permissions("guest", "/", Permission())
    return broker


def open_client(broker: Broker, **kwargs: object) -> MemoryClient:
    client = MemoryClient(broker)
    client.handshake(**kwargs)  # type: ignore[arg-type]
    client.open_channel()
    client.drain()
    return client


def test_handshake_negotiates_and_opens() -> None:
    client = MemoryClient(make_broker())
    client.handshake()
    methods = client.methods()
    assert [type(m) for m in methods] == [
        commands.Connection.Start, commands.Connection.Tune, commands.Connection.OpenOk
    ]
    start = methods[0]
    assert isinstance(start, commands.Connection.Start)
    assert start.server_properties["capabilities"]["consumer_cancel_notify"] is True
    assert "PLAIN" in start.mechanisms.split()


def test_wrong_password_is_refused_with_403() -> None:
    client = MemoryClient(make_broker())
    client.handshake(password_response="\x00guest\x00wrong")
    close = [m for m in client.methods() if isinstance(m, commands.Connection.Close)]
    assert close and close[0].reply_code == 403
    assert close[0].reply_text.startswith("ACCESS_REFUSED")


def test_refused_login_just_hangs_up_on_clients_without_authentication_failure_close() -> None:
    client = MemoryClient(make_broker(), capabilities={"consumer_cancel_notify": True})
    client.handshake(password_response="\x00guest\x00wrong")
    assert not [m for m in client.methods() if isinstance(m, commands.Connection.Close)]
    assert client.connection.should_close


def login_from(peer: str, user: str = "guest", loopback_users: list[str] | None = None,
               **client: Any) -> tuple[MemoryClient, RecordedEvents]:
    """A full handshake by ``user`` (password "guest") from address ``peer``."""
    events = RecordedEvents()
    config = BrokerConfig() if loopback_users is None else BrokerConfig(
        loopback_users=loopback_users)
    broker = Broker(config, clock=FakeClock(), events=events)
    broker.add_user(user, "guest")
    broker.set_permissions(user, "/", Permission())
    memory = MemoryClient(broker, peer=peer, **client)
    memory.handshake(password_response=f"\x00{user}\x00guest")
    return memory, events


@pytest.mark.parametrize("peer", ["127.0.0.1:5000", "127.8.9.10:5000", "::1:5000",
                                  "::ffff:127.0.0.1:5000"])
def test_guest_logs_in_from_loopback_addresses(peer: str) -> None:
    client, _ = login_from(peer)
    assert isinstance(client.methods()[-1], commands.Connection.OpenOk)


@pytest.mark.parametrize("peer", ["192.0.2.7:5000", "fd00::2:5000", "::ffff:192.0.2.7:5000"])
def test_guest_is_refused_from_elsewhere_telling_the_event_log_why(peer: str) -> None:
    client, events = login_from(peer)
    methods = client.methods()
    assert not [m for m in methods if isinstance(m, commands.Connection.Tune)]
    close = methods[-1]
    # What RabbitMQ tells the client: no reason (it would help a guesser).
    assert isinstance(close, commands.Connection.Close)
    assert (close.reply_code, close.reply_text) == (
        403, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. "
        "For details see the broker logfile.")
    assert [fields["text"] for fields in events.of("connection_error")] == [
        "ACCESS_REFUSED - PLAIN login refused: user 'guest' can only connect via localhost"]


def test_a_refused_guest_without_authentication_failure_close_is_hung_up_on() -> None:
    client, events = login_from("192.0.2.7:5000",
                                capabilities={"consumer_cancel_notify": True})
    assert [type(m) for m in client.methods()] == [commands.Connection.Start]
    assert client.connection.should_close
    assert "can only connect via localhost" in events.emitted[-1].fields()["text"]


def test_loopback_users_names_who_is_restricted() -> None:
    anyone, _ = login_from("192.0.2.7:5000", user="alice")
    assert isinstance(anyone.methods()[-1], commands.Connection.OpenOk)
    listed, _ = login_from("127.0.0.1:5000", user="alice", loopback_users=["alice"])
    assert isinstance(listed.methods()[-1], commands.Connection.OpenOk)
    listed, _ = login_from("192.0.2.7:5000", user="alice", loopback_users=["alice"])
    assert isinstance(listed.methods()[-1], commands.Connection.Close)
    unrestricted, _ = login_from("192.0.2.7:5000", loopback_users=[])
    assert isinstance(unrestricted.methods()[-1], commands.Connection.OpenOk)


def test_wrong_protocol_header_gets_ours_back_and_closes() -> None:
    client = MemoryClient(make_broker())
    client.send_raw(b"AMQP\x01\x01\x00\x0a")
    assert client.drain() == [(0, b"AMQP\x00\x00\x09\x01")]
    assert client.connection.should_close


def test_bad_frame_end_closes_connection_with_501() -> None:
    client = open_client(make_broker())
    client.send_raw(b"\x01\x00\x01\x00\x00\x00\x04\x00\x14\x00\x28\x00")
    close = client.methods()[-1]
    assert isinstance(close, commands.Connection.Close) and close.reply_code == 501


def _close_of(client: MemoryClient) -> tuple[int, str] | None:
    closes = [m for m in client.methods() if isinstance(m, commands.Connection.Close)]
    return (closes[-1].reply_code, closes[-1].reply_text) if closes else None


def test_frames_before_a_bad_one_in_the_same_read_are_answered_first() -> None:
    client = open_client(make_broker())
    client.send_raw(frame.marshal(commands.Channel.Open(), 2)
                    + b"\x01\x00\x01\x00\x00\x00\x04\x00\x14\x00\x28\x00")
    received = [(channel, type(m).__name__) for channel, m in client.drain()]
    assert received == [(2, "OpenOk"), (0, "Close")]


def test_frames_read_with_tune_ok_are_held_to_the_frame_max_it_chose() -> None:
    client = MemoryClient(make_broker())
    client.send_raw(b"AMQP\x00\x00\x09\x01")
    client.send(0, commands.Connection.StartOk(mechanism="PLAIN", response=PLAIN))
    big = commands.Queue.Declare(queue="q", arguments={"x-pad": "p" * 8000})
    client.send_raw(b"".join((
        frame.marshal(commands.Connection.TuneOk(frame_max=131072), 0),
        frame.marshal(commands.Connection.Open(virtual_host="/"), 0),
        frame.marshal(commands.Channel.Open(), 1), frame.marshal(big, 1))))
    assert [type(m).__name__ for m in client.methods()] == [
        "Start", "Tune", "OpenOk", "OpenOk", "DeclareOk"]


def test_a_frame_over_4096_bytes_before_tune_ok_is_a_frame_error() -> None:
    client = MemoryClient(make_broker())
    client.send_raw(b"AMQP\x00\x00\x09\x01")
    client.send(0, commands.Connection.StartOk(
        client_properties={"pad": "p" * 5000}, mechanism="PLAIN", response=PLAIN))
    assert _close_of(client) == (
        501, "FRAME_ERROR - frame of 5053 bytes exceeds frame_max 4096")


def test_a_heartbeat_with_a_payload_is_a_frame_error() -> None:
    client = open_client(make_broker())
    client.send_raw(b"\x08\x00\x00\x00\x00\x00\x02hi\xce")
    assert _close_of(client) == (
        501, "FRAME_ERROR - heartbeat frame with a 2-byte payload")


def test_a_host_sending_bad_frames_cannot_flood_the_event_log() -> None:
    clock = FakeClock()
    events = RecordedEvents()
    broker = Broker(BrokerConfig(), clock=clock, events=events)
    broker.add_user("guest", "guest", ["administrator"])
    broker.set_permissions("guest", "/", Permission())
    for peer in ["127.0.0.1:1"] * (BURST + 30) + ["127.0.0.2:1"] * 5:
        client = MemoryClient(broker, peer=peer)
        client.send_raw(b"AMQP\x00\x00\x09\x01" + b"\x01\x00\x00\x00\x00\x00\x00\xff")
        assert client.connection.state.value == "closing"
    hosts = [fields["peer"].split(":")[0] for fields in events.of("connection_error")]
    assert hosts == ["127.0.0.1"] * BURST + ["127.0.0.2"] * 5
    clock.now += WINDOW
    broker.tick()
    summaries = events.of("client_errors_suppressed")
    assert [(s["host"], s["count"]) for s in summaries] == [("127.0.0.1", 30)]


def test_method_while_content_expected_is_unexpected_frame() -> None:
    client = open_client(make_broker())
    client.send(1, commands.Basic.Publish(routing_key="q"))
    client.send(1, commands.Basic.Qos(prefetch_count=1))
    close = client.methods()[-1]
    assert isinstance(close, commands.Connection.Close) and close.reply_code == 505


def test_channel_error_closes_only_the_channel_and_ignores_frames_until_close_ok() -> None:
    client = open_client(make_broker())
    client.send(1, commands.Queue.Declare(queue="missing", passive=True))
    close = client.methods()[-1]
    assert isinstance(close, commands.Channel.Close) and close.reply_code == 404
    assert (close.class_id, close.method_id) == (50, 10)
    client.send(1, commands.Queue.Declare(queue="q"))
    assert client.methods() == []  # dropped: the channel is closing
    client.send(1, commands.Channel.CloseOk())
    client.open_channel(1)
    assert isinstance(client.methods()[-1], commands.Channel.OpenOk)


def declare(client: MemoryClient, name: str, **flags: bool) -> None:
    client.send(1, commands.Queue.Declare(queue=name, **flags))
    assert isinstance(client.methods()[-1], commands.Queue.DeclareOk)


def test_requeue_on_channel_close_restores_original_positions() -> None:
    broker = make_broker()
    publisher = open_client(broker)
    declare(publisher, "q")
    for i in range(5):
        publisher.publish(1, f"m{i}".encode(), "q")
    consumer = open_client(broker)
    consumer.send(1, commands.Basic.Qos(prefetch_count=2))
    consumer.send(1, commands.Basic.Consume(queue="q", consumer_tag="c1"))
    assert [body for _, body in consumer.deliveries()] == [b"m0", b"m1"]
    consumer.send(1, commands.Channel.Close(200, "bye", 0, 0))
    other = open_client(broker)
    other.send(1, commands.Basic.Consume(queue="q", consumer_tag="c2", no_ack=True))
    got = [(body, d.redelivered) for d, body in other.deliveries()]
    assert got == [(b"m0", True), (b"m1", True), (b"m2", False), (b"m3", False),
                   (b"m4", False)]


def test_confirms_for_a_batch_go_out_as_one_multiple_ack() -> None:
    client = open_client(make_broker())
    declare(client, "q")
    client.send(1, commands.Confirm.Select())
    client.drain()
    # Three publishes in one read: the broker answers with a single ack, multiple=True.
    client.send_raw(b"".join(publish_frames(1, f"m{i}".encode(), "q") for i in range(3)))
    acks = [m for m in client.methods() if isinstance(m, commands.Basic.Ack)]
    assert [(a.delivery_tag, a.multiple) for a in acks] == [(3, True)]


def test_persistent_confirm_waits_for_the_store(tmp_path: Path) -> None:
    store = MessageStore(tmp_path)
    store.recover()
    broker = make_broker(store=store)
    client = open_client(broker)
    declare(client, "q", durable=True)
    client.send(1, commands.Confirm.Select())
    client.drain()
    client.publish(1, b"durable", "q", persistent=True)
    assert not [m for m in client.methods() if isinstance(m, commands.Basic.Ack)]
    broker.on_durable(store.commit())
    acks = [m for m in client.methods() if isinstance(m, commands.Basic.Ack)]
    assert [a.delivery_tag for a in acks] == [1]
    store.close()


def test_missed_heartbeats_close_and_idle_connection_sends_heartbeats() -> None:
    clock = FakeClock()
    broker = make_broker(clock)
    client = open_client(broker, heartbeat=2)
    clock.now += 1.5
    broker.tick()
    assert client.drain()[-1][1].__class__.__name__ == "Heartbeat"
    clock.now += 3.0
    broker.tick()
    assert client.connection.should_close


def test_memory_alarm_blocks_publishers_and_unblocks_when_drained() -> None:
    broker = make_broker(memory_high_watermark=100)
    client = open_client(broker)
    declare(client, "q")
    client.publish(1, b"x" * 150, "q")
    assert any(isinstance(m, commands.Connection.Blocked) for m in client.methods())
    assert client.connection.reading_paused
    client.send(1, commands.Queue.Purge(queue="q"))
    assert any(isinstance(m, commands.Connection.Unblocked) for m in client.methods())
    assert not client.connection.reading_paused


def test_a_backlogged_peer_link_holds_publishers_only_and_tells_no_client() -> None:
    broker = make_broker()
    publisher, consumer = open_client(broker), open_client(broker)
    declare(publisher, "q")
    publisher.publish(1, b"m", "q")
    broker.set_peer_flow(True)
    assert publisher.connection in broker.dirty  # for the shell to pause it
    late = open_client(broker)
    late.publish(1, b"m", "q")  # a first publish while held: held from then on too
    assert publisher.connection.reading_paused and late.connection.reading_paused
    assert not consumer.connection.reading_paused
    assert [connection_json("n1", c.connection, None)["state"]
            for c in (publisher, late, consumer)] == ["flow", "flow", "running"]
    assert not [m for c in (publisher, late) for m in c.methods()
                if isinstance(m, commands.Connection.Blocked)]  # flow is not an alarm
    broker.set_peer_flow(False)
    assert not publisher.connection.reading_paused and not late.connection.reading_paused
    assert broker.dirty >= {publisher.connection, late.connection}  # and resumes them


def test_a_body_still_arriving_counts_toward_the_memory_alarm() -> None:
    broker = make_broker(memory_high_watermark=1000)
    client = open_client(broker)
    declare(client, "q")
    client.send_raw(publish_frames(1, b"x" * 8000, "q", body_size=100_000))
    assert broker.message_bytes() == 8000
    assert any(isinstance(m, commands.Connection.Blocked) for m in client.methods())
    assert client.connection.reading_paused
    client.send(1, commands.Channel.Close(200, "bye", 0, 0))
    assert broker.message_bytes() == 0
    assert any(isinstance(m, commands.Connection.Unblocked) for m in client.methods())


def test_an_uncommitted_transaction_counts_toward_the_memory_alarm() -> None:
    broker = make_broker(memory_high_watermark=1000)
    client = open_client(broker)
    declare(client, "q")
    client.send(1, commands.Tx.Select())
    for _ in range(3):
        client.publish(1, b"x" * 600, "q")
    assert broker.message_bytes() == 1800
    assert client.connection.reading_paused
    client.send(1, commands.Tx.Rollback())
    assert broker.message_bytes() == 0
    assert not client.connection.reading_paused


def test_a_client_not_reading_its_output_is_not_read_then_dropped() -> None:
    clock = FakeClock()
    events = RecordedEvents()
    broker = Broker(BrokerConfig(send_timeout=15), clock=clock, events=events)
    broker.add_user("guest", "guest", ["administrator"])
    broker.set_permissions("guest", "/", Permission())
    client = open_client(broker, heartbeat=2)
    client.connection.output_stalled()
    assert client.connection.reading_paused
    clock.now += 14
    broker.tick()
    assert not client.connection.should_close  # its heartbeats cannot be read meanwhile
    client.connection.output_resumed()
    assert not client.connection.reading_paused
    client.connection.output_stalled()
    clock.now += 16
    broker.tick()
    assert client.connection.should_close
    errors = events.of("connection_error")
    assert errors[-1]["text"] == (
        "CONNECTION_FORCED - client did not read its output for 15 s (send_timeout)")


def test_deliveries_wait_for_room_in_the_outbox() -> None:
    client = open_client(make_broker())
    declare(client, "q")
    body = b"m" * 1024
    client.send_raw(b"".join(publish_frames(1, body, "q") for _ in range(3000)))
    client.drain()
    connection = client.connection
    connection.receive_data(frame.marshal(commands.Basic.Consume(queue="q", no_ack=True), 1))
    queued = sum(len(data) for data in connection.outbox)
    assert OUTBOX_LIMIT <= queued < OUTBOX_LIMIT + 2 * len(body)
    deliveries = client.deliveries()  # written by the "shell", room is made again
    assert len(deliveries) == 3000


@pytest.mark.parametrize("tx_action, expected", [(commands.Tx.Commit, 1),
                                                 (commands.Tx.Rollback, 0)])
def test_transaction_publishes_land_only_on_commit(tx_action: type, expected: int) -> None:
    client = open_client(make_broker())
    declare(client, "q")
    client.send(1, commands.Tx.Select())
    client.publish(1, b"in-tx", "q")
    client.drain()
    client.send(1, commands.Queue.Declare(queue="q", passive=True))
    before = client.methods()[-1]
    assert isinstance(before, commands.Queue.DeclareOk) and before.message_count == 0
    client.send(1, tx_action())
    client.send(1, commands.Queue.Declare(queue="q", passive=True))
    after = client.methods()[-1]
    assert isinstance(after, commands.Queue.DeclareOk) and after.message_count == expected


def _refusal(broker: Broker, method: object) -> commands.Channel.Close:
    client = open_client(broker)
    client.send(1, method)
    (close,) = [m for m in client.methods() if isinstance(m, commands.Channel.Close)]
    return close


def test_a_refusal_names_the_kind_of_resource_refused() -> None:
    """Permissions to configure queues only: an exchange is refused as an exchange, and
    a bind's read on the exchange as an exchange too."""
    broker = make_broker()
    broker.set_permissions("guest", "/", Permission(configure="^q", write=".*", read="^q"))
    close = _refusal(broker, commands.Exchange.Declare(exchange="amq.topic", passive=False,
                                                        exchange_type="topic"))
    assert close.reply_code == 403
    assert "exchange 'amq.topic' in vhost '/' refused" in close.reply_text
    close = _refusal(broker, commands.Queue.Declare(queue="x"))
    assert "queue 'x' in vhost '/' refused" in close.reply_text
    close = _refusal(broker, commands.Queue.Bind(queue="q", exchange="amq.direct"))
    assert "exchange 'amq.direct' in vhost '/' refused" in close.reply_text


def test_the_default_exchange_cannot_be_declared_even_passively() -> None:
    for passive in (True, False):
        close = _refusal(make_broker(), commands.Exchange.Declare(exchange="", passive=passive))
        assert close.reply_code == 403
        assert close.reply_text.endswith("operation not permitted on the default exchange")
