"""Planted bugs (``--break NAME``): each changes what a client or the management API can
observe where the correct broker does not, on the simulated cluster wherever it can
show it. Every test named ``test_break_<switch>`` runs the same steps correct and
broken and asserts the difference."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest
from pamqp import commands, frame, header
from pamqp.body import ContentBody

from cluster.breakages import CATALOGUE, VIOLATION_KINDS, Breaks
from cluster.config import load_config
from cluster.core.broker import BrokerConfig
from cluster.core.policy import Policy
from cluster.ha.coordinator import Coordinator
from cluster.ha.queue import ClusterQueue
from cluster.mgmt.shapes import queue_json
from cluster.peer.boot import BootError
from cluster.peer.detector import Answer, PeerDown, PeerUp, Probe
from cluster.session.broker import Broker
from cluster.settings import parse_args
from cluster.store import MessageStore
from tests.amqp.memory_client import MemoryClient, publish_frames
from tests.cluster.simcluster import SimCluster
from tests.cluster.standalone import three_node
from tests.ha.test_ha_simulated import confirmed_tags, drain, mirrored_queue

# -- the catalogue ---------------------------------------------------------------------


PLANTED_BUGS_DOC = Path(__file__).resolve().parents[2] / "docs" / "planted-bugs.md"


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_every_switch_names_known_violations_a_flag_a_doc_row_and_a_test(name: str) -> None:
    breakage = CATALOGUE[name]
    assert breakage.violations and set(breakage.violations) <= VIOLATION_KINDS
    assert breakage.breaks and breakage.exposed_by
    row = f"| `{name}` | {breakage.breaks} | "
    assert row in PLANTED_BUGS_DOC.read_text(encoding="utf-8")
    assert Breaks.of([name]).names == [name]
    shown_by = [f for n, f in globals().items() if n.startswith("test_break_")
                and f'"{name}"' in inspect.getsource(f)]
    assert shown_by, f"no test_break_* runs {name}"


def test_the_flags_are_exactly_the_catalogue() -> None:
    assert sorted(Breaks.of(list(CATALOGUE)).names) == sorted(CATALOGUE)
    assert Breaks().names == []


def test_break_is_repeatable_and_an_unknown_name_is_refused_listing_the_valid_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["--name", "n1", "--amqp-port", "5672", "--data-dir", "/tmp/x"]
    settings = parse_args([*base, "--break", "gm-reorder", "--break", "no-fsync"])
    assert settings.breaks.names == ["gm-reorder", "no-fsync"]
    assert parse_args(base).breaks == Breaks()
    with pytest.raises(SystemExit):
        parse_args([*base, "--break", "no-such-bug"])
    error = capsys.readouterr().err
    assert "no-such-bug" in error
    assert all(name in error for name in CATALOGUE)
    with pytest.raises(ValueError, match="early-confirm"):
        Breaks.of(["no-such-bug"])


def test_planted_bugs_cannot_come_from_a_config_file(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text('[node]\nbreaks = ["no-fsync"]\n')
    with pytest.raises(ValueError, match=r"unknown key node\.breaks"):
        load_config(path, "n1")


# -- helpers ---------------------------------------------------------------------------


def replica(sim: SimCluster, node: str) -> ClusterQueue:
    queue = sim.brokers[node].vhosts["/"].queues["ha.q"]
    assert isinstance(queue, ClusterQueue)
    return queue


def held(sim: SimCluster, node: str) -> int:
    """Messages the node's own replica of ha.q holds, as the management API says."""
    local = queue_json(sim.brokers[node], replica(sim, node))["local"]
    return local["messages"] if local else -1


def master_node(sim: SimCluster, node: str) -> str:
    return replica(sim, node).master_node


def publish(sim: SimCluster, node: str, count: int, *, confirm: bool = False,
            pump: bool = True) -> MemoryClient:
    """``count`` persistent messages to ha.q from a new client on ``node``; with
    ``pump=False`` they have not left the node yet."""
    client = sim.client(node)
    if confirm:
        client.send(1, commands.Confirm.Select())
        client.methods()
    for i in range(count):
        client.publish(1, f"m{i}".encode(), "ha.q", persistent=True)
    if pump:
        sim.pump()
    return client


def consume(client: MemoryClient, tag: str, *, cancel_on_failover: bool = False) -> None:
    arguments = {"x-cancel-on-ha-failover": True} if cancel_on_failover else {}
    client.send(1, commands.Basic.Consume(queue="ha.q", consumer_tag=tag,
                                          arguments=arguments))


def bodies(seen: list[tuple[bytes, bool]]) -> list[bytes]:
    return [body for body, _ in seen]


def numbered(count: int) -> list[bytes]:
    return [f"m{i}".encode() for i in range(count)]


def unsynchronised_mirrors(*breaks: str, policy: dict[str, object] | None = None,
                           ) -> SimCluster:
    """ha.q mastered on n1 with five messages published before its mirrors joined, so
    that they hold none of them and are not synchronised."""
    sim = SimCluster(["n1", "n2", "n3"], 5, breaks)
    sim.client("n1").send(1, commands.Queue.Declare(queue="ha.q", durable=True))
    sim.pump()
    publish(sim, "n1", 5)
    sim.set_policy("n1", "^ha", {"ha-mode": "all", **(policy or {})})
    return sim


# -- confirms and transactions ---------------------------------------------------------


def test_break_early_confirm() -> None:
    """Confirms through the master before the mirrors have the messages: after it dies
    the confirmed messages are gone (the correct master had confirmed none yet)."""
    for breaks, lost in (((), False), (("early-confirm",), True)):
        sim = mirrored_queue(1, *breaks)
        publisher = publish(sim, "n1", 5, confirm=True, pump=False)
        confirmed = {f"m{tag - 1}".encode() for tag in confirmed_tags(publisher)}
        sim.kill("n1")
        sim.pump()
        assert bool(confirmed - set(bodies(drain(sim, "n2")))) is lost


