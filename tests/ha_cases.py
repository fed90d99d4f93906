"""The mirrored-queue cases of RabbitMQ's HA test suites, as plain functions.

Each case drives real pika clients against a running cluster, injects its fault
through a `ProcessControl`, and returns an outcome whose ``problems()`` lists every
way the broker broke the design's promise (empty: it kept it). Tests assert on the
outcome (tests/ha/test_ha_live.py); other tests use its helpers. Management calls
go through the nemeses' client, `faults.management.Management`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import pika
import pika.exceptions

from faults.management import Management
from faults.process.control import ProcessControl

Fault = str  # "kill" (SIGKILL) or "stop" (graceful)


@dataclass(frozen=True)
class NodeAccess:
    amqp_url: str
    mgmt_url: str


def management(node: NodeAccess) -> Management:
    """The node's management API, as guest."""
    return Management(node.mgmt_url)


def queue_info(node: NodeAccess, queue: str) -> dict[str, object]:
    found = management(node).call("GET", f"/api/queues/%2F/{queue}")
    assert isinstance(found, dict)
    return found


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")


def declare_mirrored(nodes: Mapping[str, NodeAccess], master: str, queue: str,
                     definition: dict[str, object] | None = None) -> None:
    """Set the ``ha-*`` policy (default: ``ha-mode: all``), declare ``queue`` on
    ``master`` and wait until every node mirrors it, in sync."""
    set_policy(nodes[master], {"ha-mode": "all", **(definition or {})})
    declare(nodes[master], queue)
    others = sorted(n for n in nodes if n != master)
    wait_for(lambda: synchronised_mirrors(nodes[master], queue) == others,
             f"{queue} mirrored in sync on {others}")


def synchronised_mirrors(node: NodeAccess, queue: str) -> list[str]:
    return _node_list(node, queue, "synchronised_slave_nodes")


def mirror_nodes(node: NodeAccess, queue: str) -> list[str]:
    return _node_list(node, queue, "slave_nodes")


def _node_list(node: NodeAccess, queue: str, field: str) -> list[str]:
    names = queue_info(node, queue)[field]
    assert isinstance(names, list)
    return sorted(names)


def _fail(control: ProcessControl, node: str, fault: Fault) -> None:
    if fault == "kill":
        control.kill(node)
    elif fault == "stop":
        control.stop(node, timeout=10.0)
    else:
        raise ValueError(f"unknown fault {fault!r}: expected 'kill' or 'stop'")


@dataclass
class Deliveries:
    """What one consumer saw: bodies with their redelivered flags, cancels."""

    seen: list[tuple[bytes, bool]] = field(default_factory=list)
    cancelled: int = 0

    def problems(self, published: list[bytes], confirmed: list[bytes]) -> list[str]:
        out = []
        first: dict[bytes, bool] = {}
        for body, redelivered in self.seen:
            if body in first and not redelivered:
                out.append(f"{body!r} delivered again without redelivered=true")
            first.setdefault(body, redelivered)
        lost = [m for m in confirmed if m not in first]
        if lost:
            out.append(f"{len(lost)} confirmed messages never delivered: {lost[:5]}")
        order = {body: i for i, body in enumerate(published)}
        fresh = [order[b] for b, redelivered in self.seen if not redelivered and b in order]
        if fresh != sorted(fresh):
            out.append("first deliveries out of publish order")
        unknown = [b for b in first if b not in order]
        if unknown:
            out.append(f"delivered messages never published: {unknown[:5]}")
        return out


@dataclass
class ConfirmsOutcome:
    published: list[bytes]
    confirmed: list[bytes]
    deliveries: Deliveries
    longest_confirm_gap: float

    def problems(self) -> list[str]:
        out = self.deliveries.problems(self.published, self.confirmed)
        if len(self.confirmed) != len(self.published):
            out.append(f"only {len(self.confirmed)} of {len(self.published)} publishes "
                       "confirmed")
        return out


