"""Mirrored queues on three real node processes with pika clients: the cases of
`tests.ha_cases`, each with its fault, must keep the design's promises."""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pika
import pika.exceptions
import pytest

from cluster import mqctl
from cluster.mqctl.errors import EX_DATAERR, EX_USAGE
from cluster.peer.boot import LastRunningFile
from faults.management import Management
from faults.nemesis import Op, QueueAdminNemesis
from faults.process.local import LocalProcesses
from faults.process.node import NodeProcess, NodeStartError, linked_nodes, start_all
from tests.ha_cases import (
    NodeAccess,
    confirms_survive,
    consumer_survives,
    declare_mirrored,
    exactly_replaces_lost_mirror,
    full_cluster_restart,
    message_count,
    policy_moves_queue,
    promotion_of_unsynchronised,
    publish,
    queue_info,
    rejoined_until_drained,
    repeated_double_kills,
    sync_cancelled,
    sync_then_fail,
    synchronised_mirrors,
    unsynchronised_mirrors,
    wait_for,
)

NAMES = ["n1", "n2", "n3"]


@contextlib.contextmanager
def running_cluster(tmp_path: Path, names: list[str],
                    ) -> Iterator[tuple[dict[str, NodeAccess], LocalProcesses]]:
    """Node processes linked to one another directly, with a fast failure detector."""
    nodes = linked_nodes(tmp_path, names, tick=0.25)
    try:
        start_all(list(nodes.values()))
        yield {n: NodeAccess(p.amqp_url, p.mgmt_url) for n, p in nodes.items()}, \
            LocalProcesses(nodes)
    finally:
        for node in nodes.values():
            node.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[dict[str, NodeAccess], LocalProcesses]]:
    with running_cluster(tmp_path, NAMES) as running:
        yield running


def test_a_queue_declared_on_one_node_is_mirrored_and_usable_from_every_node(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, _ = cluster
    declare_mirrored(nodes, "n1", "ha.shared")
    for name in NAMES:
        info = queue_info(nodes[name], "ha.shared")
        assert (info["node"], sorted(info["slave_nodes"])) == ("n1", ["n2", "n3"])  # type: ignore[arg-type]
    publisher = pika.BlockingConnection(pika.URLParameters(nodes["n2"].amqp_url))
    channel = publisher.channel()
    channel.confirm_delivery()
    for i in range(20):
        channel.basic_publish("", "ha.shared", f"m{i}".encode())
    publisher.close()
    getter = pika.BlockingConnection(pika.URLParameters(nodes["n3"].amqp_url))
    channel = getter.channel()
    assert channel.queue_declare("ha.shared", passive=True).method.message_count == 20
    method, _, body = channel.basic_get("ha.shared")
    assert body == b"m0" and method is not None and not method.redelivered
    channel.basic_nack(method.delivery_tag, requeue=True)
    method, _, body = channel.basic_get("ha.shared")
    assert body == b"m0" and method is not None and method.redelivered
    channel.basic_ack(method.delivery_tag)
    assert channel.queue_purge("ha.shared").method.message_count == 19
    getter.close()
    wait_for(lambda: all(queue_info(nodes[n], "ha.shared")["messages"] == 0 for n in NAMES),
             "every replica to be empty")


@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_publisher_confirms_survive_the_master_failing(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses], fault: str,
) -> None:
    nodes, control = cluster
    outcome = confirms_survive(nodes, control, master="n1", publisher="n2", consumer="n3",
                               fault=fault)
    assert outcome.problems() == []
    assert len(outcome.confirmed) == 600
    info = queue_info(nodes["n2"], "ha.confirms")
    assert info["node"] == "n2" and info["slave_nodes"] == ["n3"]


@pytest.mark.parametrize(("fault", "cancel"), [("kill", False), ("kill", True),
                                               ("stop", False), ("stop", True)])
def test_a_consumer_survives_the_master_failing(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses], fault: str, cancel: bool,
) -> None:
    nodes, control = cluster
    outcome = consumer_survives(nodes, control, master="n1", consumer="n3", fault=fault,
                                cancel_on_failover=cancel)
    assert outcome.problems() == []
    assert outcome.deliveries.cancelled == (1 if cancel else 0)


def test_an_unmirrored_queue_is_unavailable_while_its_node_is_down_and_back_with_it(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, control = cluster
    connection = pika.BlockingConnection(pika.URLParameters(nodes["n1"].amqp_url))
    channel = connection.channel()
    channel.confirm_delivery()
    channel.queue_declare("plain", durable=True)
    for _ in range(10):
        channel.basic_publish("", "plain", b"x", pika.BasicProperties(delivery_mode=2))
    control.kill("n1")
    other = pika.BlockingConnection(pika.URLParameters(nodes["n2"].amqp_url))
    with pytest.raises(pika.exceptions.ChannelClosedByBroker) as refused:
        other.channel().queue_declare("plain", durable=True, passive=True)
    assert refused.value.reply_code == 404 and "home node 'n1'" in refused.value.reply_text
    control.start("n1")
    wait_for(lambda: queue_info(nodes["n1"], "plain").get("messages") == 10,
             "n1 to hold the queue again with its 10 messages")
    assert other.channel().queue_declare("plain", durable=True).method.message_count == 10
    other.close()


@pytest.mark.parametrize(("fault", "setting"), [
    ("kill", "always"), ("kill", "when-synced"), ("stop", "always"), ("stop", "when-synced")])
def test_promoting_an_unsynchronised_mirror_follows_the_policy(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses], fault: str, setting: str,
) -> None:
    nodes, control = cluster
    outcome = promotion_of_unsynchronised(nodes, control, master="n1", fault=fault,
                                          setting=setting)
    assert outcome.problems() == []