def test_break_transient_early_confirm() -> None:
    """Transient messages wait for the mirrors' memory as persistent ones wait for their
    disks: with none reached, none is confirmed. Broken, they are, and lost with the
    master (persistent ones still wait)."""
    for breaks, lost in (((), False), (("transient-early-confirm",), True)):
        sim = mirrored_queue(2, *breaks)
        publisher = sim.client("n1")
        publisher.send(1, commands.Confirm.Select())
        publisher.methods()
        for i in range(5):
            publisher.publish(1, f"m{i}".encode(), "ha.q", persistent=i == 4)
        confirmed = {f"m{tag - 1}".encode() for tag in confirmed_tags(publisher)}
        assert b"m4" not in confirmed
        sim.kill("n1")
        sim.pump()
        assert bool(confirmed - set(bodies(drain(sim, "n2")))) is lost


def test_break_confirm_one_mirror() -> None:
    """The publishes reach the master and its eldest mirror, not yet the youngest: no
    confirm may go out. Broken, they are confirmed, and lost when the youngest is the
    one replica left."""
    for breaks, confirmed_early in (((), False), (("confirm-one-mirror",), True)):
        sim = mirrored_queue(6, *breaks)
        publisher = publish(sim, "n1", 5, confirm=True, pump=False)
        while busy := [pair for pair in sim.busy() if "n3" not in pair]:
            sim.move(*busy[0])
        confirmed = {f"m{tag - 1}".encode() for tag in confirmed_tags(publisher)}
        assert bool(confirmed) is confirmed_early
        sim.kill("n1")
        sim.kill("n2")
        sim.pump()
        assert not confirmed & set(bodies(drain(sim, "n3")))  # none of them survives


def test_break_early_tx_commit() -> None:
    for breaks, committed_early in (((), False), (("early-tx-commit",), True)):
        sim = mirrored_queue(2, *breaks)
        client = sim.client("n1")
        client.send(1, commands.Tx.Select())
        for i in range(5):
            client.publish(1, f"m{i}".encode(), "ha.q", persistent=True)
        client.send(1, commands.Tx.Commit())
        # Before the mirrors have heard of the transaction:
        committed = any(isinstance(m, commands.Tx.CommitOk) for m in client.methods())
        assert committed is committed_early
        sim.kill("n1")
        sim.pump()
        assert drain(sim, "n2") == []  # what a broken commit-ok promised is gone


def test_break_tx_rollback_kept() -> None:
    """A rolled-back transaction's publishes must never reach the queue, also not with
    the channel's next commit."""
    for breaks, expected in (((), [b"kept"]), (("tx-rollback-kept",), [b"m0", b"m1", b"kept"])):
        sim = mirrored_queue(3, *breaks)
        client = sim.client("n2")
        client.send(1, commands.Tx.Select())
        for i in range(2):
            client.publish(1, f"m{i}".encode(), "ha.q", persistent=True)
        client.send(1, commands.Tx.Rollback())
        client.publish(1, b"kept", "ha.q", persistent=True)
        client.send(1, commands.Tx.Commit())
        sim.pump()
        assert any(isinstance(m, commands.Tx.RollbackOk) for m in client.methods())
        assert bodies(drain(sim, "n3")) == expected


def test_break_mandatory_ignored() -> None:
    """A mandatory publish no queue takes comes back (basic.return) before its confirm."""
    for breaks, returned in (((), 1), (("mandatory-ignored",), 0)):
        sim = mirrored_queue(3, *breaks)
        client = sim.client("n2")
        client.send(1, commands.Confirm.Select())
        client.publish(1, b"nowhere", "no.such.queue", mandatory=True)
        sim.pump()
        methods = client.methods()
        returns = [m for m in methods if isinstance(m, commands.Basic.Return)]
        assert [(r.reply_code, r.routing_key) for r in returns] == \
            [(312, "no.such.queue")] * returned
        assert any(isinstance(m, commands.Basic.Ack) for m in methods)  # confirmed either way


def test_break_confirm_waits_for_dead() -> None:
    """A mirror dies while a publisher on the other mirror's node waits for every
    replica: once the cluster sees it gone, the confirm must not wait for it."""
    for breaks, confirmed in (((), {1, 2, 3, 4, 5}), (("confirm-waits-for-dead",), set())):
        sim = mirrored_queue(5, *breaks)
        publisher = publish(sim, "n2", 5, confirm=True, pump=False)
        sim.kill("n3")
        sim.pump()
        assert confirmed_tags(publisher) == confirmed
        assert held(sim, "n1") == 5


# -- promotion -------------------------------------------------------------------------


def test_break_youngest_promoted() -> None:
    for breaks, promoted in (((), "n2"), (("youngest-promoted",), "n3")):
        sim = mirrored_queue(3, *breaks)
        assert [m.partition("/")[0] for m in replica(sim, "n1").record.mirrors] == ["n2", "n3"]
        sim.kill("n1")
        sim.pump()
        assert master_node(sim, "n2") == master_node(sim, "n3") == promoted


def test_break_no_requeue_on_promotion() -> None:
    """A consumer on the master's node holds every message when the node dies: the
    promoted mirror must give them to others."""
    for breaks, left in (((), numbered(5)), (("no-requeue-on-promotion",), [])):
        sim = mirrored_queue(4, *breaks)
        publish(sim, "n2", 5)
        consumer = sim.client("n1")
        consume(consumer, "c")
        sim.pump()
        assert len(consumer.deliveries()) == 5
        sim.kill("n1")
        sim.pump()
        assert bodies(drain(sim, "n2")) == left


def test_break_unflagged_redelivery() -> None:
    for breaks, flagged in (((), True), (("unflagged-redelivery",), False)):
        sim = mirrored_queue(5, *breaks)
        publish(sim, "n2", 3)
        consumer = sim.client("n3")
        consume(consumer, "c")
        sim.pump()
        assert len(consumer.deliveries()) == 3
        sim.kill("n1")
        sim.pump()
        again = consumer.deliveries()
        assert len(again) == 3
        assert all(method.redelivered is flagged for method, _ in again)