class ConfirmingPublisher:
    """Publishes persistent messages one at a time with confirms, keeping what was
    published, what was confirmed and the longest wait between two confirms."""

    def __init__(self, url: str, queue: str) -> None:
        self.queue = queue
        self.connection = pika.BlockingConnection(pika.URLParameters(url))
        self.channel = self.connection.channel()
        self.channel.confirm_delivery()
        self.published: list[bytes] = []
        self.confirmed: list[bytes] = []
        self.longest_gap = 0.0
        self._last = time.monotonic()

    def publish(self, body: bytes) -> None:
        self.published.append(body)
        try:
            self.channel.basic_publish("", self.queue, body,
                                       pika.BasicProperties(delivery_mode=2))
        except pika.exceptions.NackError:
            return
        self.confirmed.append(body)
        now = time.monotonic()
        self.longest_gap, self._last = max(self.longest_gap, now - self._last), now

    def close(self) -> None:
        self.connection.close()


def _consume(url: str, queue: str, into: Deliveries, until: threading.Event,
             arguments: dict[str, object] | None = None, prefetch: int = 20) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    channel.basic_qos(prefetch_count=prefetch)

    def on_message(ch: object, method: object, properties: object, body: bytes) -> None:
        into.seen.append((body, bool(method.redelivered)))  # type: ignore[attr-defined]
        channel.basic_ack(method.delivery_tag)  # type: ignore[attr-defined]

    def on_cancel(frame: object) -> None:
        into.cancelled += 1
        channel.basic_consume(queue, on_message)  # come back, as a client would

    channel.add_on_cancel_callback(on_cancel)
    channel.basic_consume(queue, on_message, arguments=arguments)
    while not until.is_set():
        connection.process_data_events(0.05)
    connection.close()


def _drain_into(url: str, queue: str, into: Deliveries, idle: float = 1.0) -> None:
    connection = pika.BlockingConnection(pika.URLParameters(url))
    channel = connection.channel()
    quiet_since = time.monotonic()
    while time.monotonic() - quiet_since < idle:
        method, _, body = channel.basic_get(queue, auto_ack=True)
        if method is None:
            time.sleep(0.05)
            continue
        into.seen.append((body, bool(method.redelivered)))
        quiet_since = time.monotonic()
    connection.close()


def confirms_survive(nodes: Mapping[str, NodeAccess], control: ProcessControl, *,
                     master: str, publisher: str, consumer: str, fault: Fault,
                     queue: str = "ha.confirms", messages: int = 600,
                     fault_at: int = 200) -> ConfirmsOutcome:
    """RabbitMQ's confirms-survive-kill/stop: a publisher with confirms on one mirror,
    a consumer on another, the master fails partway. Every publish must be confirmed
    and every confirmed message delivered."""
    declare_mirrored(nodes, master, queue)
    deliveries = Deliveries()
    done = threading.Event()
    consumer_thread = threading.Thread(
        target=_consume, args=(nodes[consumer].amqp_url, queue, deliveries, done))
    consumer_thread.start()
    publishing = ConfirmingPublisher(nodes[publisher].amqp_url, queue)
    try:
        for i in range(messages):
            if i == fault_at:
                _fail(control, master, fault)
            publishing.publish(f"m{i}".encode())
        publishing.close()
        wait_for(lambda: len({b for b, _ in deliveries.seen}) >= len(publishing.confirmed),
                 "the consumer to see every confirmed message", timeout=20)
    except TimeoutError:
        pass  # the outcome reports what is missing
    finally:
        done.set()
        consumer_thread.join()
    return ConfirmsOutcome(publishing.published, publishing.confirmed, deliveries,
                           publishing.longest_gap)


@dataclass
class ConsumerOutcome:
    published: list[bytes]
    deliveries: Deliveries
    cancel_on_failover: bool
    left_in_queue: int  # after every client is gone: held back, never to be delivered

    def problems(self) -> list[str]:
        out = self.deliveries.problems(self.published, self.published)
        if self.left_in_queue:
            out.append(f"{self.left_in_queue} messages left in the queue after the drain")
        if self.cancel_on_failover and self.deliveries.cancelled != 1:
            out.append(f"x-cancel-on-ha-failover: {self.deliveries.cancelled} cancels, "
                       "expected 1")
        if not self.cancel_on_failover and self.deliveries.cancelled:
            out.append(f"consumer cancelled {self.deliveries.cancelled} times without "
                       "asking for x-cancel-on-ha-failover")
        return out


