"""The started cluster made ready for the workload: the run's policy (and its decoys) on
every node, each queue declared on its home node and bound to the workload's exchange,
and on RabbitMQ the order a queue's mirrors joined in, recorded before any fault."""

from __future__ import annotations

import asyncio
import time
from urllib.parse import quote

import aio_pika

from faults.management import Management, ManagementError
from harness.run.outcome import HarnessError
from harness.runtime import Cluster
from harness.scenarios import POLICY_NAME, Scenario, decoy_policies, queue_pattern
from harness.workload import Recorder, WorkloadSpec, content
from harness.workload.client import amqp_url
from harness.workload.spec import (
    EVERY_QUEUE_EXCHANGE,
    EVERY_QUEUE_KEY,
    FANOUT_EXCHANGE,
    UNROUTABLE_KEY,
)

JOIN_ORDER_SECONDS = 30.0  # for a new queue's mirrors to be listed (rabbitmq target)
BINDINGS_SECONDS = 5.0  # for every node to list the workload exchange's bindings


def set_policy(scenario: Scenario, cluster: Cluster) -> None:
    if not scenario.policy:
        return
    body = {"pattern": queue_pattern(scenario),
            "definition": dict(scenario.policy), "priority": 0, "apply-to": "queues"}
    policies = {POLICY_NAME: body, **decoy_policies(scenario)}
    # On every node: until the cluster replicates metadata, each holds its own.
    for node in scenario.node_names:
        management = cluster.management(node)
        for name, policy in policies.items():
            management.put_policy("/", name, policy)


async def declare_queues(workload: WorkloadSpec, cluster: Cluster,
                         homes: dict[str, str]) -> None:
    """Each queue on its home node (``homes``: queue -> node)."""
    for queue, node in homes.items():
        host, port = cluster.amqp_address(node)
        connection = await aio_pika.connect(amqp_url(host, port, workload.heartbeat),
                                            timeout=10)
        async with connection:
            channel = await connection.channel()
            declared = await channel.declare_queue(queue, durable=workload.durable)
            if workload.exchange is not None:
                exchange = await channel.declare_exchange(
                    workload.exchange, aio_pika.ExchangeType(workload.exchange_type),
                    durable=True)
                await declared.bind(exchange,
                                    routing_key=content.binding_key(queue, workload))
                if workload.unroutable_every:
                    # The probes' key, bound and unbound again: every node must forget
                    # a binding removed, not only learn one made.
                    await declared.bind(exchange, routing_key=UNROUTABLE_KEY)
                    await declared.unbind(exchange, routing_key=UNROUTABLE_KEY)
            if workload.fanout_publishers:
                fanout = await channel.declare_exchange(
                    FANOUT_EXCHANGE, aio_pika.ExchangeType.FANOUT, durable=True)
                await declared.bind(fanout, routing_key="")
                every_queue = await channel.declare_exchange(
                    EVERY_QUEUE_EXCHANGE, aio_pika.ExchangeType.DIRECT, durable=True)
                await declared.bind(every_queue, routing_key=EVERY_QUEUE_KEY)
    if workload.exchange is not None:
        await asyncio.to_thread(await_bindings, workload, cluster, homes)


def await_bindings(workload: WorkloadSpec, cluster: Cluster, homes: dict[str, str]) -> None:
    """Until every node lists the workload exchange's bindings as set up (each queue's
    own, the probes' gone), for at most `BINDINGS_SECONDS`: the publishers start on
    every node right after. A node that does not by then is left to the checker, which
    judges what it routes."""
    expected = {(queue, content.binding_key(queue, workload)) for queue in homes}
    path = f"/api/bindings/{quote('/', safe='')}"
    deadline = time.monotonic() + BINDINGS_SECONDS
    waiting = list(cluster.nodes)
    while waiting and time.monotonic() < deadline:
        waiting = [node for node in waiting if _bindings(cluster, node, path,
                                                           workload.exchange) != expected]
        if waiting:
            time.sleep(0.1)


def _bindings(cluster: Cluster, node: str, path: str,
              exchange: str | None) -> set[tuple[str, str]] | None:
    """``node``'s bindings of ``exchange`` as (queue, key); None if it did not answer."""
    try:
        rows = cluster.management(node).call("GET", path)
    except ManagementError:
        return None
    return {(row["destination"], row["routing_key"]) for row in rows
            if row.get("source") == exchange}


def record_join_order(recorder: Recorder, queue_members: dict[str, list[str]],
                      management: dict[str, Management]) -> None:
    """RabbitMQ starts a new queue's mirrors all at once and they join in the order
    they get there, not in the node order the header assumes: once the master lists
    every mirror (``slave_nodes``, eldest first), that order goes in the history as
    a ``members`` line, before any fault."""
    for queue, members in queue_members.items():
        master = members[0]
        deadline = time.monotonic() + JOIN_ORDER_SECONDS
        while True:
            info = management[master].call(
                "GET", f"/api/queues/%2F/{quote(queue, safe='')}")
            mirrors = [str(n) for n in info.get("slave_nodes") or []]
            if info.get("node") == master and sorted(mirrors) == sorted(members[1:]):
                break
            if time.monotonic() >= deadline:
                raise HarnessError(
                    f"{queue}: {master} did not list it on {', '.join(members)} within "
                    f"{JOIN_ORDER_SECONDS:g}s (master {info.get('node')}, mirrors {mirrors})")
            time.sleep(0.2)
        recorder.record("harness", "members", "ok", queue=queue, members=[master, *mirrors])
