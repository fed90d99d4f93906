"""The started cluster made ready for the workload: the run's policy (and its decoys) on
every node, each queue declared on its home node and bound to the workload's exchange,
and on RabbitMQ the order a queue's mirrors joined in, recorded before any fault."""

from __future__ import annotations

import time
from urllib.parse import quote

import aio_pika

from faults.management import Management
from harness.run.outcome import HarnessError
from harness.runtime import Cluster
from harness.scenarios import POLICY_NAME, Scenario, decoy_policies, queue_pattern
from harness.workload import Recorder, WorkloadSpec, content
from harness.workload.client import amqp_url
from harness.workload.spec import FANOUT_EXCHANGE

JOIN_ORDER_SECONDS = 30.0  # for a new queue's mirrors to be listed (rabbitmq target)


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
            if workload.fanout_publishers:
                fanout = await channel.declare_exchange(
                    FANOUT_EXCHANGE, aio_pika.ExchangeType.FANOUT, durable=True)
                await declared.bind(fanout, routing_key="")


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