def test_break_credit_forgets_held() -> None:
    """A consumer on n3 (prefetch 3) holds three deliveries when the master's node dies:
    the new master may send it nothing more until it answers them."""
    for breaks, more in (((), 0), (("credit-forgets-held",), 3)):
        sim = mirrored_queue(7, *breaks)
        publish(sim, "n2", 10)
        consumer = sim.client("n3")
        consumer.send(1, commands.Basic.Qos(prefetch_count=3))
        consume(consumer, "c")
        sim.pump()
        assert len(consumer.deliveries()) == 3
        sim.kill("n1")
        sim.pump()
        assert len(consumer.deliveries()) == more


@pytest.mark.parametrize(("breaks", "cancelled"), [
    ((), {"asked"}),
    (("no-failover-cancel",), set()),
    (("cancel-all-on-failover",), {"asked", "plain"}),
])
def test_break_failover_cancels(breaks: tuple[str, ...], cancelled: set[str]) -> None:
    sim = mirrored_queue(6, *breaks)
    consumer = sim.client("n3")
    consume(consumer, "asked", cancel_on_failover=True)
    consume(consumer, "plain")
    sim.pump()
    consumer.methods()
    sim.kill("n1")
    sim.pump()
    assert {m.consumer_tag for m in consumer.methods()
            if isinstance(m, commands.Basic.Cancel)} == cancelled


def test_break_shutdown_promotes_unsynced() -> None:
    for breaks, promoted in (((), False), (("shutdown-promotes-unsynced",), True)):
        sim = unsynchronised_mirrors(*breaks)
        sim.coordinators["n1"].leave()
        sim.pump()
        sim.kill("n1")
        sim.pump()
        assert (master_node(sim, "n2") == "n2") is promoted
        if promoted:
            assert drain(sim, "n2") == []  # the five messages died with n1


def test_break_forget_no_promotion() -> None:
    """n1 stopped while no mirror is synchronised (when-synced: the queue waits for it),
    then forgotten by n3: the correct broker promotes n2 anyway."""
    for breaks, promoted in (((), True), (("forget-no-promotion",), False)):
        sim = unsynchronised_mirrors(*breaks)
        sim.coordinators["n1"].leave()
        sim.pump()
        sim.kill("n1")
        sim.pump()
        assert master_node(sim, "n2") == "n1"
        assert sim.coordinators["n3"].forget("n1") is None
        sim.pump()
        assert (master_node(sim, "n3") == "n2") is promoted


def test_break_failure_promotes_unsynced() -> None:
    for breaks, promoted in (((), False), (("failure-promotes-unsynced",), True)):
        sim = unsynchronised_mirrors(*breaks, policy={"ha-promote-on-failure": "when-synced"})
        sim.kill("n1")
        sim.pump()
        assert (master_node(sim, "n2") == "n2") is promoted


def test_break_drop_held_publishes() -> None:
    """A publisher on the mirror's node of a two-node cluster; the master dies before
    ordering its publishes: the promoted mirror must enqueue what it held, since it
    confirms them."""
    for breaks, kept in (((), numbered(5)), (("drop-held-publishes",), [])):
        sim = SimCluster(["n1", "n2"], 7, breaks)
        sim.set_policy("n1", "^ha", {"ha-mode": "all"})
        sim.client("n1").send(1, commands.Queue.Declare(queue="ha.q", durable=True))
        sim.pump()
        publisher = publish(sim, "n2", 5, confirm=True, pump=False)
        sim.kill("n1")
        sim.pump()
        assert confirmed_tags(publisher) == {1, 2, 3, 4, 5}
        assert bodies(drain(sim, "n2")) == kept


# -- synchronisation and rejoining -----------------------------------------------------


def test_break_instant_sync() -> None:
    for breaks, synced in (((), []), (("instant-sync",), ["n2", "n3"])):
        sim = unsynchronised_mirrors(*breaks)
        shown = queue_json(sim.brokers["n2"], replica(sim, "n2"))
        assert shown["synchronised_slave_nodes"] == synced
        assert shown["local"] == {"role": "mirror", "messages": 0}
        assert held(sim, "n1") == 5


def test_break_sync_noop() -> None:
    for breaks, copied in (((), 5), (("sync-noop",), 0)):
        sim = unsynchronised_mirrors(*breaks)
        coordinator = sim.coordinators["n1"]
        coordinator.sync(replica(sim, "n1"))
        while coordinator.sync_step():
            sim.pump()
        sim.pump()
        assert [node for node in ("n2", "n3")
                if node in queue_json(sim.brokers["n1"], replica(sim, "n1"))
                ["synchronised_slave_nodes"]] == ["n2", "n3"]
        assert (held(sim, "n2"), held(sim, "n3")) == (copied, copied)


def test_break_sync_drops_properties() -> None:
    """A message queued before the mirrors joined: the sync must copy its properties
    with its body (to the mirror promoted next), and a body in two frames whole."""
    big = bytes(range(256)) * 800  # 204,800 bytes
    sent = commands.Basic.Properties(delivery_mode=2, message_id="m1", headers={"h": "v"})
    for breaks, properties in (((), sent), (("sync-drops-properties",),
                                            commands.Basic.Properties())):
        sim = SimCluster(["n1", "n2", "n3"], 8, breaks)
        client = sim.client("n1")
        client.send(1, commands.Queue.Declare(queue="ha.q", durable=True))
        sim.pump()
        client.send_raw(
            frame.marshal(commands.Basic.Publish(routing_key="ha.q"), 1)
            + frame.marshal(header.ContentHeader(0, len(big), sent), 1)
            + b"".join(frame.marshal(ContentBody(big[i:i + 100_000]), 1)
                       for i in range(0, len(big), 100_000)))
        sim.pump()
        sim.set_policy("n1", "^ha", {"ha-mode": "all"})
        coordinator = sim.coordinators["n1"]
        coordinator.sync(replica(sim, "n1"))
        while coordinator.sync_step():
            sim.pump()
        sim.pump()
        sim.kill("n1")
        sim.pump()
        consumer = sim.client("n2")
        consume(consumer, "c")
        sim.pump()
        frames = consumer.drain()
        (got,) = [v.properties for _, v in frames if isinstance(v, header.ContentHeader)]
        assert got == properties
        assert b"".join(v.value for _, v in frames if isinstance(v, ContentBody)) == big


