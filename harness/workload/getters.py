"""Polling with ``basic.get``: the getter client, and one recorded get (and its ack)
that the final drain uses too."""

from __future__ import annotations

import asyncio

from aio_pika.abc import AbstractConnection, AbstractQueue

from harness.workload.answers import CLIENT_ERRORS, answer_of, describe
from harness.workload.client import Client, ClientContext, ConnectionLost
from harness.workload.waits import sleep_until


class Getter(Client):
    """Polls with ``basic.get`` at the workload's get rate: manual ack, or with
    ``no_ack`` (settled as the broker sends it)."""

    def __init__(self, client_id: str, queue: str, node: str, ctx: ClientContext, *,
                 no_ack: bool = False) -> None:
        super().__init__(client_id, queue, node, ctx)
        self.no_ack = no_ack

    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        channel = await self.channel(connection)
        queue = await self.declare(channel)
        interval = 1.0 / self.spec.get_rate
        while self.running():
            if broken.is_set():
                raise ConnectionLost("connection closed")
            await get_one(self, queue, no_ack=self.no_ack)
            await sleep_until(interval, self.stop, broken)


async def get_one(client: Client, queue: AbstractQueue, *, no_ack: bool = False) -> str | None:
    """One recorded ``basic.get`` and, unless ``no_ack``, its ack; the message id, or
    None when empty."""
    mode = "no-ack" if no_ack else "ack"
    client.record("get", "invoke", queue=client.queue, mode=mode)
    try:
        message = await answer_of(queue.get(no_ack=no_ack, fail=False,
                                            timeout=client.spec.confirm_timeout))
    except CLIENT_ERRORS as exc:
        client.record("get", "info", queue=client.queue, mode=mode, error=describe(exc))
        raise
    if message is None:
        client.record("get", "ok", queue=client.queue, mode=mode)
        return None
    msg, corrupt = client.received(message)
    client.record("get", "ok", msg=msg, queue=client.queue, mode=mode,
                  redelivered=bool(message.redelivered), **corrupt)
    if no_ack:
        return msg
    try:
        await answer_of(message.ack())
    except CLIENT_ERRORS as exc:
        client.record("ack", "fail", msg=msg, queue=client.queue, error=describe(exc))
        raise
    client.record("ack", "ok", msg=msg, queue=client.queue)
    return msg
