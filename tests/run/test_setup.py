"""The run's set-up against a real two-node cluster: each queue declared and bound to the
workload's exchange on its home node, the probes' key bound and unbound again, and
every node listing the bindings before the publishers start."""

from __future__ import annotations

from pathlib import Path

import aio_pika
import pytest
from aiormq.abc import DeliveredMessage

from harness.run.setup import declare_queues
from harness.runtime import ClusterSpec, ProcessRuntime
from harness.workload import WorkloadSpec, content
from harness.workload.answers import answer_of
from harness.workload.client import amqp_url
from harness.workload.spec import UNROUTABLE_KEY

WORKLOAD = WorkloadSpec(queues=("q1",), exchange="mirrorchaos.topic", exchange_type="topic",
                        unroutable_every=10)


async def returned(host: str, port: int, routing_key: str) -> bool:
    """Whether a mandatory publish through the workload's exchange came back."""
    async with await aio_pika.connect(amqp_url(host, port, 10), timeout=10) as connection:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(str(WORKLOAD.exchange), ensure=False)
        answer = await answer_of(exchange.publish(
            aio_pika.Message(b"probe", message_id="probe"), routing_key=routing_key,
            mandatory=True, timeout=10))
        return isinstance(answer, DeliveredMessage)


@pytest.mark.parametrize(("breaks", "probe_returned"), [
    ((), True), (("unbind-not-replicated",), False)])
async def test_the_probes_key_is_unbound_on_every_node_and_the_queues_key_bound(
        tmp_path: Path, breaks: tuple[str, ...], probe_returned: bool) -> None:
    """q1 is set up on n1; through n2, a publish by q1's key reaches it and a probe comes
    back, unless n2 never applies the unbind of another node."""
    node_args = tuple(arg for name in breaks for arg in ("--break", name))
    spec = ClusterSpec.of(2, tick=0.2, base_dir=tmp_path, node_args=node_args)
    with ProcessRuntime().start(spec) as cluster:
        await declare_queues(WORKLOAD, cluster, {"q1": "n1"})
        host, port = cluster.amqp_address("n2")
        assert await returned(host, port, UNROUTABLE_KEY) is probe_returned
        assert await returned(host, port, content.routing_key("p1-1", "q1", WORKLOAD)) is False
