"""The final drain: every queue emptied with recorded ``basic.get``s, from
the nodes that survived, so the checker can tell lost messages from queued ones."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence

from aio_pika.abc import AbstractConnection

from harness.workload.client import Address, Client, ClientContext
from harness.workload.getters import get_one
from harness.workload.recorder import Recorder
from harness.workload.spec import WorkloadSpec

PROCESS = "drain"


class Drainer(Client):
    """Gets from one queue until it is empty and the broker counts no message left,
    trying the candidate nodes in turn until the deadline; then keeps its connection
    open ``linger`` seconds, so no ack of the drain can be blamed on a connection that
    closed right after it."""

    def __init__(self, queue: str, candidates: Sequence[str], ctx: ClientContext,
                 deadline: float, linger: float = 0.0) -> None:
        super().__init__(PROCESS, queue, candidates[0], ctx)
        self.deadline = deadline
        self.linger = linger
        self.drained = False

    def running(self) -> bool:
        return not self.drained and time.monotonic() < self.deadline

    async def session(self, connection: AbstractConnection, broken: asyncio.Event) -> None:
        channel = await self.channel(connection)
        queue = await self.declare(channel)
        while True:
            while await get_one(self, queue) is not None:
                pass
            left = await channel.declare_queue(self.queue, passive=True,
                                              timeout=self.spec.confirm_timeout)
            if left.declaration_result.message_count == 0:
                break
        self.drained = True
        await asyncio.sleep(self.linger)


async def drain(spec: WorkloadSpec, recorder: Recorder, candidates: Mapping[str, Sequence[str]],
                address: Address, timeout: float, linger: float = 0.0) -> bool:
    """Drain each queue from its candidate nodes (best first) within ``timeout`` in
    all, each drainer's connection kept open ``linger`` seconds after its last ack;
    records ``drain invoke`` and per queue ``drain ok`` or ``drain fail``."""
    deadline = time.monotonic() + timeout
    recorder.record("harness", "drain", "invoke")
    ok = True
    for queue, nodes in candidates.items():
        ctx = ClientContext(dataclasses.replace(spec, reconnect="next"), recorder, list(nodes),
                            address, asyncio.Event(), asyncio.Event())
        drainer = Drainer(queue, nodes, ctx, deadline, linger)
        await drainer.run()
        if drainer.drained:
            recorder.record("harness", "drain", "ok", queue=queue)
        else:
            ok = False
            recorder.record("harness", "drain", "fail", queue=queue,
                            error=f"not drained to empty within {timeout:g}s from {list(nodes)}")
    return ok