@pytest.mark.parametrize(("automatic", "turned"), [(False, False), (True, False), (True, True)])
def test_a_synchronised_mirror_takes_over_with_every_message(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses], automatic: bool, turned: bool,
) -> None:
    nodes, control = cluster
    outcome = sync_then_fail(nodes, control, master="n1", automatic=automatic,
                             turned_automatic=turned)
    assert outcome.problems() == []


def test_a_cancelled_sync_leaves_the_mirrors_unsynchronised(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, control = cluster
    assert sync_cancelled(nodes, control, master="n1").problems() == []


def test_a_rejoined_mirror_is_unsynchronised_until_the_old_messages_drain(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, control = cluster
    assert rejoined_until_drained(nodes, control, master="n1").problems() == []


def test_a_policy_change_moves_the_queue_without_losing_messages(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, _ = cluster
    outcome = policy_moves_queue(nodes, master="n1", to=["n2", "n3"])
    assert outcome.problems() == []


def test_exactly_mode_replaces_a_lost_mirror_on_a_spare_node(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, control = cluster
    assert exactly_replaces_lost_mirror(nodes, control, master="n1").problems() == []


def test_two_kills_at_a_time_on_five_nodes_lose_no_confirmed_message(tmp_path: Path) -> None:
    with running_cluster(tmp_path, [f"n{i}" for i in range(1, 6)]) as (nodes, control):
        outcome = repeated_double_kills(nodes, control, publisher="n5")
    assert outcome.problems() == []


def test_the_sync_nemesis_synchronises_rejoined_mirrors(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, control = cluster
    unsynchronised_mirrors(nodes, control, master="n1", queue="ha.nsync", messages=40,
                           definition={})
    assert synchronised_mirrors(nodes["n1"], "ha.nsync") == []
    nemesis = QueueAdminNemesis({n: Management(a.mgmt_url) for n, a in nodes.items()},
                                random.Random(1))
    done = nemesis.invoke(Op("sync-queue", {"queue": "ha.nsync", "node": "n2"}))
    assert done.type == "ok", done.error
    wait_for(lambda: synchronised_mirrors(nodes["n1"], "ha.nsync") == ["n2", "n3"],
             "the mirrors to be synchronised")


def test_the_forget_nemesis_promotes_past_a_stopped_master_whatever_the_policy(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, control = cluster
    unsynchronised_mirrors(nodes, control, master="n1", queue="ha.forget", messages=5,
                           definition={"ha-promote-on-shutdown": "when-synced"})
    control.stop("n1", timeout=10.0)
    assert message_count(nodes["n2"], "ha.forget") is None  # when-synced: unavailable
    nemesis = QueueAdminNemesis({n: Management(a.mgmt_url) for n, a in nodes.items()},
                                random.Random(1))
    refused = nemesis.invoke(Op("forget-node", {"target": "n2", "node": "n3"}))
    assert refused.type == "fail" and "is running" in (refused.error or "")
    done = nemesis.invoke(Op("forget-node", {"target": "n1", "node": "n3"}))
    assert done.type == "ok", done.error
    wait_for(lambda: message_count(nodes["n2"], "ha.forget") == 0, "a promoted mirror")
    assert queue_info(nodes["n3"], "ha.forget")["node"] == "n2"


def test_a_no_ack_consumer_on_another_node_gets_every_message(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    """Credit for a consumer that never acks is topped up as deliveries arrive (it
    stopped at the first window once)."""
    nodes, _ = cluster
    declare_mirrored(nodes, "n1", "ha.noack")
    publish(nodes["n1"], "ha.noack", [b"m%d" % i for i in range(700)])
    connection = pika.BlockingConnection(pika.URLParameters(nodes["n3"].amqp_url))
    got: list[bytes] = []
    connection.channel().basic_consume("ha.noack", lambda ch, m, p, body: got.append(body),
                                       auto_ack=True)
    wait_for(lambda: connection.process_data_events(0.05) or len(got) >= 700,
             "700 no-ack deliveries")
    connection.close()
    assert got == [b"m%d" % i for i in range(700)]


def test_the_last_node_stopped_starts_first_as_master_with_every_message(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, control = cluster
    assert full_cluster_restart(nodes, control).problems() == []


def test_a_node_that_stopped_before_its_peers_refuses_to_start_alone_unless_forced(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, control = cluster
    declare_mirrored(nodes, "n1", "ha.order")
    publish(nodes["n1"], "ha.order", [b"old"])
    control.stop("n1", timeout=10.0)
    publish(nodes["n2"], "ha.order", [b"new"])
    for name in ("n2", "n3"):
        control.stop(name, timeout=10.0)
    first = control.node("n1")
    first.extra_args = ["--peer-wait", "1"]
    with pytest.raises(NodeStartError) as refused:
        first.start()
    assert first.process is not None and first.process.returncode == 3
    assert "stopped while n2, n3 still ran" in str(refused.value)
    first.extra_args = ["--force-boot"]
    first.start()
    # The documented cost of forcing it: the copy it serves lacks what was published
    # after it stopped.
    assert message_count(nodes["n1"], "ha.order") == 1


def test_forgetting_the_last_node_offline_lets_another_start_first(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """rabbitmqctl's way out when the node that stopped last cannot come back."""
    nodes, control = cluster
    declare_mirrored(nodes, "n1", "ha.offline")
    publish(nodes["n1"], "ha.offline", [b"m%d" % i for i in range(10)])
    for name in NAMES:
        control.stop(name, timeout=10.0)
    data_dir = control.node("n2").data_dir
    assert mqctl.main(["forget_cluster_node", "--offline", "n3"]) == EX_USAGE
    assert mqctl.main(["forget_cluster_node", "--offline", "--data-dir", str(data_dir),
                       "n1"]) == EX_DATAERR
    assert "n1 is not among the nodes" in capsys.readouterr().err
    assert mqctl.main(["forget_cluster_node", "--offline", "--data-dir", str(data_dir),
                       "n3"]) == 0
    control.node("n2").extra_args = ["--peer-wait", "1"]
    control.start("n2")  # would refuse, waiting for n3
    assert message_count(nodes["n2"], "ha.offline") == 10


def test_a_cluster_that_crashed_at_once_starts_again_together(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    nodes, control = cluster
    declare_mirrored(nodes, "n1", "ha.crash")
    publish(nodes["n1"], "ha.crash", [b"m%d" % i for i in range(30)])
    for name in NAMES:
        control.kill(name)
    start_all([control.node(name) for name in NAMES])
    wait_for(lambda: message_count(nodes["n3"], "ha.crash") == 30, "every message back")


def _events(node: NodeProcess) -> list[dict[str, object]]:
    path = node.data_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_node_its_peers_saw_die_waits_for_them_when_all_start_again(
    cluster: tuple[dict[str, NodeAccess], LocalProcesses],
) -> None:
    """The gauntlet-autoheal power loss: n2 died first, n1 and n3 dropped it and
    confirmed more without it, then they died too. n2's file names both as having
    outlived it, so it may start along with them once they are here, but as they saw
    it die, it must not start first: its record would win (nobody runs to say
    otherwise) and n1 and n3 would join it as empty mirrors, losing what they
    confirmed after it died. Given a head start, it waits for one of them to run
    (when both are here before either runs, its node logs ``boot_waiting``)."""
    nodes, control = cluster
    queue = "ha.died-first"
    declare_mirrored(nodes, "n1", queue)
    publish(nodes["n1"], queue, [b"old%d" % i for i in range(10)])
    control.kill("n2")
    for name in ("n1", "n3"):
        wait_for(lambda name=name: any(  # type: ignore[misc]
            e["event"] == "peer_down" and e.get("peer") == "n2"
            for e in _events(control.node(name))), f"{name} to see n2 die")
    publish(nodes["n1"], queue, [b"new%d" % i for i in range(10)])
    control.kill("n1")
    control.kill("n3")
    # As in the power loss, n1 and n3 died too close together to see each other go
    # (n3 may have seen n1 die here: then its file is empty and it starts at once,
    # which the rule handles too, but the point is the case where nobody stopped last).
    for name, outlived_by in (("n1", {"n3"}), ("n3", {"n1"})):
        LastRunningFile(control.node(name).data_dir / "cluster.json").save(
            frozenset(outlived_by))
    assert LastRunningFile(control.node("n2").data_dir / "cluster.json").load() == {
        "n1", "n3"}
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(control.node("n2").start, 30.0)
        time.sleep(1.0)  # n2 has said hello and waits for its peers before they start
        rest = [pool.submit(control.node(name).start, 30.0) for name in ("n1", "n3")]
        for future in [first, *rest]:
            future.result()
    # Its app started only once one of theirs ran (then it took their record). Before
    # the fix it started as soon as both were here, often first (and then this run
    # lost the ten "new" messages, as the gauntlet did); the unit tests in
    # test_boot.py pin the rule itself.
    n2_events = [e["event"] for e in _events(control.node("n2"))]
    restarted = n2_events[n2_events.index("node_started") + 1:]
    assert "peer_app_started" in restarted[:restarted.index("app_started")]
    wait_for(lambda: message_count(nodes["n2"], queue) == 20,
             "every confirmed message back after the restart")
