"""A run's clients as one workload: started together, publishers stopped first (their
outstanding confirms settle), then everyone else."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from harness.workload.client import Address, Client, ClientContext
from harness.workload.consumers import Consumer, Leaver, MultipleAcker, Recoverer, Requeuer
from harness.workload.getters import Getter
from harness.workload.publishers import FanoutPublisher, Publisher, TxPublisher
from harness.workload.queue_ops import Churner, Purger
from harness.workload.recorder import Recorder
from harness.workload.rules import RuleProber
from harness.workload.spec import PUBLISHING, WorkloadSpec


class Workload:
    def __init__(self, spec: WorkloadSpec, recorder: Recorder, nodes: Sequence[str],
                 homes: Mapping[str, str], address: Address) -> None:
        """``homes``: each queue's node (its master when the run set it up)."""
        self.spec = spec
        self.ctx = ClientContext(spec, recorder, list(nodes), address, asyncio.Event(),
                                 asyncio.Event())
        self.publishers: list[Client] = []
        self.others: list[Client] = []
        queues = spec.client_queues()
        ordinal = 0
        for kind, ids in spec.client_ids().items():
            for client_id in ids:
                queue = queues[client_id]
                node = (homes[queue] if spec.client_nodes == "master"
                        else nodes[ordinal % len(nodes)])
                ordinal += 1
                client = self._client(kind, client_id, queue, node)
                (self.publishers if kind in PUBLISHING else self.others).append(client)
        self._tasks: list[asyncio.Task[None]] = []

    def _client(self, kind: str, client_id: str, queue: str, node: str) -> Client:
        if kind == "publisher":
            return Publisher(client_id, queue, node, self.ctx)
        if kind == "fanout-publisher":
            return FanoutPublisher(client_id, queue, node, self.ctx)
        if kind == "tx-publisher":
            return TxPublisher(client_id, queue, node, self.ctx)
        if kind in ("getter", "no-ack-getter"):
            return Getter(client_id, queue, node, self.ctx, no_ack=kind == "no-ack-getter")
        if kind == "requeuer":
            return Requeuer(client_id, queue, node, self.ctx)
        if kind == "leaver":
            return Leaver(client_id, queue, node, self.ctx)
        if kind == "recoverer":
            return Recoverer(client_id, queue, node, self.ctx)
        if kind == "churner":
            return Churner(client_id, queue, node, self.ctx)
        if kind == "purger":
            return Purger(client_id, queue, node, self.ctx)
        if kind == "rule-prober":
            return RuleProber(client_id, queue, node, self.ctx)
        if kind == "multiple-acker":
            return MultipleAcker(client_id, queue, node, self.ctx)
        if kind == "cancel-consumer":
            return Consumer(client_id, queue, node, self.ctx, cancel_on_failover=True)
        return Consumer(client_id, queue, node, self.ctx, no_ack=kind == "no-ack-consumer",
                        cancel_on_failover=self.spec.cancel_on_failover)

    @property
    def clients(self) -> list[Client]:
        return self.publishers + self.others

    def start(self) -> None:
        """Start every client (consumers first, so the first messages find them)."""
        self._tasks = [asyncio.create_task(c.run(), name=c.id)
                       for c in self.others + self.publishers]

    async def stop_publishing(self) -> None:
        """Publishers stop and wait for their outstanding confirms (each at most the
        confirm timeout)."""
        self.ctx.stop_publishing.set()
        await asyncio.gather(*self._tasks[len(self.others):])

    async def stop(self) -> None:
        self.ctx.stop_publishing.set()
        self.ctx.stop_all.set()
        await asyncio.gather(*self._tasks)
