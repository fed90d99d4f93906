"""What a run's clients do: the mix of clients, their rates, and how they pick nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ClientNodes = Literal["master", "spread"]
Reconnect = Literal["same", "next"]
ExchangeType = Literal["direct", "topic"]
PUBLISHING = ("publisher", "tx-publisher", "fanout-publisher")  # the client kinds that publish
BACKLOG_READERS = ("purger", "no-ack-getter")  # the client kinds of backlog queues
CHURN_PREFIX = "churn."  # the queues churners declare and delete
UNROUTABLE_KEY = "mirrorchaos.unroutable"  # no queue has this name, nor a binding after set-up
FANOUT_EXCHANGE = "mirrorchaos.fanout"  # the fanout publishers' exchanges: this one,
EVERY_QUEUE_EXCHANGE = "mirrorchaos.direct"  # and this direct one, which binds every
EVERY_QUEUE_KEY = "mirrorchaos.every-queue"  # queue by this one key


@dataclass(frozen=True)
class WorkloadSpec:
    queues: tuple[str, ...] = ("q1",)
    publishers: int = 2  # confirming publishers (p1, p2, ...)
    consumers: int = 2  # manual-ack consumers (c1, ...)
    no_ack_consumers: int = 0  # (a1, ...)
    getters: int = 0  # basic.get pollers (g1, ...)
    # basic.get pollers with no_ack (h1, ...): settled as sent. They poll the backlog
    # queues, which no consumer empties first, so their gets find messages waiting.
    no_ack_getters: int = 0
    tx_publishers: int = 0  # transactional publishers (t1, ...)
    rate: float = 50.0  # messages per second per publisher
    window: int = 50  # unconfirmed publishes per publisher
    # Every N-th message of each publisher (0: none) is padded to ``large_size`` bytes,
    # past one frame: bodies in several frames through the store, the mirrors, syncs and
    # promotions, checked whole on delivery like every message (workload/content.py).
    large_every: int = 0
    large_size: int = 200_000
    # Every N-th message of each publisher (0: none) is transient though ``persistent``
    # is set: held in memory only, by the master and its mirrors, and confirmed once
    # every replica has it all the same.
    transient_every: int = 0
    # The first N publishers (p1, ...) publish every message transient: a confirm held
    # back for a persistent publish cannot hide an early one of a transient publish
    # behind it (a channel's confirms go out in order).
    transient_publishers: int = 0
    # After every N-th message (0: none) each publisher also publishes a mandatory probe
    # that no queue can take (routing key `UNROUTABLE_KEY`): the broker must return it
    # (basic.return) before its confirm, whatever the faults. With an exchange, set-up
    # binds that key to every queue and unbinds it again (harness/run/setup.py).
    unroutable_every: int = 0
    prefetch: int = 20
    # Seconds a consumer holds each delivery before acking it: messages are in flight
    # (unacknowledged) when a fault strikes, so failovers requeue and redeliver them.
    ack_delay: float = 0.0
    get_rate: float = 20.0  # basic.get calls per second per poller
    tx_batch: int = 5  # messages per transaction
    # Every N-th transaction is rolled back (0: none): its messages must never arrive.
    tx_rollback_every: int = 0
    persistent: bool = True
    durable: bool = True
    confirm_timeout: float = 10.0  # seconds before a confirm counts as unknown
    # "master": every client talks to its queue's home node; "spread": round robin.
    client_nodes: ClientNodes = "master"
    # After a lost connection: the same node again, or the next one in the cluster.
    reconnect: Reconnect = "same"
    # Least seconds between two connect attempts of a client: a session that lived
    # longer reconnects at once, a failed attempt waits out the rest.
    reconnect_delay: float = 0.5
    heartbeat: int = 5  # seconds; a black-holed connection is noticed within ~2 of these
    cancel_on_failover: bool = False  # the plain consumers ask for x-cancel-on-ha-failover
    # Consumers (prefetch 1) that nack or reject every third delivery, mostly with
    # requeue, so a requeued message must come back before the messages queued behind
    # it, and a rejected one never again (r1, ...).
    requeuers: int = 0
    # Consumers that close their connection at every tenth delivery, holding it and
    # whatever else they had unacked, and come back: the broker must requeue it (l1, ...).
    leavers: int = 0
    # Consumers (prefetch 1) that answer every third delivery with basic.recover
    # (requeue=true): the broker must give it back (v1, ...).
    recoverers: int = 0
    # Consumers that ask for x-cancel-on-ha-failover beside the plain ones (x1, ...).
    cancel_consumers: int = 0
    # Consumers that ack in pairs, one basic.ack with multiple=true for two deliveries
    # (m1, ...): every message it covers must be settled on every replica.
    multiple_ackers: int = 0
    # Queues (also in ``queues``) that no consumer uses, only publishers, purgers and
    # no-ack getters: they keep a backlog until the final drain.
    backlog_queues: tuple[str, ...] = ()
    # Clients that declare durable queues of their own and delete them again, over and
    # over (k1, ...): a deleted queue must stay deleted on every node, also on one that
    # was down when it went. Their queues are named ``CHURN_PREFIX<id>.<n>``.
    churners: int = 0
    churn_rate: float = 2.0  # queues declared per second per churner
    churn_keep: int = 6  # queues a churner keeps: each is deleted once this many are newer
    # Clients that purge a backlog queue every ``purge_interval`` seconds while the
    # publishers run (u1, ...): a purged message must never come back, also not from a
    # mirror promoted later (the master broadcasts the purge).
    purgers: int = 0
    purge_interval: float = 2.0
    # Clients that ask, from their own node and from another, for what the broker must
    # refuse (queue.delete if_empty or if_unused, a consumer beside an exclusive one,
    # another connection's exclusive queue) and for what it must do (an auto-delete
    # queue kept while a consumer is left, deleted with the last), on queues of their
    # own, a cycle every ``rule_interval`` seconds (e1, ...; harness/workload/rules.py).
    rule_probers: int = 0
    rule_interval: float = 1.0
    # A durable exchange the publishers route through (None: the default exchange):
    # bindings are cluster metadata every node must hold, also one that restarted. A
    # direct one binds each queue by its own name; a topic one by "<queue>.#", and each
    # message's routing key has zero, one or two words after the queue's name
    # (workload/content.py), so # must match any number of words.
    exchange: str | None = None
    exchange_type: ExchangeType = "direct"
    # Publishers (f1, ...) whose every message must reach every queue: in turn through a
    # durable fanout exchange bound to every queue, whatever its routing key (a message's
    # own id, which no binding names), and through a durable direct exchange that binds
    # every queue by one key. The checker judges each queue's copy as a message of its
    # own (docs/history-format.md, "Fanout").
    fanout_publishers: int = 0

    def client_ids(self) -> dict[str, list[str]]:
        """Client kind -> ids, one logical process each; ids are message-id prefixes."""
        counts = {"publisher": (self.publishers, "p"), "consumer": (self.consumers, "c"),
                  "no-ack-consumer": (self.no_ack_consumers, "a"),
                  "getter": (self.getters, "g"), "no-ack-getter": (self.no_ack_getters, "h"),
                  "tx-publisher": (self.tx_publishers, "t"),
                  "fanout-publisher": (self.fanout_publishers, "f"),
                  "requeuer": (self.requeuers, "r"), "recoverer": (self.recoverers, "v"),
                  "leaver": (self.leavers, "l"),
                  "cancel-consumer": (self.cancel_consumers, "x"),
                  "multiple-acker": (self.multiple_ackers, "m"),
                  "churner": (self.churners, "k"), "purger": (self.purgers, "u"),
                  "rule-prober": (self.rule_probers, "e")}
        return {kind: [f"{prefix}{i}" for i in range(1, count + 1)]
                for kind, (count, prefix) in counts.items()}

    def fanout_routes(self) -> dict[str, list[str]]:
        """Fanout publisher -> the queues its messages go to (a history's
        ``config.fanout``)."""
        return {client_id: list(self.queues)
                for client_id in self.client_ids()["fanout-publisher"]}

    def client_queues(self) -> dict[str, str]:
        """Client id -> its queue: each kind round robin over the queues it may use
        (publishers over every queue, purgers and no-ack getters over the backlog queues,
        the other kinds over those without a backlog)."""
        consumed = [q for q in self.queues if q not in self.backlog_queues]
        backlog = [q for q in self.queues if q in self.backlog_queues]
        out: dict[str, str] = {}
        for kind, ids in self.client_ids().items():
            queues = (list(self.queues) if kind in PUBLISHING
                      else backlog if kind in BACKLOG_READERS else consumed)
            if ids and not queues:
                wanted = ("a backlog queue" if kind in BACKLOG_READERS
                          else "a queue that is not a backlog queue")
                raise ValueError(f"{kind} clients need {wanted}")
            out.update((client_id, queues[i % len(queues)]) for i, client_id in enumerate(ids))
        return out
