"""A broker round trip's answer as the workload sees it: which exceptions are the
broker's or the network's doing (recorded as the operation's ``fail`` or ``info``)
rather than bugs of ours, a cancellation by the client library counted among them, and
the error text a history line carries."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from aio_pika.exceptions import AMQPError, ChannelInvalidStateError

# What a real client raises when the broker or the network misbehaves; anything else
# is a bug of ours and ends the run.
CLIENT_ERRORS: tuple[type[BaseException], ...] = (
    AMQPError, ChannelInvalidStateError, ConnectionError, OSError, TimeoutError)

T = TypeVar("T")


class CancelledByLibrary(ConnectionError):
    """aiormq cancelled an operation of ours that waited on the broker: the reader of
    its connection stopped (the connection closed). Its outcome is unknown, like any
    other lost connection's; it is not our task being cancelled."""


async def answer_of(awaitable: Awaitable[T]) -> T:
    """The broker's answer to one client operation. A cancellation that is not aimed at
    the awaiting task comes from the client library (`CancelledByLibrary`)."""
    try:
        return await awaitable
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        raise CancelledByLibrary("cancelled by the client library: its connection "
                                 "closed") from None


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
