"""The drain by promotion: every mirrored queue synchronised, the master killed, every
queue drained from the promoted mirror with each connection kept open a while after its
last ack, and the killed node started again."""

from __future__ import annotations

import asyncio
import time

from faults.nemesis import ManagementView, Op
from faults.nemesis.view import wait_seen
from harness.run.cluster_state import record_cluster_state
from harness.run.faults import RecordedNemesis
from harness.run.locate import QueueLocator
from harness.scenarios import Scenario
from harness.workload import Recorder, drain
from harness.workload.client import Address

# Bounds of the drain by promotion's waits: a surviving node naming a new master, and
# the killed node seen running again by the others.
PROMOTION_SECONDS = 30.0
REJOIN_SECONDS = 30.0
# The drain by promotion keeps each connection open this long after its last ack: a
# message delivered again after an ack whose connection stayed up is resurrected, while
# an ack on a connection that closed at once may have been lost with it.
ACK_GRACE_SECONDS = 2.5


async def promotion_drain(scenario: Scenario, where: QueueLocator, recorder: Recorder,
                          nemesis: RecordedNemesis, address: Address,
                          problems: list[str]) -> None:
    """Sync every mirrored queue (recorded as ``sync`` faults that end when the
    sync is seen complete), record what each node reports, SIGKILL the master, drain
    every queue from the promoted mirror, and start the killed node again. A mirror
    whose contents diverged from its master's shows up in this drain. Every wait is
    bounded; what fails goes in ``problems`` and the run goes on to the final drain."""
    mirrored = [q for q, members in where.members.items() if len(members) > 1]
    if not mirrored:
        problems.append("promotion_drain: no workload queue is mirrored")
        return
    for queue in mirrored:
        master = await asyncio.to_thread(where.master, queue)
        await asyncio.to_thread(nemesis.invoke,
                                Op("sync-queue", {"queue": queue, "node": master}))
    await asyncio.to_thread(
        lambda: record_cluster_state(recorder, "before-drain", where.endpoints()))
    victim = await asyncio.to_thread(where.master, mirrored[0])
    orphaned = [q for q in mirrored if await asyncio.to_thread(where.master, q) == victim]
    killed = await asyncio.to_thread(nemesis.invoke, Op("kill", {"nodes": [victim]}))
    if killed.type == "fail":
        problems.append(f"promotion_drain: the kill of {victim} failed: {killed.error}")
        return
    for queue in orphaned:
        if not await asyncio.to_thread(await_new_master, where, queue, victim):
            problems.append(f"promotion_drain: no surviving node named a new "
                            f"master of {queue} within {PROMOTION_SECONDS:g}s")
    candidates = {q: await asyncio.to_thread(where.drain_nodes, q)
                  for q in scenario.workload.queues}
    await drain(scenario.workload, recorder, candidates, address,
                scenario.phases.drain_timeout, linger=ACK_GRACE_SECONDS)
    started = await asyncio.to_thread(nemesis.invoke, Op("start", {"nodes": [victim]}))
    if started.type != "ok":
        problems.append(f"promotion_drain: {victim} did not start again: {started.error}")
        return
    missing = await asyncio.to_thread(wait_seen, ManagementView(where.management), victim,
                                      where.running(), REJOIN_SECONDS)
    if missing:
        problems.append(f"promotion_drain: {victim} started again but {missing} "
                        f"did not see it running within {REJOIN_SECONDS:g}s")


def await_new_master(where: QueueLocator, queue: str, old: str) -> bool:
    """Wait until a running node names a master of ``queue`` other than ``old``."""
    deadline = time.monotonic() + PROMOTION_SECONDS
    while time.monotonic() < deadline:
        if where.reported_master(queue) not in (None, old):
            return True
        time.sleep(0.1)
    return False
