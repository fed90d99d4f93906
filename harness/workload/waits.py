"""Waiting on the run's and a session's events: a client's pauses end early when it is
told to stop or its connection breaks."""

from __future__ import annotations

import asyncio


async def sleep_until(seconds: float, *wake: asyncio.Event) -> None:
    """Sleep, but return early once any of ``wake`` is set: a session's pauses wake on
    its connection breaking too, so a client follows a failover at once, not at its
    next tick."""
    if seconds > 0 and not any(event.is_set() for event in wake):
        await first_set(*wake, timeout=seconds)


async def first_set(*events: asyncio.Event, timeout: float | None = None) -> asyncio.Event | None:
    """The first of ``events`` to be set; None when ``timeout`` passes first."""
    tasks = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        done, _ = await asyncio.wait(tasks, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
    return next((event for event, task in zip(events, tasks, strict=True) if task in done),
                None)