def test_break_cancelled_sync_counts() -> None:
    """A sync cancelled before its first batch: the mirrors hold nothing of the old
    messages and must stay unsynchronised."""
    for breaks, listed in (((), []), (("cancelled-sync-counts",), ["n2", "n3"])):
        sim = unsynchronised_mirrors(*breaks)
        coordinator = sim.coordinators["n1"]
        coordinator.sync(replica(sim, "n1"))
        assert coordinator.cancel_sync(replica(sim, "n1")) is None
        sim.pump()
        assert queue_json(sim.brokers["n1"], replica(sim, "n1"))[
            "synchronised_slave_nodes"] == listed
        assert (held(sim, "n2"), held(sim, "n3")) == (0, 0)


def test_break_unsynced_handover() -> None:
    """The policy moves ha.q off n1 while its mirrors hold none of its five messages:
    n1 must stay master until one is synchronised."""
    for breaks, master, kept in (((), "n1", 5), (("unsynced-handover",), "n2", 0)):
        sim = unsynchronised_mirrors(*breaks)
        sim.set_policy("n1", "^ha", {"ha-mode": "nodes", "ha-params": ["n2", "n3"]})
        assert master_node(sim, "n2") == master
        assert len(drain(sim, master)) == kept


def test_break_rejoin_keeps_contents() -> None:
    """n3 dies holding five messages that are then consumed; restarted, it recovers
    them from its store but must rejoin empty. Promoted later, it would hand them out
    again."""
    for breaks, stale in (((), []), (("rejoin-keeps-contents",), numbered(5))):
        sim = mirrored_queue(8, *breaks)
        publish(sim, "n1", 5)
        sim.kill("n3")
        sim.pump()
        assert bodies(drain(sim, "n1")) == numbered(5)
        sim.restart("n3")
        assert queue_json(sim.brokers["n3"], replica(sim, "n3"))["local"] == {
            "role": "mirror", "messages": len(stale)}
        sim.kill("n1")
        sim.kill("n2")
        sim.pump()
        assert master_node(sim, "n3") == "n3"
        assert bodies(drain(sim, "n3")) == stale


def test_break_no_remirror() -> None:
    """n3 restarts: the master makes it a mirror again, unless broken."""
    for breaks, mirrors in (((), ["n2", "n3"]), (("no-remirror",), ["n2"])):
        sim = mirrored_queue(11, *breaks)
        sim.kill("n3")
        sim.pump()
        sim.restart("n3")
        assert queue_json(sim.brokers["n1"], replica(sim, "n1"))["slave_nodes"] == mirrors


def test_break_no_spare_mirror() -> None:
    """Under ha-mode exactly 2 the queue lives on n1 and n2; n2 dies and n3 is spare:
    the master must make n3 its mirror."""
    for breaks, mirrors in (((), ["n3"]), (("no-spare-mirror",), [])):
        sim = SimCluster(["n1", "n2", "n3"], 12, breaks)
        sim.set_policy("n1", "^ha", {"ha-mode": "exactly", "ha-params": 2})
        sim.client("n1").send(1, commands.Queue.Declare(queue="ha.q", durable=True))
        sim.pump()
        assert queue_json(sim.brokers["n1"], replica(sim, "n1"))["slave_nodes"] == ["n2"]
        sim.kill("n2")
        sim.pump()
        assert queue_json(sim.brokers["n1"], replica(sim, "n1"))["slave_nodes"] == mirrors


def test_break_keeps_unwanted_mirrors() -> None:
    """ha-mode all on three nodes, then exactly 2: the master drops one mirror, unless
    broken."""
    for breaks, mirrors in (((), ["n2"]), (("keeps-unwanted-mirrors",), ["n2", "n3"])):
        sim = mirrored_queue(13, *breaks)
        sim.set_policy("n1", "^ha", {"ha-mode": "exactly", "ha-params": 2})
        sim.pump()
        assert queue_json(sim.brokers["n1"], replica(sim, "n1"))["slave_nodes"] == mirrors


def test_break_policy_priority_inverted() -> None:
    """A decoy of lower priority on the same queues wants a single replica: the ha-all
    policy of higher priority keeps both mirrors, unless broken."""
    for breaks, mirrors in (((), ["n2", "n3"]), (("policy-priority-inverted",), [])):
        sim = mirrored_queue(14, *breaks)
        sim.brokers["n1"].set_policy(Policy.create(
            "/", "decoy", "^ha", {"ha-mode": "exactly", "ha-params": 1}, priority=-1))
        sim.brokers["n1"].after_input()
        sim.pump()
        assert queue_json(sim.brokers["n1"], replica(sim, "n1"))["slave_nodes"] == mirrors


def test_break_mirrors_exclusive() -> None:
    """An exclusive queue under the ha-all policy stays on its connection's node."""
    for breaks, mirrors in (((), []), (("mirrors-exclusive",), ["n2", "n3"])):
        sim = mirrored_queue(15, *breaks)
        sim.client("n1").send(1, commands.Queue.Declare(queue="ha.x", exclusive=True))
        sim.pump()
        queue = sim.brokers["n1"].vhosts["/"].queues["ha.x"]
        assert queue_json(sim.brokers["n1"], queue)["slave_nodes"] == mirrors
        assert ("ha.x" in sim.brokers["n2"].vhosts["/"].queues) is bool(mirrors)


