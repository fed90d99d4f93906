"""What a channel asks of a queue whose master is on another node (`Call`) and the
master's answers (`Answer`): ``basic.get``, purge, delete, declare's counts, and
whether a consumer may join (exclusive consumers).

The asking node keeps each call until it is answered or the master's node goes down
(`Calls`); the master answers from its copy of the queue (`answer`); the asking node
reads the answer into what the queue answers its channel (`read`), a `ChannelError`
when the master refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from cluster.amqp.errors import (
    ACCESS_REFUSED,
    INTERNAL_ERROR,
    NOT_FOUND,
    PRECONDITION_FAILED,
    ChannelError,
)
from cluster.core.queue import Counts, GetAnswer, Reply, exclusive_use_error, in_exclusive_use
from cluster.ha.messages import (
    Answer,
    Ask,
    AskConsume,
    AskDelete,
    AskGet,
    AskPurge,
    Call,
    CallResult,
    Count,
    Refused,
)
from cluster.ha.outbox import Outbox

if TYPE_CHECKING:
    from cluster.core.broker import BrokerModel
    from cluster.ha.queue import ClusterQueue

R = TypeVar("R")
Answered = Callable[[CallResult], None]


class Calls:
    """This node's calls to masters elsewhere, by id, until answered."""

    def __init__(self, node: str, outbox: Outbox, is_up: Callable[[str], bool]) -> None:
        self.node = node
        self.outbox = outbox
        self.is_up = is_up
        self._calls: dict[int, tuple[str, Answered]] = {}
        self._next = 1

    def call(self, queue: ClusterQueue, ask: Ask, answered: Answered) -> None:
        """Ask the queue's master; ``answered`` gets its answer, `Refused` ``down`` when
        the master's node is down or goes down first."""
        node = queue.master_node
        if node == self.node or not self.is_up(node):
            answered(Refused("down"))
            return
        call_id = self._next
        self._next += 1
        self._calls[call_id] = (node, answered)
        self.outbox.send(node, Call(queue.ref, call_id, ask))

    def answered(self, peer: str, answer: Answer) -> None:
        call = self._calls.pop(answer.call_id, None)
        if call is not None:
            call[1](answer.result)

    def lost(self, node: str) -> None:
        for call_id, (master, answered) in list(self._calls.items()):
            if master == node:
                del self._calls[call_id]
                answered(Refused("down"))


def answer(broker: BrokerModel, queue: ClusterQueue | None, ask: Ask) -> CallResult:
    """The master's answer to ``ask``; ``queue`` is the queue it names, if this node
    holds it."""
    if queue is None or not queue.is_master:
        return Refused("not_found")
    copy = queue.copy
    assert copy is not None
    if isinstance(ask, AskGet):
        taken = copy.take_next(ask.no_ack, ask.owner)
        entry, redelivered = taken if taken is not None else (None, False)
        return GetAnswer(entry, redelivered, copy.ready_count)
    if isinstance(ask, AskPurge):
        return Count(copy.purge())
    if isinstance(ask, AskDelete):
        return _delete(broker, queue, ask)
    if isinstance(ask, AskConsume) and in_exclusive_use(copy.consumers, ask.exclusive):
        return Refused("exclusive", exclusive_use_error(queue.vhost, queue.name).text)
    return Counts(copy.ready_count, len(copy.consumers))


def _delete(broker: BrokerModel, queue: ClusterQueue, ask: AskDelete) -> CallResult:
    """Unused and empty count every node's consumers and the master's messages."""
    host = broker.vhosts[queue.vhost]
    copy = queue.copy
    assert copy is not None
    if ask.if_unused and copy.consumers:
        return Refused("precondition", f"{host.describe('queue', queue.name)} in use")
    if ask.if_empty and copy.ready_count:
        return Refused("precondition", f"{host.describe('queue', queue.name)} not empty")
    count = copy.ready_count
    broker.delete_queue(host, queue.name)
    return Count(count)


def read(queue: ClusterQueue, result: CallResult, kind: type[R]) -> R | ChannelError:
    """The master's answer as what the channel asked for, or why there is none."""
    if isinstance(result, kind):
        return result
    if isinstance(result, Refused):
        if result.reason == "precondition":
            return ChannelError(PRECONDITION_FAILED, result.text)
        if result.reason == "exclusive":
            return ChannelError(ACCESS_REFUSED, result.text)
        return ChannelError(
            NOT_FOUND,
            f"home node '{queue.master_node}' of queue '{queue.name}' in vhost "
            f"'{queue.vhost}' is down or inaccessible",
        )
    return ChannelError(INTERNAL_ERROR, f"the master of queue '{queue.name}' answered "
                                        f"{type(result).__name__}, not {kind.__name__}")


def counted(reply: Reply[int]) -> Reply[Count]:
    """``reply`` for a call answered with a `Count`: the number alone."""
    return lambda answer: reply(answer if isinstance(answer, ChannelError) else answer.messages)
