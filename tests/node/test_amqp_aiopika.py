"""The broker's client-visible AMQP 0-9-1 semantics through a real `aio-pika` client
against a real node process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import aio_pika
import aiormq
import pytest
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractIncomingMessage,
    AbstractQueue,
)
from aio_pika.exceptions import ChannelNotFoundEntity, ChannelPreconditionFailed, PublishError
from aiormq.exceptions import ChannelAccessRefused, ChannelLockedResource

from faults.process.node import NodeProcess
from tests.node.helpers import (
    NodeFactory,
    aconnect,
    config_toml,
    numbered,
    read_events,
    start_node,
)

Received = list[AbstractIncomingMessage]


@pytest.fixture
def node(node_factory: NodeFactory) -> NodeProcess:
    return start_node(node_factory)


@pytest.fixture
async def connection(node: NodeProcess) -> AsyncIterator[AbstractConnection]:
    connection = await aconnect(node)
    yield connection
    await connection.close()


async def _publish(channel: AbstractChannel, routing_key: str, bodies: list[bytes],
                   exchange: str = "") -> None:
    target = channel.default_exchange if not exchange else await channel.get_exchange(exchange)
    for body in bodies:
        await target.publish(aio_pika.Message(body), routing_key, mandatory=False)


async def _collect(queue: AbstractQueue, *, no_ack: bool = False) -> tuple[Received, str]:
    """Start a consumer that appends every delivery to a list; returns (list, tag)."""
    received: Received = []

    async def on_message(message: AbstractIncomingMessage) -> None:
        received.append(message)

    tag = await queue.consume(on_message, no_ack=no_ack)
    return received, tag


async def _until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    async def poll() -> None:
        while not predicate():
            await asyncio.sleep(0.02)

    await asyncio.wait_for(poll(), timeout)


async def _quiet(seconds: float = 0.3) -> None:
    """Give the broker time to send whatever it would send next."""
    await asyncio.sleep(seconds)


def _bodies(messages: Received) -> list[bytes]:
    return [m.body for m in messages]


def _flags(messages: Received) -> list[tuple[bytes, bool]]:
    return [(m.body, bool(m.redelivered)) for m in messages]


async def _get_all(queue: AbstractQueue) -> list[bytes]:
    bodies = []
    while (message := await queue.get(no_ack=True, fail=False)) is not None:
        bodies.append(message.body)
    return bodies


# -- publishing and consuming -----------------------------------------------------------

async def test_concurrent_confirmed_publishes_are_all_acked(
    connection: AbstractConnection,
) -> None:
    channel = await connection.channel(publisher_confirms=True)
    queue = await channel.declare_queue("q")
    bodies = numbered(500)
    confirms = await asyncio.gather(*(
        channel.default_exchange.publish(aio_pika.Message(body), "q") for body in bodies))
    assert all(isinstance(c, aiormq.spec.Basic.Ack) for c in confirms)
    assert (await queue.declare()).message_count == 500
    received, _ = await _collect(queue, no_ack=True)
    await _until(lambda: len(received) == 500)
    assert sorted(_bodies(received)) == sorted(bodies)
    assert [m.delivery_tag for m in received] == list(range(1, 501))


async def test_sequential_confirmed_publishes_keep_their_order(
    connection: AbstractConnection,
) -> None:
    channel = await connection.channel(publisher_confirms=True)
    queue = await channel.declare_queue("q")
    await _publish(channel, "q", numbered(100))
    received, _ = await _collect(queue)
    await _until(lambda: len(received) == 100)
    assert _flags(received) == [(body, False) for body in numbered(100)]


async def test_prefetch_limits_unacked_deliveries(connection: AbstractConnection) -> None:
    channel = await connection.channel()
    queue = await channel.declare_queue("q")
    await _publish(channel, "q", numbered(10))
    await channel.set_qos(prefetch_count=2)
    received, _ = await _collect(queue)
    await _quiet()
    assert _bodies(received) == numbered(2)
    await received[1].ack()
    await _quiet()
    assert _bodies(received) == numbered(3)
    await received[2].ack(multiple=True)
    await _quiet()
    assert _bodies(received) == numbered(5)


async def test_get_counts_remaining_and_empty(connection: AbstractConnection) -> None:
    channel = await connection.channel()
    queue = await channel.declare_queue("q")
    await _publish(channel, "q", numbered(3))
    got = [await queue.get() for _ in range(3)]
    assert [(m.body, m.message_count) for m in got] == [(b"m0", 2), (b"m1", 1), (b"m2", 0)]
    assert await queue.get(fail=False) is None
    with pytest.raises(aio_pika.exceptions.QueueEmpty):
        await queue.get()


async def test_requeue_keeps_position_and_sets_redelivered(
    connection: AbstractConnection,
) -> None:
    channel = await connection.channel()
    queue = await channel.declare_queue("q")
    await _publish(channel, "q", numbered(5))
    m0, m1, m2 = [await queue.get() for _ in range(3)]
    await m2.reject(requeue=True)
    await m0.nack(requeue=True)
    got = [await queue.get() for _ in range(4)]
    assert _flags(got) == [(b"m0", True), (b"m2", True), (b"m3", False), (b"m4", False)]
    await m1.reject(requeue=False)
    await got[-1].ack(multiple=True)
    await channel.close()
    channel = await connection.channel()
    assert await _get_all(await channel.declare_queue("q", passive=True)) == []


async def test_basic_recover_requeues_unacked(connection: AbstractConnection) -> None:
    channel = await connection.channel()
    queue = await channel.declare_queue("q")
    await _publish(channel, "q", numbered(3))
    first = await queue.get()
    await queue.get()
    await first.ack()
    await (await channel.get_underlay_channel()).basic_recover(requeue=True)
    got = [await queue.get(no_ack=True) for _ in range(2)]
    assert _flags(got) == [(b"m1", True), (b"m2", False)]


# -- consumers --------------------------------------------------------------------------

async def test_client_cancel_stops_deliveries(connection: AbstractConnection) -> None:
    channel = await connection.channel()
    queue = await channel.declare_queue("q")
    received, tag = await _collect(queue, no_ack=True)
    await _publish(channel, "q", [b"one"])
    await _until(lambda: received)
    await queue.cancel(tag)
    await _publish(channel, "q", [b"two"])
    await _quiet()
    assert _bodies(received) == [b"one"]
    assert await _get_all(queue) == [b"two"]


async def test_server_cancel_when_queue_is_deleted(
    node: NodeProcess, connection: AbstractConnection,
) -> None:
    channel = await connection.channel()
    queue = await channel.declare_queue("q")
    cancelled: list[str | None] = []
    underlay = await channel.get_underlay_channel()
    underlay.on_consumer_cancel_callbacks.add(lambda frame: cancelled.append(frame.consumer_tag))
    _, tag = await _collect(queue)
    other = await aconnect(node)
    await (await other.channel()).queue_delete("q")
    await other.close()
    await _until(lambda: cancelled)
    assert cancelled == [tag]
    await channel.declare_queue("still-usable")


# -- transactions -----------------------------------------------------------------------

async def test_transaction_commit_and_rollback(connection: AbstractConnection) -> None:
    channel = await connection.channel(publisher_confirms=False)
    observer = await connection.channel()
    queue = await observer.declare_queue("q")
    tx = channel.transaction()
    await tx.select()
    await _publish(channel, "q", [b"rolled-back"])
    await tx.rollback()
    await _publish(channel, "q", [b"c1", b"c2"])
    assert (await queue.declare()).message_count == 0
    await tx.commit()
    assert await _get_all(queue) == [b"c1", b"c2"]


async def test_acks_in_a_transaction_wait_for_commit(connection: AbstractConnection) -> None:
    channel = await connection.channel(publisher_confirms=False)
    queue = await channel.declare_queue("q")
    await _publish(channel, "q", numbered(2))
    tx = channel.transaction()
    await tx.select()
    await queue.get()
    await (await queue.get()).ack(multiple=True)
    await tx.rollback()
    await channel.close()  # the acks were rolled back: both return
    channel = await connection.channel(publisher_confirms=False)
    queue = await channel.declare_queue("q")
    tx = channel.transaction()
    await tx.select()
    got = [await queue.get(), await queue.get()]
    assert _flags(got) == [(b"m0", True), (b"m1", True)]
    await got[1].ack(multiple=True)
    await tx.commit()
    await channel.close()
    channel = await connection.channel()
    assert await _get_all(await channel.declare_queue("q")) == []


# -- mandatory --------------------------------------------------------------------------

async def test_unroutable_mandatory_publish_raises_with_no_route(
    connection: AbstractConnection,
) -> None:
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    with pytest.raises(PublishError) as info:
        await channel.default_exchange.publish(aio_pika.Message(b"x"), "nowhere",
                                               mandatory=True)
    frame = info.value.frame
    assert isinstance(frame, aiormq.spec.Basic.Return)
    assert (frame.reply_code, frame.reply_text, frame.routing_key) == (312, "NO_ROUTE",
                                                                       "nowhere")
    confirm = await channel.default_exchange.publish(aio_pika.Message(b"y"), "nowhere",
                                                     mandatory=False)
    assert isinstance(confirm, aiormq.spec.Basic.Ack)


async def test_returned_messages_reach_return_callbacks(connection: AbstractConnection) -> None:
    channel = await connection.channel(publisher_confirms=True, on_return_raises=False)
    returned: list[bytes] = []
    channel.return_callbacks.add(lambda _channel, message: returned.append(message.body))
    await channel.declare_queue("q")
    for key in ("nowhere", "q", "also-nowhere"):
        await channel.default_exchange.publish(aio_pika.Message(key.encode()), key,
                                               mandatory=True)
    await _until(lambda: len(returned) == 2)
    assert returned == [b"nowhere", b"also-nowhere"]


# -- queue kinds ------------------------------------------------------------------------

async def test_exclusive_queue(node: NodeProcess) -> None:
    owner = await aconnect(node)
    await (await owner.channel()).declare_queue("xq", exclusive=True)
    other = await aconnect(node)
    with pytest.raises(ChannelLockedResource):
        await (await other.channel()).declare_queue("xq", passive=True)
    with pytest.raises(ChannelLockedResource):
        await (await other.channel()).declare_queue("xq", exclusive=True)
    await owner.close()
    with pytest.raises(ChannelNotFoundEntity):
        await (await other.channel()).declare_queue("xq", passive=True)
    await (await other.channel()).declare_queue("xq", exclusive=True)  # free again
    await other.close()


async def test_auto_delete_queue_dies_with_last_consumer(
    connection: AbstractConnection,
) -> None:
    channel = await connection.channel()
    queue = await channel.declare_queue("ad", auto_delete=True)
    _, first = await _collect(queue)
    _, second = await _collect(queue)
    await queue.cancel(first)
    await channel.declare_queue("ad", passive=True)
    await queue.cancel(second)
    with pytest.raises(ChannelNotFoundEntity):
        await channel.declare_queue("ad", passive=True)


async def test_server_named_exclusive_queue(node: NodeProcess) -> None:
    connection = await aconnect(node)
    channel = await connection.channel()
    queue = await channel.declare_queue(exclusive=True)
    assert queue.name.startswith("amq.gen-")
    await _publish(channel, queue.name, [b"x"])
    assert await _get_all(queue) == [b"x"]
    name = queue.name
    await connection.close()
    async with await aconnect(node) as other:
        with pytest.raises(ChannelNotFoundEntity):
            await (await other.channel()).declare_queue(name, passive=True)


# -- exchanges --------------------------------------------------------------------------

async def test_topic_exchange_bindings_and_unbind(connection: AbstractConnection) -> None:
    channel = await connection.channel()
    exchange = await channel.declare_exchange("logs", aio_pika.ExchangeType.TOPIC)
    errors = await channel.declare_queue("errors")
    everything = await channel.declare_queue("everything")
    await errors.bind(exchange, "*.error")
    await everything.bind(exchange, "#")
    for key in ("app.error", "app.info", "db.error", "app.error.detail"):
        await exchange.publish(aio_pika.Message(key.encode()), key)
    assert await _get_all(errors) == [b"app.error", b"db.error"]
    assert await _get_all(everything) == [b"app.error", b"app.info", b"db.error",
                                          b"app.error.detail"]
    await errors.unbind(exchange, "*.error")
    await exchange.publish(aio_pika.Message(b"late"), "app.error")
    assert await _get_all(errors) == []
    assert await _get_all(everything) == [b"late"]


async def test_fanout_and_direct_exchanges(connection: AbstractConnection) -> None:
    channel = await connection.channel()
    fanout = await channel.declare_exchange("f", aio_pika.ExchangeType.FANOUT)
    direct = await channel.get_exchange("amq.direct")
    queues = [await channel.declare_queue(f"q{i}") for i in range(3)]
    for queue in queues:
        await queue.bind(fanout)
    await queues[0].bind(direct, "zero")
    await fanout.publish(aio_pika.Message(b"all"), "whatever")
    await direct.publish(aio_pika.Message(b"only-zero"), "zero")
    await direct.publish(aio_pika.Message(b"nobody"), "one")
    assert [await _get_all(q) for q in queues] == [[b"all", b"only-zero"], [b"all"], [b"all"]]
    await fanout.delete()
    with pytest.raises(ChannelNotFoundEntity):
        await channel.get_exchange("f")


# -- requeue when consumers go away -----------------------------------------------------

async def test_connection_close_requeues_to_another_consumer_in_order(
    node: NodeProcess,
) -> None:
    first = await aconnect(node)
    channel = await first.channel()
    await channel.set_qos(prefetch_count=3)
    queue = await channel.declare_queue("q")
    await _publish(channel, "q", numbered(8))
    taken, _ = await _collect(queue)
    await _until(lambda: len(taken) == 3)
    second = await aconnect(node)
    other = await second.channel()
    received, _ = await _collect(await other.declare_queue("q", passive=True))
    await _until(lambda: len(received) == 5)  # m3..m7 go to the second consumer
    assert _flags(received) == [(f"m{i}".encode(), False) for i in range(3, 8)]
    await first.close()
    await _until(lambda: len(received) == 8)
    assert _flags(received[5:]) == [(b"m0", True), (b"m1", True), (b"m2", True)]
    await second.close()


async def test_channel_close_requeues_before_later_messages(
    connection: AbstractConnection,
) -> None:
    channel = await connection.channel()
    queue = await channel.declare_queue("q")
    await _publish(channel, "q", numbered(6))
    got = [await queue.get() for _ in range(3)]
    await got[1].ack()
    await channel.close()
    channel = await connection.channel()
    queue = await channel.declare_queue("q")
    received = [await queue.get(no_ack=True) for _ in range(5)]
    assert _flags(received) == [(b"m0", True), (b"m2", True), (b"m3", False), (b"m4", False),
                                (b"m5", False)]


# -- purge and delete -------------------------------------------------------------------

async def test_purge_and_delete_counts(connection: AbstractConnection) -> None:
    channel = await connection.channel()
    queue = await channel.declare_queue("q")
    await _publish(channel, "q", numbered(4))
    assert (await queue.purge()).message_count == 4
    await _publish(channel, "q", numbered(2))
    assert (await queue.delete(if_unused=False, if_empty=False)).message_count == 2


@pytest.mark.parametrize("kwargs", [{"if_unused": True}, {"if_empty": True}])
async def test_conditional_delete_fails(connection: AbstractConnection,
                                        kwargs: dict[str, bool]) -> None:
    channel = await connection.channel()
    await channel.set_qos(prefetch_count=1)
    queue = await channel.declare_queue("q")
    await _publish(channel, "q", [b"x", b"y"])
    received, _ = await _collect(queue)  # the queue is in use, and y stays ready
    await _until(lambda: received)
    other = await connection.channel()
    with pytest.raises(ChannelPreconditionFailed):
        await other.queue_delete("q", **kwargs)
    assert (await queue.declare()).message_count == 1


# -- qos --------------------------------------------------------------------------------

async def _deliveries_across_two_queues(
    connection: AbstractConnection, configure: Callable[[AbstractChannel], Awaitable[object]],
) -> list[str]:
    channel = await connection.channel()
    await configure(channel)
    per_queue: list[Received] = []
    for name in ("qa", "qb"):
        queue = await channel.declare_queue(name)
        await _publish(channel, name, numbered(5))
        per_queue.append((await _collect(queue))[0])
    await _quiet()
    return [m.routing_key or "" for messages in per_queue for m in messages]


async def test_per_consumer_qos(connection: AbstractConnection) -> None:
    received = await _deliveries_across_two_queues(
        connection, lambda ch: ch.set_qos(prefetch_count=2))
    assert sorted(received) == ["qa", "qa", "qb", "qb"]


async def test_global_qos(connection: AbstractConnection) -> None:
    received = await _deliveries_across_two_queues(
        connection, lambda ch: ch.set_qos(prefetch_count=3, global_=True))
    assert received == ["qa", "qa", "qa"]


# -- access -----------------------------------------------------------------------------

@pytest.fixture
def secured(node_factory: NodeFactory) -> NodeProcess:
    return start_node(node_factory, config_toml(
        users=[{"name": "carol", "password": "pw"}],
        vhosts=["v2"],
        permissions=[{"user": "carol", "vhost": "v2", "configure": "^c-",
                      "write": "^w-", "read": "^r-"}],
    ))


def _connection_error_codes(node: NodeProcess) -> list[int]:
    return [e["code"] for e in read_events(node) if e["event"] == "connection_error"]


async def test_bad_credentials_are_refused_with_403(secured: NodeProcess) -> None:
    with pytest.raises(aiormq.exceptions.AMQPConnectionError):
        await aconnect(secured, user="carol", password="wrong", vhost="v2")
    assert _connection_error_codes(secured) == [403]


async def test_vhost_access_is_refused_with_530(secured: NodeProcess) -> None:
    for kwargs in ({"vhost": "nope"}, {"user": "carol", "password": "pw"}):
        with pytest.raises(aiormq.exceptions.AMQPError):  # aiormq hides the reply code
            await aconnect(secured, **kwargs)
    assert _connection_error_codes(secured) == [530, 530]
    await (await aconnect(secured, user="carol", password="pw", vhost="v2")).close()


async def test_permissions_are_enforced(secured: NodeProcess) -> None:
    async with await aconnect(secured, user="carol", password="pw", vhost="v2") as connection:
        channel = await connection.channel()
        await channel.declare_queue("c-queue")
        with pytest.raises(ChannelAccessRefused):
            await (await connection.channel()).declare_queue("other")
        with pytest.raises(ChannelAccessRefused):
            await (await connection.channel()).declare_exchange("other")
        with pytest.raises(ChannelAccessRefused):
            queue = await (await connection.channel()).declare_queue("c-queue", passive=True)
            await queue.get(fail=False)
        publisher = await connection.channel(publisher_confirms=True)
        with pytest.raises(ChannelAccessRefused):
            await publisher.default_exchange.publish(aio_pika.Message(b"x"), "c-queue")