def test_break_forget_deletions() -> None:
    """n3 is down while the queue is deleted; restarted, it recovers the queue from its
    store. With a tombstone on its peers the queue stays deleted; without, n3 announces
    it again and every node takes it back."""
    for breaks, revived in (((), False), (("forget-deletions",), True)):
        sim = mirrored_queue(10, *breaks)
        publish(sim, "n1", 2)
        sim.kill("n3")
        sim.pump()
        client = sim.client("n1")
        client.send(1, commands.Queue.Delete(queue="ha.q"))
        sim.pump()
        assert any(isinstance(m, commands.Queue.DeleteOk) for m in client.methods())
        assert all("ha.q" not in sim.brokers[n].vhosts["/"].queues for n in ("n1", "n2"))
        sim.restart("n3")
        sim.pump()
        assert {n: "ha.q" in sim.brokers[n].vhosts["/"].queues
                for n in ("n1", "n2", "n3")} == dict.fromkeys(("n1", "n2", "n3"), revived)


# -- order and replication of changes --------------------------------------------------


def test_break_recover_drops() -> None:
    """basic.recover gives the channel's unacked deliveries back; broken, they are gone
    from every replica."""
    for breaks, expected in (((), [b"m0", b"m1", b"m2"]), (("recover-drops",), [b"m2"])):
        sim = mirrored_queue(4, *breaks)
        publish(sim, "n1", 3)
        client = sim.client("n2")
        for _ in range(2):
            client.send(1, commands.Basic.Get(queue="ha.q"))
        client.send(1, commands.Basic.Recover(requeue=True))
        sim.pump()
        assert any(isinstance(m, commands.Basic.RecoverOk) for m in client.methods())
        sim.kill("n1")  # the promoted mirror holds what the master did
        sim.pump()
        assert bodies(drain(sim, "n3")) == expected


def test_break_no_requeue_on_close() -> None:
    """A channel closed holding two deliveries gives them back at once; broken, they
    stay pending on the master, and only the promotion after its death requeues them."""
    for breaks, at_once, promoted in (((), [b"m0", b"m1", b"m2"], []),
                                      (("no-requeue-on-close",), [b"m2"], [b"m0", b"m1"])):
        sim = mirrored_queue(5, *breaks)
        publish(sim, "n1", 3)
        client = sim.client("n2")
        for _ in range(2):
            client.send(1, commands.Basic.Get(queue="ha.q"))
        client.send(1, commands.Channel.Close(reply_code=200, reply_text="bye", class_id=0,
                                              method_id=0))
        sim.pump()
        assert any(isinstance(m, commands.Channel.CloseOk) for m in client.methods())
        assert bodies(drain(sim, "n3")) == at_once
        sim.kill("n1")
        sim.pump()
        assert bodies(drain(sim, "n3")) == promoted


def test_break_requeue_at_tail() -> None:
    order = {(): [b"m0", b"m1", b"m2"], ("requeue-at-tail",): [b"m1", b"m2", b"m0"]}
    for breaks, expected in order.items():
        sim = mirrored_queue(9, *breaks)
        publish(sim, "n1", 3)
        client = sim.client("n2")
        client.send(1, commands.Basic.Get(queue="ha.q"))
        sim.pump()
        [got] = [m for m in client.methods() if isinstance(m, commands.Basic.GetOk)]
        client.send(1, commands.Basic.Nack(delivery_tag=got.delivery_tag, requeue=True))
        sim.pump()
        assert bodies(drain(sim, "n3")) == expected


def test_break_gm_reorder() -> None:
    """Ten publishes travel the ring as one GM message; after the master dies, the
    mirror's order is what consumers get, and the promoted mirror's own publishes come
    after them all, each tracked on its own until acked."""
    swapped = [f"m{i ^ 1}".encode() for i in range(10)]
    for breaks, expected in (((), numbered(10)), (("gm-reorder",), swapped)):
        sim = mirrored_queue(10, *breaks)
        publisher = sim.client("n1")
        publisher.send_raw(b"".join(publish_frames(1, body, "ha.q") for body in numbered(10)))
        sim.pump()
        sim.kill("n1")
        sim.pump()
        sim.client("n2").publish(1, b"later", "ha.q")
        consumer = sim.client("n2")
        consume(consumer, "c")
        sim.pump()
        assert [body for _, body in consumer.deliveries()] == [*expected, b"later"]
        assert held(sim, "n2") == 11


def _left_after_acks(seed: int, breaks: tuple[str, ...], *, multiple: bool) -> list[bytes]:
    """Five messages delivered on n1 and acked (each, or all with one basic.ack
    multiple=true), then the master killed: what n2, promoted, still holds."""
    sim = mirrored_queue(seed, *breaks)
    publish(sim, "n1", 5)
    consumer = sim.client("n1")
    consume(consumer, "c")
    sim.pump()
    tags = [method.delivery_tag for method, _ in consumer.deliveries()]
    for tag in tags[-1:] if multiple else tags:
        consumer.send(1, commands.Basic.Ack(delivery_tag=tag, multiple=multiple))
    sim.pump()
    sim.kill("n1")
    sim.pump()
    return bodies(drain(sim, "n2"))


def test_break_acks_not_replicated() -> None:
    for breaks, back in (((), []), (("acks-not-replicated",), numbered(5))):
        assert _left_after_acks(11, breaks, multiple=False) == back


def test_break_no_ack_not_replicated() -> None:
    """Five messages delivered to a no-ack consumer on n1, then the master killed: n2,
    promoted, must not hold them."""
    for breaks, back in (((), []), (("no-ack-not-replicated",), numbered(5))):
        sim = mirrored_queue(12, *breaks)
        publish(sim, "n1", 5)
        consumer = sim.client("n1")
        consumer.send(1, commands.Basic.Consume(queue="ha.q", consumer_tag="c", no_ack=True))
        sim.pump()
        assert len(consumer.deliveries()) == 5
        sim.kill("n1")
        sim.pump()
        assert bodies(drain(sim, "n2")) == back


