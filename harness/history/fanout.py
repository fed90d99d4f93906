"""Fanout publishes as one message per queue (docs/history-format.md, "Fanout").

A fanout publisher's message goes to every queue its exchange binds, and each queue's
copy must be delivered, acknowledged and ordered on its own. The history holds one
publish and one confirm per message, and the deliveries of every copy under the same
id (what the body says). Readers hand the checkers each copy as a message of its own,
``<producer>.<queue>-<seq>``: a publish or confirm once per queue the header's
``config.fanout`` names, a delivery, get or settlement as the copy of the queue it came
from. So a copy one queue never got is `lost` there, and one that came from a queue the
exchange does not bind is `unexpected`, with no checker knowing about exchanges.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from harness.history.model import Event

# What a publisher writes of each of its messages: the publish and its outcome.
_PUBLISHER_OPS = frozenset({"publish", "confirm"})


def copies(events: Iterable[Event], routes: Mapping[str, tuple[str, ...]]) -> Iterator[Event]:
    """``events`` with each fanout producer's (``routes``: producer -> the queues its
    exchange binds) as the events of its copies; ``events`` as they are without any."""
    return _copies(events, routes) if routes else iter(events)


def _copies(events: Iterable[Event], routes: Mapping[str, tuple[str, ...]]) -> Iterator[Event]:
    for ev in events:
        queues = routes.get(ev.producer) if ev.producer is not None else None
        if queues is None:
            yield ev
        elif ev.op in _PUBLISHER_OPS:
            for queue in queues:
                yield ev.copy_to(queue)
        elif ev.queue is not None:
            yield ev.copy_to(ev.queue)
        else:
            yield ev
