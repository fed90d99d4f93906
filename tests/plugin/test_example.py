"""The pytest plugin's fixtures as an engineer uses them: a mirrored queue on three
local nodes, a confirming publisher, the master SIGKILLed by the nemesis, the drain,
and the checker's verdict on the recorded history (the README's example)."""

from __future__ import annotations

from typing import Any

import pika
import pytest

from faults.management import Management
from faults.nemesis import Op

pytestmark = pytest.mark.mq_cluster(nodes=3, tick=0.25)

QUEUE = "orders"
POLICY = {"pattern": f"^{QUEUE}$", "definition": {"ha-mode": "all"}, "apply-to": "queues"}


def connect(address: tuple[str, int]) -> pika.BlockingConnection:
    host, port = address
    return pika.BlockingConnection(pika.ConnectionParameters(host, port, heartbeat=5))


def publish(history: Any, channel: Any, msg: str) -> None:
    history.record("p1", "publish", "invoke", msg=msg, queue=QUEUE, node="n2")
    try:
        channel.basic_publish("", QUEUE, msg.encode(),
                              pika.BasicProperties(delivery_mode=2), mandatory=True)
    except pika.exceptions.NackError:
        history.record("p1", "confirm", "fail", msg=msg, queue=QUEUE, node="n2")
    else:
        history.record("p1", "confirm", "ok", msg=msg, queue=QUEUE, node="n2")


def drain(history: Any, channel: Any) -> None:
    history.record("harness", "drain", "invoke", queue=QUEUE)
    while True:
        method, _, body = channel.basic_get(QUEUE, auto_ack=True)
        if method is None:
            history.record("g1", "get", "ok", msg=None, queue=QUEUE, node="n2")
            break
        history.record("g1", "get", "ok", msg=body.decode(), queue=QUEUE, node="n2",
                       redelivered=method.redelivered)
    history.record("harness", "drain", "ok", queue=QUEUE)


def test_confirmed_messages_survive_a_sigkill_of_the_master(
    mq_cluster: Any, toxiproxy: Any, nemesis: Any, history: Any,
) -> None:
    for node in mq_cluster.nodes:
        Management(mq_cluster.mgmt_url(node)).put_policy("/", "ha-all", POLICY)
    with connect(mq_cluster.amqp_address("n1")) as admin:  # n1 holds the master
        admin.channel().queue_declare(QUEUE, durable=True)

    kill = nemesis("process", queue=QUEUE)
    # the publisher goes through its own toxiproxy link to n2, which survives
    with connect(mq_cluster.client_address("p1", "n2")) as publisher:
        channel = publisher.channel()
        channel.confirm_delivery()
        for i in range(1, 101):
            publish(history, channel, f"p1-{i}")
        killed = kill.invoke(Op("kill", {"nodes": "master"}))
        assert killed.type == "ok" and killed.value["nodes"] == ["n1"]
        for i in range(101, 201):  # confirmed by the promoted mirror
            publish(history, channel, f"p1-{i}")
    kill.invoke(Op("heal"))  # n1 restarts and rejoins

    with connect(mq_cluster.amqp_address("n2")) as consumer:
        drain(history, consumer.channel())

    assert "client:p1->n2" in toxiproxy.proxies()  # as every link of the cluster
    results = history.check()
    assert results["valid"] is True
    assert results["counts"]["confirmed"] == results["counts"]["delivered"] == 200
    assert [f["kind"] for f in results["faults"]] == ["kill"]
