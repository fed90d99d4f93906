"""What each method a client sends on a channel does, by AMQP class: channel, exchange,
queue, basic, confirm, tx (`HANDLERS`). ``basic.publish`` and ``basic.ack`` are not
here: the channel takes them itself, as the first with its content frames.

A handler raises the `ChannelError` or `ConnectionError_` RabbitMQ would answer with;
the channel fills in the method it answers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pamqp import commands

from cluster.amqp import framing
from cluster.amqp.errors import (
    NOT_ALLOWED,
    NOT_IMPLEMENTED,
    PRECONDITION_FAILED,
    ChannelError,
    ConnectionError_,
)
from cluster.core.queue import Counts, GetAnswer
from cluster.session.consumer import ChannelConsumer

if TYPE_CHECKING:
    from cluster.session.channel import Channel


# -- channel ----------------------------------------------------------------------------

def channel_close(channel: Channel, method: commands.Channel.Close) -> None:
    channel.close()
    channel.send(commands.Channel.CloseOk())
    channel.connection.channels.forget(channel.id)


def channel_flow(channel: Channel, method: commands.Channel.Flow) -> None:
    if not method.active:
        raise ConnectionError_(NOT_IMPLEMENTED, "active=false", 20, 20)
    channel.send(commands.Channel.FlowOk(active=True))


# -- exchange ---------------------------------------------------------------------------

def exchange_declare(channel: Channel, method: commands.Exchange.Declare) -> None:
    channel.check("configure", "exchange", method.exchange)
    channel.vhost.declare_exchange(
        method.exchange,
        method.exchange_type,
        passive=method.passive,
        durable=method.durable,
        auto_delete=method.auto_delete,
        internal=method.internal,
        arguments=method.arguments or {},
    )
    if not method.passive:
        channel.broker.definitions_changed()
    if not method.nowait:
        channel.send(commands.Exchange.DeclareOk())


def exchange_delete(channel: Channel, method: commands.Exchange.Delete) -> None:
    channel.check("configure", "exchange", method.exchange)
    channel.vhost.delete_exchange(method.exchange, method.if_unused)
    channel.broker.definitions_changed()
    if not method.nowait:
        channel.send(commands.Exchange.DeleteOk())


# -- queue ------------------------------------------------------------------------------

def queue_declare(channel: Channel, method: commands.Queue.Declare) -> None:
    name = method.queue or channel.broker.generated_name("amq.gen-")
    if not method.passive:
        channel.check("configure", "queue", name)
    queue = channel.vhost.declare_queue(
        name,
        connection_id=channel.connection.id,
        passive=method.passive,
        durable=method.durable,
        exclusive=method.exclusive,
        auto_delete=method.auto_delete,
        arguments=method.arguments or {},
        server_named=not method.queue,
    )
    if not method.passive and queue.durable:
        channel.broker.definitions_changed()
    channel.last_queue = name
    if method.nowait:
        return

    def counted(counts: Counts) -> None:
        channel.connection.send(framing.declare_ok_frame(
            channel.id, name, counts.messages, counts.consumers))

    channel.when_answered(queue.ask_counts, counted)


def queue_bind(channel: Channel, method: commands.Queue.Bind) -> None:
    name = channel.queue_name(method.queue)
    channel.check("write", "queue", name)
    channel.check("read", "exchange", method.exchange)
    channel.vhost.queue(name, channel.connection.id)
    channel.vhost.bind(name, method.exchange, method.routing_key)
    channel.broker.definitions_changed()
    if not method.nowait:
        channel.send(commands.Queue.BindOk())


def queue_unbind(channel: Channel, method: commands.Queue.Unbind) -> None:
    name = channel.queue_name(method.queue)
    channel.check("write", "queue", name)
    channel.check("read", "exchange", method.exchange)
    queue = channel.vhost.queues.get(name)
    if queue is not None:  # unbinding a missing queue succeeds, as in RabbitMQ
        channel.vhost.check_exclusive(queue, channel.connection.id)
    channel.vhost.unbind(name, method.exchange, method.routing_key)
    channel.broker.definitions_changed()
    channel.send(commands.Queue.UnbindOk())


def queue_purge(channel: Channel, method: commands.Queue.Purge) -> None:
    name = channel.queue_name(method.queue)
    channel.check("read", "queue", name)
    queue = channel.vhost.queue(name, channel.connection.id)

    def purged(count: int) -> None:
        if not method.nowait:
            channel.send(commands.Queue.PurgeOk(count))

    channel.when_answered(queue.ask_purge, purged)


def queue_delete(channel: Channel, method: commands.Queue.Delete) -> None:
    name = channel.queue_name(method.queue)
    channel.check("configure", "queue", name)
    queue = channel.vhost.queues.get(name)

    def deleted(count: int) -> None:
        if not method.nowait:
            channel.send(commands.Queue.DeleteOk(count))

    if queue is None:  # deleting a missing queue succeeds, as in RabbitMQ
        deleted(0)
        return
    channel.vhost.check_exclusive(queue, channel.connection.id)
    breaks = channel.broker.config.breaks
    if_unused = method.if_unused and not breaks.delete_ignores_if_unused
    if_empty = method.if_empty and not breaks.delete_ignores_if_empty

    def delete_here() -> int:
        return channel.broker.delete_queue(
            channel.vhost, name, if_unused=if_unused, if_empty=if_empty)

    channel.when_answered(
        lambda reply: queue.ask_delete(if_unused, if_empty, delete_here, reply), deleted)


# -- basic ------------------------------------------------------------------------------

def basic_qos(channel: Channel, method: commands.Basic.Qos) -> None:
    if method.prefetch_size:
        raise ConnectionError_(
            NOT_IMPLEMENTED, f"prefetch_size!=0 ({method.prefetch_size})", 60, 10
        )
    if method.global_:
        channel.global_prefetch = method.prefetch_count
    else:
        channel.prefetch_count = method.prefetch_count
    channel.send(commands.Basic.QosOk())
    for consumer in channel.consumers.values():
        consumer.queue.dispatch()


def basic_consume(channel: Channel, method: commands.Basic.Consume) -> None:
    name = channel.queue_name(method.queue)
    channel.check("read", "queue", name)
    queue = channel.vhost.queue(name, channel.connection.id)
    tag = method.consumer_tag
    if not tag:
        tag = channel.broker.generated_name("amq.ctag-")
    if tag in channel.consumers:
        raise ConnectionError_(
            NOT_ALLOWED, f"attempt to reuse consumer tag '{tag}'", 60, 20
        )

    def join(_: object = None) -> None:
        consumer = ChannelConsumer(
            channel, queue, tag, method.no_ack, method.exclusive, channel.prefetch_count,
            dict(method.arguments or {}),
        )
        channel.consumers[tag] = consumer
        if not method.nowait:
            channel.send(commands.Basic.ConsumeOk(tag))
        if channel.vhost.queues.get(name) is not queue:
            # Deleted here while its master's grant was on the way: the master granted
            # it before deleting, so the consumer joined and goes with the queue.
            channel.cancel_by_server(consumer)
            return
        queue.add_consumer(consumer)
        queue.dispatch()

    if channel.broker.config.breaks.exclusive_consumer_ignored:
        join()
    else:  # every node's consumers count: a queue mastered elsewhere asks its master
        channel.when_answered(lambda reply: queue.ask_consume(method.exclusive, reply), join)


def basic_cancel(channel: Channel, method: commands.Basic.Cancel) -> None:
    tag = method.consumer_tag or ""
    consumer = channel.consumers.get(tag)
    if not method.nowait:
        channel.send(commands.Basic.CancelOk(tag))
    if consumer is not None:
        channel.remove_consumer(consumer)


def basic_get(channel: Channel, method: commands.Basic.Get) -> None:
    name = channel.queue_name(method.queue)
    channel.check("read", "queue", name)
    queue = channel.vhost.queue(name, channel.connection.id)
    no_ack = method.no_ack
    # the queue's own reading of the get: settled at once, or held for an ack
    settled = no_ack and not channel.broker.config.breaks.no_ack_get_unsettled

    def got(answer: GetAnswer) -> None:
        channel.answer_get(queue, no_ack, answer)

    channel.when_answered(lambda reply: queue.ask_get(settled, channel.ref, reply), got)


def basic_reject(channel: Channel, method: commands.Basic.Reject) -> None:
    channel.settle(method.delivery_tag or 0, False, method.requeue, method_id=90)


def basic_nack(channel: Channel, method: commands.Basic.Nack) -> None:
    channel.settle(method.delivery_tag, method.multiple, method.requeue, method_id=120)


def basic_recover(channel: Channel, method: commands.Basic.Recover) -> None:
    if not method.requeue:
        raise ConnectionError_(NOT_IMPLEMENTED, "requeue=false", 60, 110)
    channel.settle_all(requeue=not channel.broker.config.breaks.recover_drops)
    channel.send(commands.Basic.RecoverOk())


# -- confirm and tx ---------------------------------------------------------------------

def confirm_select(channel: Channel, method: commands.Confirm.Select) -> None:
    if channel.transactional:
        raise ChannelError(
            PRECONDITION_FAILED, "cannot switch from tx to confirm mode"
        )
    channel.confirm = True
    if not method.nowait:
        channel.send(commands.Confirm.SelectOk())


def tx_select(channel: Channel, method: commands.Tx.Select) -> None:
    if channel.confirm:
        raise ChannelError(
            PRECONDITION_FAILED, "cannot switch from confirm to tx mode"
        )
    channel.transactional = True
    channel.send(commands.Tx.SelectOk())


def tx_commit(channel: Channel, method: commands.Tx.Commit) -> None:
    if not channel.transactional:
        raise ChannelError(PRECONDITION_FAILED, "channel is not transactional")
    channel.commit()


def tx_rollback(channel: Channel, method: commands.Tx.Rollback) -> None:
    if not channel.transactional:
        raise ChannelError(PRECONDITION_FAILED, "channel is not transactional")
    channel.rollback()
    channel.send(commands.Tx.RollbackOk())


HANDLERS: dict[type, Callable[[Channel, Any], None]] = {
    commands.Channel.Close: channel_close,
    commands.Channel.Flow: channel_flow,
    commands.Exchange.Declare: exchange_declare,
    commands.Exchange.Delete: exchange_delete,
    commands.Queue.Declare: queue_declare,
    commands.Queue.Bind: queue_bind,
    commands.Queue.Unbind: queue_unbind,
    commands.Queue.Purge: queue_purge,
    commands.Queue.Delete: queue_delete,
    commands.Basic.Qos: basic_qos,
    commands.Basic.Consume: basic_consume,
    commands.Basic.Cancel: basic_cancel,
    commands.Basic.Get: basic_get,
    commands.Basic.Reject: basic_reject,
    commands.Basic.Nack: basic_nack,
    commands.Basic.Recover: basic_recover,
    commands.Confirm.Select: confirm_select,
    commands.Tx.Select: tx_select,
    commands.Tx.Commit: tx_commit,
    commands.Tx.Rollback: tx_rollback,
}