def test_break_no_ack_get_unsettled() -> None:
    """Three no-ack basic.gets from n3 (the master is n1), then the master killed: what
    they took is settled, so n2, promoted, must not hold it."""
    for breaks, back in (((), []), (("no-ack-get-unsettled",), numbered(3))):
        sim = mirrored_queue(18, *breaks)
        publish(sim, "n1", 3)
        getter = sim.client("n3")
        for _ in range(3):
            getter.send(1, commands.Basic.Get(queue="ha.q", no_ack=True))
            sim.pump()
        assert sum(isinstance(m, commands.Basic.GetOk) for m in getter.methods()) == 3
        sim.kill("n1")
        sim.pump()
        assert bodies(drain(sim, "n2")) == back


def test_break_multiple_ack_last_only() -> None:
    """One basic.ack multiple=true for five deliveries: the mirrors must drop all five,
    not just the last."""
    for breaks, back in (((), []), (("multiple-ack-last-only",), numbered(4))):
        assert _left_after_acks(14, breaks, multiple=True) == back


def test_break_purge_not_replicated() -> None:
    """Five messages purged on the master, then the master killed: n2, promoted, must
    hold none of them."""
    for breaks, back in (((), []), (("purge-not-replicated",), numbered(5))):
        sim = mirrored_queue(15, *breaks)
        publish(sim, "n1", 5)
        sim.client("n3").send(1, commands.Queue.Purge(queue="ha.q"))
        sim.pump()
        assert held(sim, "n1") == 0
        sim.kill("n1")
        sim.pump()
        assert bodies(drain(sim, "n2")) == back


@pytest.mark.parametrize(("bug", "unbound"), [("bindings-not-replicated", False),
                                               ("unbind-not-replicated", True)])
def test_break_binding_changes_made_elsewhere(bug: str, unbound: bool) -> None:
    """ha.q bound to a direct exchange through n1 (and unbound again): a publish through
    that exchange on n2 must reach the queue (none)."""
    for breaks, routed in (((), int(not unbound)), ((bug,), int(unbound))):
        sim = mirrored_queue(16, *breaks)
        binder = sim.client("n1")
        binder.send(1, commands.Exchange.Declare(exchange="x", exchange_type="direct",
                                                 durable=True))
        binder.send(1, commands.Queue.Bind(queue="ha.q", exchange="x", routing_key="k"))
        sim.pump()
        if unbound:
            binder.send(1, commands.Queue.Unbind(queue="ha.q", exchange="x", routing_key="k"))
            sim.pump()
        sim.client("n2").publish(1, b"m0", "k", exchange="x", persistent=True)
        sim.pump()
        assert held(sim, "n1") == routed


def test_break_topic_hash_needs_a_word() -> None:
    """ha.q bound to a topic exchange by "ha.q.#": a key of the binding's words alone
    (zero words for the #) must reach it, as keys of one and two more words do."""
    for breaks, routed in (((), 3), (("topic-hash-needs-a-word",), 2)):
        sim = mirrored_queue(17, *breaks)
        client = sim.client("n1")
        client.send(1, commands.Exchange.Declare(exchange="t", exchange_type="topic",
                                                 durable=True))
        client.send(1, commands.Queue.Bind(queue="ha.q", exchange="t", routing_key="ha.q.#"))
        sim.pump()
        for key in ("ha.q", "ha.q.p1", "ha.q.p1.7"):
            client.publish(1, key.encode(), key, exchange="t", persistent=True)
        sim.pump()
        assert held(sim, "n1") == routed


@pytest.mark.parametrize(("kind", "bug", "bound_by"), [("fanout", "fanout-one-queue", ""),
                                                   ("direct", "direct-one-queue", "k")])
def test_break_one_queue_of_those_bound(kind: str, bug: str, bound_by: str) -> None:
    """ha.q and ha.r bound to a fanout exchange, or to a direct exchange by one key: each
    message must reach both (through the fanout whatever its routing key)."""
    for breaks, in_r in (((), 2), ((bug,), 0)):
        sim = mirrored_queue(18, *breaks)
        client = sim.client("n1")
        client.send(1, commands.Queue.Declare(queue="ha.r", durable=True))
        client.send(1, commands.Exchange.Declare(exchange="x", exchange_type=kind,
                                                 durable=True))
        for queue in ("ha.q", "ha.r"):
            client.send(1, commands.Queue.Bind(queue=queue, exchange="x",
                                               routing_key=bound_by))
        sim.pump()
        for body in ("m0", "m1"):
            sim.client("n2").publish(1, body.encode(), bound_by or body, exchange="x",
                                     persistent=True)
        sim.pump()
        other = sim.brokers["n1"].vhosts["/"].queues["ha.r"]
        assert (held(sim, "n1"), queue_json(sim.brokers["n1"], other)["messages"]) == (2, in_r)


def test_break_no_gm_takeover() -> None:
    """n2 receives the master's broadcasts and dies before passing them on to n3: the
    master, n3's new left-hand neighbour, must catch n3 up."""
    for breaks, on_n3 in (((), 5), (("no-gm-takeover",), 0)):
        sim = mirrored_queue(12, *breaks)
        publisher = sim.client("n1")
        for i in range(5):
            publisher.publish(1, f"m{i}".encode(), "ha.q")
        sim.move("n1", "n2")  # the direct publishes n2 holds
        sim.move("n1", "n2")  # the ring's message, which n2 takes with it
        sim.kill("n2")
        sim.pump()
        assert (held(sim, "n1"), held(sim, "n3")) == (5, on_n3)


# -- the node process: store and partition handling ------------------------------------


def test_break_no_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr("cluster.store.log.os.fdatasync", synced.append)
    for fsync, expected in ((True, 1), (False, 0)):
        synced.clear()
        store = MessageStore(tmp_path / str(fsync), fsync=fsync)
        store.recover()
        lsn = store.stage_append("/\x00q", 1, b"persistent")
        assert store.commit() == lsn  # reported durable either way
        assert len(synced) == expected
        store.close()