def consumer_survives(nodes: Mapping[str, NodeAccess], control: ProcessControl, *,
                      master: str, consumer: str, fault: Fault, cancel_on_failover: bool,
                      queue: str = "ha.consume", messages: int = 500) -> ConsumerOutcome:
    """RabbitMQ's consume-survives-kill/stop and auto-resume: a slow acking consumer on
    a mirror while the master fails. It must go on receiving (after a cancel
    notification when it asked for one); first deliveries keep publish order and
    repeats carry redelivered=true; nothing published is missing at the end."""
    declare_mirrored(nodes, master, queue)
    published = [f"c{i}".encode() for i in range(messages)]
    publish(nodes[consumer], queue, published)
    deliveries = Deliveries()
    done = threading.Event()
    arguments = {"x-cancel-on-ha-failover": True} if cancel_on_failover else None
    consumer_thread = threading.Thread(
        target=_consume, args=(nodes[consumer].amqp_url, queue, deliveries, done, arguments, 5))
    consumer_thread.start()
    try:
        wait_for(lambda: len(deliveries.seen) >= messages // 4, "a quarter delivered")
        _fail(control, master, fault)
        wait_for(lambda: len({b for b, _ in deliveries.seen}) >= messages,
                 "every message delivered after the failover", timeout=20)
    except TimeoutError:
        pass
    finally:
        done.set()
        consumer_thread.join()
    _drain_into(nodes[consumer].amqp_url, queue, deliveries, idle=0.5)
    left = queue_info(nodes[consumer], queue)["messages"]
    assert isinstance(left, int)
    return ConsumerOutcome(published, deliveries, cancel_on_failover, left)


# -- synchronisation and promotion ------------------------------------------------------


def set_policy(node: NodeAccess, definition: dict[str, object], pattern: str = "^ha\\.",
               name: str = "ha-all") -> None:
    management(node).put_policy("/", name, {"pattern": pattern, "definition": definition})


def queue_action(node: NodeAccess, queue: str, action: str) -> None:
    management(node).queue_action("/", queue, action)


def publish(node: NodeAccess, queue: str, bodies: list[bytes]) -> None:
    """Publish persistent messages with confirms; every one must be confirmed."""
    publishing = ConfirmingPublisher(node.amqp_url, queue)
    for body in bodies:
        publishing.publish(body)
    publishing.close()
    if publishing.confirmed != publishing.published:
        raise AssertionError(f"{len(publishing.published) - len(publishing.confirmed)} of "
                             f"{len(bodies)} publishes to {queue} nacked")


def declare(node: NodeAccess, queue: str) -> None:
    """A durable queue, declared through ``node`` (so its master is there)."""
    connection = pika.BlockingConnection(pika.URLParameters(node.amqp_url))
    connection.channel().queue_declare(queue, durable=True)
    connection.close()


def message_count(node: NodeAccess, queue: str) -> int | None:
    """What ``queue.declare(passive)`` answers on ``node``; None when the queue is
    unavailable there (404)."""
    connection = pika.BlockingConnection(pika.URLParameters(node.amqp_url))
    try:
        return int(connection.channel().queue_declare(queue, passive=True).method.message_count)
    except pika.exceptions.ChannelClosedByBroker as closed:
        if closed.reply_code == 404:
            return None
        raise
    finally:
        if connection.is_open:
            connection.close()


def unsynchronised_mirrors(nodes: Mapping[str, NodeAccess], control: ProcessControl, *,
                           master: str, queue: str, messages: int,
                           definition: dict[str, object]) -> list[bytes]:
    """A queue mirrored everywhere whose mirrors hold none of its ``messages``: they
    were down while those were published and rejoined empty."""
    declare_mirrored(nodes, master, queue, definition)
    mirrors = sorted(n for n in nodes if n != master)
    for mirror in mirrors:
        control.stop(mirror, timeout=10.0)
    bodies = [f"old{i}".encode() for i in range(messages)]
    publish(nodes[master], queue, bodies)
    for mirror in mirrors:
        control.start(mirror)
    wait_for(lambda: mirror_nodes(nodes[master], queue) == mirrors,
             f"{mirrors} to rejoin {queue}")
    return bodies


@dataclass
class PromotionOutcome:
    """What the eldest mirror did when an unsynchronised-mirrored master failed."""

    setting: str
    old_messages: int
    after_failure: int | None  # messages the queue answers with; None: unavailable
    after_return: int | None  # the same once the old master is back

    def problems(self) -> list[str]:
        if self.setting == "always":
            # The unsynchronised mirror is promoted and the old messages are gone: the
            # design's documented loss.
            if self.after_failure != 0:
                return [f"promoted unsynchronised mirror answered {self.after_failure} "
                        "messages, expected 0 (it never held the old ones)"]
            return []
        out = []
        if self.after_failure is not None:
            out.append(f"queue answered {self.after_failure} messages while its master "
                       "was down; when-synced must leave it unavailable")
        if self.after_return != self.old_messages:
            out.append(f"{self.after_return} messages after the old master returned, "
                       f"expected all {self.old_messages}")
        return out


def promotion_of_unsynchronised(nodes: Mapping[str, NodeAccess], control: ProcessControl, *,
                                master: str, fault: Fault, setting: str,
                                queue: str = "ha.promote", messages: int = 50,
                                ) -> PromotionOutcome:
    """RabbitMQ's promote-on-failure / promote-on-shutdown cases: only unsynchronised
    mirrors survive the master's failure (SIGKILL) or graceful stop."""
    key = "ha-promote-on-failure" if fault == "kill" else "ha-promote-on-shutdown"
    bodies = unsynchronised_mirrors(nodes, control, master=master, queue=queue,
                                    messages=messages, definition={key: setting})
    _fail(control, master, fault)
    survivor = nodes[sorted(n for n in nodes if n != master)[0]]
    wait_for(lambda: _settled_after_failure(survivor, queue, master), "the failover decision")
    after_failure = message_count(survivor, queue)
    after_return = None
    if setting != "always":
        control.start(master)
        wait_for(lambda: message_count(survivor, queue) is not None, "the queue to come back")
        after_return = message_count(survivor, queue)
    return PromotionOutcome(setting, len(bodies), after_failure, after_return)


def _settled_after_failure(node: NodeAccess, queue: str, old_master: str) -> bool:
    """The survivors have decided: a new master, or a refusal (the record still names
    the old master, which is no longer running)."""
    info = queue_info(node, queue)
    return info["node"] != old_master or message_count(node, queue) is None


@dataclass
class SyncOutcome:
    messages: int
    synchronised_before: list[str]
    synchronised_after: list[str]
    after_master_killed: int | None

    def problems(self) -> list[str]:
        out = []
        if self.synchronised_before:
            out.append(f"rejoined mirrors counted synchronised before any sync: "
                       f"{self.synchronised_before}")
        if not self.synchronised_after:
            out.append("no mirror synchronised after the sync")
        if self.after_master_killed != self.messages:
            out.append(f"the promoted mirror holds {self.after_master_killed} of "
                       f"{self.messages} messages")
        return out


def sync_then_fail(nodes: Mapping[str, NodeAccess], control: ProcessControl, *, master: str,
                   automatic: bool, turned_automatic: bool = False, queue: str = "ha.sync",
                   messages: int = 200) -> SyncOutcome:
    """eager-sync and manual sync: rejoined mirrors become synchronised by a sync
    (``ha-sync-mode: automatic`` when they join, or when a policy change turns it on;
    or ``sync_queue``), so the master's death loses nothing."""
    mode = "automatic" if automatic and not turned_automatic else "manual"
    definition: dict[str, object] = {"ha-sync-mode": mode, "ha-sync-batch-size": 16}
    bodies = unsynchronised_mirrors(nodes, control, master=master, queue=queue,
                                    messages=messages, definition=definition)
    before = [] if automatic else synchronised_mirrors(nodes[master], queue)
    if not automatic:
        queue_action(nodes[master], queue, "sync")
    elif turned_automatic:
        before = synchronised_mirrors(nodes[master], queue)
        set_policy(nodes[master], {"ha-mode": "all", **definition,
                                   "ha-sync-mode": "automatic"})
    others = sorted(n for n in nodes if n != master)
    wait_for(lambda: synchronised_mirrors(nodes[master], queue) == others, "the sync")
    after = synchronised_mirrors(nodes[master], queue)
    control.kill(master)
    survivor = nodes[others[0]]
    wait_for(lambda: queue_info(survivor, queue)["node"] != master, "the promotion")
    return SyncOutcome(len(bodies), before, after, message_count(survivor, queue))


def node_events(control: ProcessControl, node: str, kind: str) -> list[dict[str, object]]:
    """The node's event log lines of one kind (local processes keep it in their data
    directory)."""
    path = control.node(node).data_dir / "events.jsonl"  # type: ignore[attr-defined]
    lines = path.read_text().splitlines()
    return [event for line in lines if (event := json.loads(line))["event"] == kind]


@dataclass
class CancelOutcome:
    sync_ends: list[dict[str, object]]
    synchronised_after: list[str]

    def problems(self) -> list[str]:
        outcomes = [end.get("outcome") for end in self.sync_ends]
        if outcomes != ["cancelled"]:
            return [f"sync ends {outcomes}, expected one cancelled sync"]
        if self.synchronised_after:
            return [f"mirrors {self.synchronised_after} synchronised after a cancelled sync"]
        return []


def sync_cancelled(nodes: Mapping[str, NodeAccess], control: ProcessControl, *, master: str,
                   queue: str = "ha.cancel", messages: int = 5_000) -> CancelOutcome:
    """``cancel_sync_queue`` during a sync in batches of one: the mirrors stay
    unsynchronised and the master says the sync was cancelled."""
    unsynchronised_mirrors(nodes, control, master=master, queue=queue, messages=messages,
                           definition={"ha-sync-batch-size": 1})
    queue_action(nodes[master], queue, "sync")
    queue_action(nodes[master], queue, "cancel_sync")
    return CancelOutcome(node_events(control, master, "sync_end"),
                         synchronised_mirrors(nodes[master], queue))


@dataclass
class DrainOutcome:
    synchronised_while_old_held: list[str]
    synchronised_after_drain: list[str]
    mirrors: list[str]

    def problems(self) -> list[str]:
        out = []
        if self.synchronised_while_old_held:
            out.append(f"{self.synchronised_while_old_held} counted synchronised while "
                       "older messages they never held were still queued")
        if self.synchronised_after_drain != self.mirrors:
            out.append(f"after the old head drained, synchronised "
                       f"{self.synchronised_after_drain}, expected {self.mirrors}")
        return out


def rejoined_until_drained(nodes: Mapping[str, NodeAccess], control: ProcessControl, *,
                           master: str, queue: str = "ha.rejoin",
                           messages: int = 30) -> DrainOutcome:
    """rejoin-unsynced: a mirror that rejoins is unsynchronised until every message
    older than its join is gone, with no sync."""
    unsynchronised_mirrors(nodes, control, master=master, queue=queue, messages=messages,
                           definition={})
    publish(nodes[master], queue, [b"new"])
    held = synchronised_mirrors(nodes[master], queue)
    drained = Deliveries()
    _drain_into(nodes[master].amqp_url, queue, drained, idle=0.3)
    mirrors = mirror_nodes(nodes[master], queue)
    with contextlib.suppress(TimeoutError):
        wait_for(lambda: synchronised_mirrors(nodes[master], queue) == mirrors, "drained sync",
                 timeout=5)
    return DrainOutcome(held, synchronised_mirrors(nodes[master], queue), mirrors)


@dataclass
class MoveOutcome:
    master_before: str
    master_after: str
    wanted: list[str]
    published: int
    drained: Deliveries

    def problems(self) -> list[str]:
        out = []
        if self.master_after not in self.wanted:
            out.append(f"master {self.master_after} is not on {self.wanted}")
        bodies = {body for body, _ in self.drained.seen}
        if len(bodies) != self.published:
            out.append(f"{len(bodies)} of {self.published} messages left after the move")
        return out


def policy_moves_queue(nodes: Mapping[str, NodeAccess], *, master: str, to: list[str],
                       queue: str = "ha.move", messages: int = 100) -> MoveOutcome:
    """A policy change that moves a queue off its master's node: the master hands over
    only once a mirror on the new nodes is synchronised, and nothing is lost."""
    set_policy(nodes[master], {"ha-mode": "nodes", "ha-params": [master]})
    declare(nodes[master], queue)
    bodies = [f"mv{i}".encode() for i in range(messages)]
    publish(nodes[master], queue, bodies)
    set_policy(nodes[master], {"ha-mode": "nodes", "ha-params": to,
                               "ha-sync-mode": "automatic"})
    other = nodes[to[0]]
    wait_for(lambda: queue_info(other, queue)["node"] in to, f"the master to move to {to}")
    after = str(queue_info(other, queue)["node"])
    drained = Deliveries()
    _drain_into(other.amqp_url, queue, drained, idle=0.5)
    return MoveOutcome(master, after, to, len(bodies), drained)


@dataclass
class ReplacementOutcome:
    mirrors_before: list[str]
    mirrors_after: list[str]
    lost_mirror: str

    def problems(self) -> list[str]:
        if len(self.mirrors_after) != len(self.mirrors_before):
            return [f"mirrors {self.mirrors_after} after losing {self.lost_mirror}, expected "
                    f"{len(self.mirrors_before)} again"]
        if self.lost_mirror in self.mirrors_after:
            return [f"the lost mirror {self.lost_mirror} is still listed"]
        return []


def exactly_replaces_lost_mirror(nodes: Mapping[str, NodeAccess], control: ProcessControl, *,
                                 master: str, queue: str = "ha.exactly") -> ReplacementOutcome:
    """``ha-mode: exactly`` with a spare node: a killed mirror is replaced there."""
    set_policy(nodes[master], {"ha-mode": "exactly", "ha-params": 2})
    declare(nodes[master], queue)
    wait_for(lambda: len(mirror_nodes(nodes[master], queue)) == 1, "one mirror")
    before = mirror_nodes(nodes[master], queue)
    control.kill(before[0])
    wait_for(lambda: mirror_nodes(nodes[master], queue) not in ([], before),
             "a replacement mirror")
    return ReplacementOutcome(before, mirror_nodes(nodes[master], queue), before[0])


def repeated_double_kills(nodes: Mapping[str, NodeAccess], control: ProcessControl, *,
                          publisher: str, rounds: int = 3, per_round: int = 150,
                          queue: str = "ha.many") -> ConfirmsOutcome:
    """many-node-kill: on five nodes, kill the master and one more node at a time while
    a publisher confirms on a node that stays up; restart them and go again. Every
    confirmed message must be drained at the end."""
    names = sorted(nodes)
    declare_mirrored(nodes, names[0], queue)
    publishing = ConfirmingPublisher(nodes[publisher].amqp_url, queue)
    for round_ in range(rounds):
        master = str(queue_info(nodes[publisher], queue)["node"])
        victims = [master, next(n for n in names if n not in (master, publisher))]
        for i in range(per_round):
            if i == per_round // 3:
                for victim in victims:
                    control.kill(victim)
            publishing.publish(f"r{round_}-{i}".encode())
        for victim in victims:
            control.start(victim)
    publishing.close()
    drained = Deliveries()
    _drain_into(nodes[publisher].amqp_url, queue, drained, idle=0.5)
    return ConfirmsOutcome(publishing.published, publishing.confirmed, drained,
                           publishing.longest_gap)


@dataclass
class RestartOutcome:
    """A whole cluster stopped node by node and started again, last stopped first."""

    stop_order: list[str]
    published: int
    after_restart: int | None
    master_after: str

    def problems(self) -> list[str]:
        out = []
        if self.after_restart != self.published:
            out.append(f"{self.after_restart} messages after the restart, expected all "
                       f"{self.published}")
        if self.master_after != self.stop_order[-1]:
            out.append(f"master {self.master_after} after the restart, expected "
                       f"{self.stop_order[-1]}, the last node stopped")
        return out


def full_cluster_restart(nodes: Mapping[str, NodeAccess], control: ProcessControl, *,
                         queue: str = "ha.restart", batch: int = 40) -> RestartOutcome:
    """Stop every node gracefully in name order, publishing a batch through the
    survivors before each stop, so that only the last node stopped holds every batch;
    then start the last one first and the rest after it. It must come back as the
    master with every message."""
    order = sorted(nodes)
    declare_mirrored(nodes, order[0], queue)
    published = 0
    for i, node in enumerate(order):
        bodies = [f"b{i}-{j}".encode() for j in range(batch)]
        publish(nodes[node], queue, bodies)
        published += len(bodies)
        control.stop(node, timeout=10.0)
    for node in reversed(order):
        control.start(node)
    last = nodes[order[-1]]
    return RestartOutcome(order, published, message_count(last, queue),
                          str(queue_info(last, queue)["node"]))
