"""N brokers with their cluster coordinators on a simulated network, no sockets.

Each directed link is a FIFO of encoded envelopes (as TCP keeps order); a seeded
random choice of link decides which message moves next, so runs interleave
differently per seed and replay exactly. Killing a node drops everything in flight
to and from it and tells the others it is down; restarting it starts a new incarnation
with what a store would have recovered of its durable queues.
"""

from __future__ import annotations

import random
from collections import Counter, deque
from itertools import permutations

from cluster.breakages import Breaks
from cluster.core.broker import BrokerConfig
from cluster.core.policy import Policy
from cluster.core.queue import Queue
from cluster.core.users import Permission
from cluster.events import NodeEvent
from cluster.ha.coordinator import Coordinator
from cluster.peer.codec import FrameBuffer, encode
from cluster.session.broker import Broker
from tests.amqp.memory_client import FakeClock, MemoryClient


class _NodeReports:
    """One node's event sink: its events join the cluster's list, in emission order."""

    def __init__(self, node: str, reports: list[tuple[str, NodeEvent]]) -> None:
        self.node = node
        self.reports = reports

    def emit(self, event: NodeEvent) -> None:
        self.reports.append((self.node, event))


class SimCluster:
    def __init__(self, names: list[str], seed: int, breaks: tuple[str, ...] = ()) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.clock = FakeClock()
        self.breaks = Breaks.of(breaks)
        # Every event any node emitted, (node, event), in the order they were emitted.
        self.reports: list[tuple[str, NodeEvent]] = []
        self.brokers = {n: self._broker(n, f"i{seed}") for n in names}
        self.coordinators = {
            n: Coordinator(b, n, f"i{seed}", [p for p in names if p != n])
            for n, b in self.brokers.items()}
        self.incarnations = dict.fromkeys(names, f"i{seed}")
        self.alive = set(names)
        self.links: dict[tuple[str, str], deque[bytes]] = {
            pair: deque() for pair in permutations(names, 2)}
        # Envelopes delivered so far, by (source, target, type).
        self.delivered: Counter[tuple[str, str, str]] = Counter()
        for a, b in permutations(names, 2):
            self.coordinators[a].peer_up(b, f"i{seed}")
        self.pump()

    def _broker(self, name: str, incarnation: str) -> Broker:
        # Every run of every node draws its own queue uids, as real nodes do: two
        # records of one queue made apart (recovered masters) never share a uid.
        broker = Broker(BrokerConfig(node_name=name, breaks=self.breaks), clock=self.clock,
                        rng=random.Random(f"{self.seed}/{name}/{incarnation}"),
                        events=_NodeReports(name, self.reports))
        broker.add_user("guest", "guest", ["administrator"])
        broker.set_permissions("guest", "/", Permission())
        return broker

    def client(self, node: str) -> MemoryClient:
        client = MemoryClient(self.brokers[node])
        client.handshake()
        client.open_channel()
        self.pump()
        client.drain()
        return client

    def set_policy(self, node: str, pattern: str, definition: dict[str, object]) -> None:
        self.brokers[node].set_policy(Policy.create("/", "ha", pattern, definition))
        self.brokers[node].after_input()
        self.pump()

    def _collect(self) -> None:
        for name in self.alive:
            for peer, envelope in self.coordinators[name].take_outbox():
                if peer in self.alive:
                    self.links[(name, peer)].append(encode(envelope))

    def busy(self) -> list[tuple[str, str]]:
        """The links with messages in flight."""
        self._collect()
        return [pair for pair, queue in self.links.items() if queue]

    def step(self) -> bool:
        """Move one message on a random busy link; False when nothing is in flight."""
        busy = self.busy()
        if not busy:
            return False
        self.move(*self.rng.choice(busy))
        return True

    def move(self, source: str, target: str, count: int = 1) -> None:
        """Deliver the next ``count`` messages on one link as one read: the target's
        after_input runs once after them all, as a live node's does per read."""
        self._collect()
        for _ in range(count):
            data = self.links[(source, target)].popleft()
            (envelope,) = FrameBuffer().feed(data)
            self.delivered[(source, target, envelope.type)] += 1
            self.coordinators[target].received(source, envelope)
        self.brokers[target].after_input()

    def pump(self, limit: int = 100_000) -> None:
        for _ in range(limit):
            if not self.step():
                return
        raise AssertionError("the cluster never went quiet")

    def kill(self, node: str) -> None:
        self.alive.discard(node)
        for pair in self.links:
            if node in pair:
                self.links[pair].clear()
        for other in self.alive:
            self.coordinators[other].peer_down(node)
            self.brokers[other].after_input()

    def power_loss(self) -> None:
        """Every node dies at once: none hears of another's death."""
        self.alive.clear()
        for queue in self.links.values():
            queue.clear()

    def restart(self, node: str, *, seen_by: list[str] | None = None,
                starting: tuple[str, ...] = (), pump: bool = True) -> None:
        """Start a killed node again, as a new incarnation holding what its store would
        have recovered: every message its replica of each durable queue held (acked or
        not, as the store cannot tell an ack that was not yet written), and each
        queue's succession as its definitions file last saved it. Only the peers in
        ``seen_by`` (default all) notice it now; tell the others later with `seen`.
        ``starting`` are killed peers it sees up, their apps yet to start (the whole
        cluster restarts), which `restart` starts later."""
        old = self.brokers[node]
        successions = self.coordinators[node].successions()
        incarnation = self.incarnations[node] = f"{self.incarnations[node]}+"
        broker = self.brokers[node] = self._broker(node, incarnation)
        peers = [p for p in self.brokers if p != node]
        coordinator = self.coordinators[node] = Coordinator(broker, node, incarnation, peers)
        for vhost in old.vhosts.values():
            host = broker.add_vhost(vhost.name)
            for name, queue in vhost.queues.items():
                copy = getattr(queue, "copy", None)
                if not queue.durable or copy is None:
                    continue
                recovered = Queue(vhost.name, name, durable=True, arguments=queue.arguments,
                                  requeue_at_tail=self.breaks.requeue_at_tail)
                recovered.restore((e.seq, e.message) for e in copy.held(0, copy.next_seq))
                succession = successions.get(vhost.name, {}).get(name, [])
                host.add_queue(coordinator.restored(recovered, succession))
        self.alive.add(node)
        for other in self.alive - {node} if seen_by is None else seen_by:
            self.seen(other, node)
        coordinator.join({other: self.incarnations[other] for other in self.alive - {node}},
                         frozenset(starting))
        if pump:
            self.pump()

    def seen(self, observer: str, node: str) -> None:
        """``observer`` notices that ``node``'s current incarnation runs."""
        self.coordinators[observer].peer_up(node, self.incarnations[node])