def test_break_pause_minority_ignored(tmp_path: Path) -> None:
    """A node that reaches neither peer is in a minority of three and must pause."""
    for breaks, pauses in (((), True), (("pause-minority-ignored",), False)):
        node = three_node(tmp_path / str(pauses), "n1", "pause_minority", *breaks)
        changes: list[object] = []
        node._app_change = changes.append  # type: ignore[method-assign,assignment]
        node._peer_event(PeerDown("n2", "connection closed"))
        assert (changes == [node.stop_app]) is pauses


def test_break_pause_never_resumes(tmp_path: Path) -> None:
    """Paused in a minority, the node must start again once it reaches a majority."""
    for breaks, resumes in (((), True), (("pause-never-resumes",), False)):
        node = three_node(tmp_path / str(resumes), "n1", "pause_minority", *breaks)
        assert node.peers is not None
        changes: list[object] = []
        node._app_change = changes.append  # type: ignore[method-assign,assignment]
        node._peer_event(PeerDown("n2", "connection closed"))
        assert changes == [node.stop_app]
        node.peers.detector.peers["n2"].up = True
        node._peer_event(PeerUp("n2", "i2", restarted=False, partition=False))
        assert (changes == [node.stop_app, node.start_app]) is resumes


def test_break_boot_no_wait(tmp_path: Path) -> None:
    """n1 stopped while n2 and n3 ran on (its file says so), and neither comes back: it
    must not start on its own records, which they have since moved on."""
    for breaks, starts in (((), False), (("boot-no-wait",), True)):
        node = three_node(tmp_path / str(starts), "n1", "autoheal", *breaks,
                          options=("--tick", "0.05", "--peer-wait", "0.2"))
        node.last_running.save(frozenset({"n2", "n3"}))
        if starts:
            asyncio.run(node._await_boot())
        else:
            with pytest.raises(BootError, match="n2"):
                asyncio.run(node._await_boot())


def test_break_autoheal_no_restart(tmp_path: Path) -> None:
    """n2 alone meets n1 again after a partition: a tie that n1's side wins, so n2 must
    restart."""
    for breaks, restarts in (((), True), (("autoheal-no-restart",), False)):
        node = three_node(tmp_path / str(restarts), "n2", "autoheal", *breaks)
        assert node.peers is not None
        node.coordinator = Coordinator(Broker(BrokerConfig(breaks=node.config.broker.breaks)),
                                       "n2", "i", ["n1", "n3"])
        peer = node.peers.detector.peers["n1"]
        peer.up = peer.app_running = True
        node.peers.detector.partitions.add("n1")
        changes: list[object] = []
        node._app_change = changes.append  # type: ignore[method-assign,assignment]
        node._peer_event(PeerUp("n1", "i1", restarted=False, partition=True))
        assert (changes == [node._restart_app]) is restarts


def test_break_autoheal_wrong_winner(tmp_path: Path) -> None:
    """n1 alone meets n2 and n3 again after a partition: it is the smaller side and
    must restart, not they."""
    for breaks, restarts in (((), True), (("autoheal-wrong-winner",), False)):
        node = three_node(tmp_path / str(restarts), "n1", "autoheal", *breaks)
        assert node.peers is not None
        node.coordinator = Coordinator(Broker(BrokerConfig(breaks=node.config.broker.breaks)),
                                       "n1", "i", ["n2", "n3"])
        for peer_name in ("n2", "n3"):
            peer = node.peers.detector.peers[peer_name]
            peer.up = peer.app_running = True
            node.peers.detector.partitions.add(peer_name)
        changes: list[object] = []
        node._app_change = changes.append  # type: ignore[method-assign,assignment]
        node._peer_event(PeerUp("n2", "i2", restarted=False, partition=True))
        assert (changes == [node._restart_app]) is restarts


def test_the_local_field_shows_each_nodes_own_replica() -> None:
    """Two replicas on three nodes: the master's, a mirror's, and none on the third."""
    sim = SimCluster(["n1", "n2", "n3"], 13)
    sim.set_policy("n1", "^ha", {"ha-mode": "exactly", "ha-params": 2})
    sim.client("n1").send(1, commands.Queue.Declare(queue="ha.q", durable=True))
    sim.pump()
    publish(sim, "n2", 4)
    consumer = sim.client("n3")
    consumer.send(1, commands.Basic.Get(queue="ha.q"))  # one unacknowledged: counted
    sim.pump()
    local = {n: queue_json(sim.brokers[n], replica(sim, n))["local"] for n in sim.brokers}
    assert local == {"n1": {"role": "master", "messages": 4},
                     "n2": {"role": "mirror", "messages": 4}, "n3": None}
    single = Broker(BrokerConfig())
    queue = single.vhosts["/"].declare_queue("plain", passive=False, durable=False,
                                             exclusive=False, auto_delete=False,
                                             arguments={}, connection_id=1)
    assert queue_json(single, queue)["local"] == {"role": "master", "messages": 0}



def test_a_sync_ends_only_once_its_batches_have_reached_every_mirror() -> None:
    """The master must not call a mirror synchronised while the copies are still on the
    way: killed then, it would leave a 'synchronised' mirror without them."""
    sim = unsynchronised_mirrors()
    coordinator = sim.coordinators["n1"]
    queue = replica(sim, "n1")
    coordinator.sync(queue)
    while coordinator.sync_step():
        pass  # every batch broadcast; nothing delivered to the mirrors yet
    sim.brokers["n1"].after_input()
    assert queue_json(sim.brokers["n1"], queue)["synchronised_slave_nodes"] == []
    assert queue.copy is not None and queue.copy.paused  # still blocked while it syncs
    sim.pump()
    assert queue_json(sim.brokers["n1"], queue)["synchronised_slave_nodes"] == ["n2", "n3"]
    assert (held(sim, "n2"), held(sim, "n3")) == (5, 5) and not queue.copy.paused


def test_break_stale_proof_of_life(tmp_path: Path) -> None:
    """Asked by n3 whether it still hears n1, n2 must probe n1 and answer only on its
    reply; the broken node answers yes from its own view at once."""
    for breaks, answers_at_once in (((), False), (("stale-proof-of-life",), True)):
        node = three_node(tmp_path / str(answers_at_once), "n2", "ignore", *breaks)
        assert node.peers is not None
        detector = node.peers.detector
        for peer in ("n1", "n3"):
            detector.heard(peer, f"{peer}-1", True, ["n1", "n2", "n3"], now=0.0)
        outputs = detector.asked("n3", "n1")
        assert (outputs == [Answer("n3", "n1", True)]) is answers_at_once
        assert any(isinstance(o, Probe) for o in outputs) is not answers_at_once


# -- what a queue refuses or does (the rule prober's rules) -----------------------------


def asked(sim: SimCluster, node: str, method: commands.Queue.Delete | commands.Queue.Declare
          | commands.Basic.Consume | commands.Basic.Get) -> int | None:
    """A new client on ``node`` asks: None when the broker did it, else the reply code
    that closed its channel."""
    client = sim.client(node)
    client.send(1, method)
    sim.pump()
    closes = [m for m in client.methods() if isinstance(m, commands.Channel.Close)]
    return closes[0].reply_code if closes else None


def test_break_exclusive_consumer_ignored() -> None:
    """Every node's consumers count: beside an exclusive consumer on n1, a consumer on
    n1 or n2 is refused (403); beside a consumer on n3, an exclusive one on n2 too."""
    for breaks, code in (((), 403), (("exclusive-consumer-ignored",), None)):
        sim = mirrored_queue(3, *breaks)
        sim.client("n1").send(1, commands.Basic.Consume(queue="ha.q", exclusive=True))
        sim.pump()
        assert [asked(sim, node, commands.Basic.Consume(queue="ha.q"))
                for node in ("n1", "n2")] == [code, code]
        sim = mirrored_queue(3, *breaks)
        sim.client("n3").send(1, commands.Basic.Consume(queue="ha.q"))
        sim.pump()
        assert asked(sim, "n2", commands.Basic.Consume(queue="ha.q", exclusive=True)) == code
        assert asked(sim, "n2", commands.Basic.Consume(queue="ha.q")) is None


@pytest.mark.parametrize("node", ["n1", "n2"])  # the master's node answers itself, n2 asks
def test_break_delete_ignores_if_empty(node: str) -> None:
    for breaks, code in (((), 406), (("delete-ignores-if-empty",), None)):
        sim = mirrored_queue(3, *breaks)
        publish(sim, "n3", 1)
        assert asked(sim, node, commands.Queue.Delete(queue="ha.q", if_empty=True)) == code
        assert ("ha.q" in sim.brokers["n3"].vhosts["/"].queues) is (code is not None)


@pytest.mark.parametrize("node", ["n1", "n2"])
def test_break_delete_ignores_if_unused(node: str) -> None:
    for breaks, code in (((), 406), (("delete-ignores-if-unused",), None)):
        sim = mirrored_queue(3, *breaks)
        sim.client("n3").send(1, commands.Basic.Consume(queue="ha.q"))
        sim.pump()
        assert asked(sim, node, commands.Queue.Delete(queue="ha.q", if_unused=True)) == code


def auto_delete_queue(*breaks: str) -> tuple[SimCluster, MemoryClient, MemoryClient]:
    """ha.auto (auto-delete, mirrored, its master on n1) with a consumer on n1 and n2."""
    sim = SimCluster(["n1", "n2", "n3"], 3, breaks)
    sim.set_policy("n1", "^ha", {"ha-mode": "all"})
    on_n1, on_n2 = sim.client("n1"), sim.client("n2")
    on_n1.send(1, commands.Queue.Declare(queue="ha.auto", auto_delete=True))
    sim.pump()
    for client in (on_n1, on_n2):
        client.send(1, commands.Basic.Consume(queue="ha.auto", consumer_tag="t"))
        sim.pump()
    return sim, on_n1, on_n2


def test_break_auto_delete_kept() -> None:
    """An auto-delete queue goes with its last consumer, wherever that one was; so does
    one that is not mirrored (an exclusive queue, which its own node deletes)."""
    for breaks, code in (((), 404), (("auto-delete-kept",), None)):
        sim, on_n1, on_n2 = auto_delete_queue(*breaks)
        for client in (on_n1, on_n2):
            client.send(1, commands.Basic.Cancel(consumer_tag="t"))
            sim.pump()
        assert asked(sim, "n3", commands.Queue.Declare(queue="ha.auto", passive=True)) == code
        owner = sim.client("n1")
        for method in (commands.Queue.Declare(queue="own", exclusive=True, auto_delete=True),
                       commands.Basic.Consume(queue="own", consumer_tag="t"),
                       commands.Basic.Cancel(consumer_tag="t"),
                       commands.Queue.Declare(queue="own", passive=True)):
            owner.send(1, method)
        closes = [m for m in owner.methods() if isinstance(m, commands.Channel.Close)]
        assert [m.reply_code for m in closes] == ([] if code is None else [code])


def test_break_auto_delete_per_node() -> None:
    """The consumer on the master's node cancels: the one on n2 keeps the queue."""
    for breaks, code in (((), None), (("auto-delete-per-node",), 404)):
        sim, on_n1, _ = auto_delete_queue(*breaks)
        on_n1.send(1, commands.Basic.Cancel(consumer_tag="t"))
        sim.pump()
        assert asked(sim, "n3", commands.Queue.Declare(queue="ha.auto", passive=True)) == code


def test_break_exclusive_queue_shared() -> None:
    """Another connection's exclusive queue is locked (405) for consume, get and
    declare, passive or not."""
    for breaks, code in (((), 405), (("exclusive-queue-shared",), None)):
        sim = SimCluster(["n1", "n2", "n3"], 3, breaks)
        sim.client("n1").send(1, commands.Queue.Declare(queue="own", exclusive=True))
        sim.pump()
        assert [asked(sim, "n1", method) for method in (
            commands.Basic.Consume(queue="own"),
            commands.Basic.Get(queue="own"),
            commands.Queue.Declare(queue="own", passive=True),
            commands.Queue.Declare(queue="own", exclusive=True))] == [code] * 4
