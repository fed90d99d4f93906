"""Planted bugs: switches (``--break NAME``, repeatable) that run a node deliberately
broken in one guarantee, to show that the harness catches a broker that breaks it.

Each switch names the guarantee it breaks and the violation kinds the harness's checker
must then report (docs/planted-bugs.md lists them with the faults that expose them).
Switches are decided once at start-up into a `Breaks` value of booleans that the code
implementing each guarantee reads; a correct node has every one False.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

# What the checker reports (docs/history-format.md, results.json ``violations[].kind``).
VIOLATION_KINDS = frozenset({
    "lost", "lost-unacked", "duplicate", "resurrected", "reordered", "cancel-missing",
    "cancel-unexpected", "stalled", "overtaken", "split-brain", "disagreement",
    "wrong-promotion", "undeleted", "under-replicated", "over-replicated",
    "node-unavailable", "autoheal-wrong-side", "unanswered", "unexpected", "over-prefetch",
    "corrupted", "unreturned", "rule-broken",
})


# Where the rule-broken bugs show (harness/workload/rules.py).
_PROBER = "the rule prober (gauntlet-ops) asking, on connections to its own node and another"


@dataclass(frozen=True)
class Breakage:
    name: str
    breaks: str  # the guarantee, in one line
    violations: tuple[str, ...]  # what the checker must report when it shows
    exposed_by: str  # the kind of fault that exposes it


CATALOGUE: dict[str, Breakage] = {b.name: b for b in (
    Breakage("early-confirm", "confirms wait for this node's disk only, not the mirrors",
             ("lost",), "master killed just after confirming"),
    Breakage("transient-early-confirm",
             "a transient message is confirmed once the master has it (nothing to wait for "
             "on disk), not once every mirror holds it in memory", ("lost",),
             "transient messages among persistent ones; every link into the youngest "
             "mirror black-holed, then the master and its eldest mirror killed at once"),
    Breakage("confirm-one-mirror",
             "a confirm (or tx.commit-ok) is sent once any one other replica has the "
             "message, not every one", ("lost",),
             "every link into the youngest mirror black-holed, then the master and its "
             "eldest mirror killed at once (the youngest is promoted)"),
    Breakage("early-tx-commit",
             "tx.commit-ok is sent before every mirror has the transaction's messages",
             ("lost",), "master killed just after a commit"),
    Breakage("confirm-waits-for-dead",
             "a publish in flight when a replica goes (its node dies, or the policy drops "
             "it) keeps waiting for that replica: its confirm, and every later one of its "
             "channel, never comes", ("unanswered",),
             "a node killed while publishers on other nodes confirm, healed well before "
             "they give up on the confirm"),
    Breakage("youngest-promoted",
             "on master failure the youngest surviving mirror is promoted, not the eldest",
             ("wrong-promotion", "lost"), "master killed while two or more mirrors survive"),
    Breakage("no-requeue-on-promotion",
             "the promoted mirror does not requeue the old master's unacknowledged deliveries",
             ("overtaken", "lost-unacked"),
             "master cut off from a consumer's node, then killed, while deliveries to that "
             "consumer are in flight (they stay pending for a channel that never got them)"),
    Breakage("tx-rollback-kept",
             "tx.rollback keeps the transaction's publishes: the channel's next commit "
             "publishes them after all", ("unexpected",),
             "a transaction rolled back, then another committed on the same channel"),
    Breakage("recover-drops",
             "basic.recover (requeue=true) drops the channel's unacknowledged deliveries "
             "as if they were acked, instead of requeuing them", ("lost-unacked",),
             "basic.recover on a channel with unacknowledged deliveries"),
    Breakage("no-requeue-on-close",
             "a channel (or connection) that closes with unacknowledged deliveries gives "
             "none back: they stay pending until a promotion requeues them",
             ("overtaken",),
             "a consumer closing its connection with unacked deliveries while later "
             "messages keep flowing"),
    Breakage("unflagged-redelivery",
             "every delivery says redelivered=false, even after a requeue",
             ("duplicate",), "any kill or connection loss with unacked deliveries"),
    Breakage("no-failover-cancel",
             "consumers with x-cancel-on-ha-failover get no basic.cancel on failover",
             ("cancel-missing",), "master killed or stopped, consumers on other nodes"),
    Breakage("cancel-all-on-failover",
             "consumers without x-cancel-on-ha-failover are cancelled on failover too",
             ("cancel-unexpected",), "master killed or stopped, consumers on other nodes"),
    Breakage("instant-sync",
             "a new or rejoining mirror is reported synchronised at once, holding nothing "
             "older than its join",
             ("lost", "disagreement"), "a node restarted, then the master killed"),
    Breakage("sync-noop",
             "a sync marks mirrors synchronised without copying the messages",
             ("lost", "disagreement"), "sync_queue (or ha-sync-mode automatic) after a "
             "restart, then the master killed"),
    Breakage("cancelled-sync-counts",
             "cancel_sync_queue marks the mirrors synchronised, as if the sync had finished",
             ("disagreement", "lost"), "a sync cancelled while it copies, then the cluster "
             "asked (or the master killed)"),
    Breakage("unsynced-handover",
             "a policy that no longer wants the master's node hands the queue over at once, "
             "to a mirror that is not synchronised", ("lost",),
             "a policy change to ha-mode nodes without the master's node while its mirrors "
             "are unsynchronised"),
    Breakage("shutdown-promotes-unsynced",
             "ha-promote-on-shutdown when-synced (the default) is ignored",
             ("lost",), "a mirror restarted, then the master stopped gracefully"),
    Breakage("failure-promotes-unsynced",
             "ha-promote-on-failure when-synced is ignored",
             ("lost",), "a mirror restarted, then the master killed (when-synced policy)"),
    Breakage("rejoin-keeps-contents",
             "a rejoining mirror keeps what it recovered instead of starting empty",
             ("resurrected", "duplicate", "disagreement"),
             "a mirror node restarted after acks, then the master killed"),
    Breakage("requeue-at-tail",
             "requeued messages go to the back of the queue, not their original position",
             ("reordered",), "nack/reject with requeue, a closed channel, a killed consumer"),
    Breakage("no-gm-takeover",
             "when a GM member dies its neighbour does not re-send what it may not have "
             "passed on", ("resurrected", "lost", "disagreement"),
             "a mirror killed while the master's changes pass through it"),
    Breakage("gm-reorder",
             "mirrors apply neighbouring publishes in swapped order, not the GM total order",
             ("reordered", "disagreement"), "master killed with messages ready"),
    Breakage("acks-not-replicated",
             "acks (and nacks or rejects without requeue) on the master are never broadcast "
             "to the mirrors",
             ("resurrected", "disagreement"), "master killed after consumers acked"),
    Breakage("no-ack-not-replicated",
             "deliveries to no-ack consumers (settled as they are sent) are never "
             "broadcast to the mirrors, which keep those messages",
             ("resurrected", "duplicate"),
             "the master stopped or killed well after no-ack consumers were served"),
    Breakage("multiple-ack-last-only",
             "of an ack that settles several deliveries at once (basic.ack multiple=true), "
             "only the last reaches the mirrors", ("resurrected", "disagreement"),
             "master killed after a consumer acked with multiple=true"),
    Breakage("purge-not-replicated",
             "queue.purge empties the master only: the purge is never broadcast to the "
             "mirrors", ("resurrected",),
             "a purge of a queue with mirrors, then a mirror promoted (a kill of the master, "
             "or the drain by promotion)"),
    Breakage("bindings-not-replicated",
             "a binding made on another node never takes effect here: publishes through "
             "this node's exchanges do not reach that queue (unroutable, so confirmed and "
             "dropped)", ("lost",),
             "publishes routed through a declared exchange by a node other than the one "
             "that bound the queue"),
    Breakage("unbind-not-replicated",
             "a binding removed on another node stays here: publishes through this node's "
             "exchanges still reach that queue", ("unreturned", "unexpected"),
             "mandatory publishes, by a node other than the one that unbound the queue, to "
             "a routing key whose binding was removed before the workload started"),
    Breakage("drop-held-publishes",
             "on promotion, publishes a mirror held but the old master never ordered are "
             "dropped (and confirmed) instead of enqueued",
             ("lost", "unanswered"),
             "the eldest mirror killed, then the master under publish load from the other "
             "node, where a lone node keeps running (autoheal)"),
    Breakage("no-fsync", "persistent messages are confirmed without the fsync",
             ("lost",), "a power loss (the power-loss fault: SIGKILL, then every write not "
             "fsynced is lost, on lazyfs); a plain kill leaves the page cache"),
    Breakage("pause-minority-ignored",
             "under pause_minority a node in a minority keeps running",
             ("split-brain", "lost", "under-replicated"),
             "a partition that isolates a minority"),
    Breakage("pause-never-resumes",
             "under pause_minority a paused node stays paused after the partition heals",
             ("node-unavailable",),
             "a partition that pauses a minority, healed, and the cluster asked once "
             "every fault healed"),
    Breakage("no-remirror",
             "a node that comes back is not made a mirror again (until a promotion or a "
             "policy change places the queue's mirrors anew)", ("under-replicated",),
             "a node restarted, and no master change before the cluster is asked"),
    Breakage("no-spare-mirror",
             "under ha-mode exactly, a mirror that dies is not replaced on a spare node",
             ("under-replicated",),
             "a mirror killed under ha-mode exactly with a node to spare, and the cluster "
             "asked before it comes back"),
    Breakage("keeps-unwanted-mirrors",
             "a policy that wants fewer replicas drops none of the mirrors it no longer "
             "covers", ("over-replicated",),
             "a set-policy to ha-mode exactly with fewer replicas than running nodes, then "
             "the cluster asked"),
    Breakage("policy-priority-inverted",
             "of the policies whose pattern matches a queue, the one with the lowest "
             "priority applies, not the highest", ("under-replicated",),
             "a policy of lower priority on the same queues that mirrors less (the run's "
             "decoy), and the cluster asked once every fault healed"),
    Breakage("mirrors-exclusive",
             "an exclusive queue becomes a cluster queue like any other, mirrored by the "
             "policy", ("over-replicated",),
             "an exclusive queue declared under a mirroring policy (the churner's every "
             "other queue), and the cluster asked"),
    Breakage("forget-deletions",
             "a deleted record (a queue, an exchange, a binding, ...) leaves no tombstone, "
             "so a node that missed the delete brings it back", ("undeleted",),
             "a node down while the workload deletes queues, then started again"),
    Breakage("autoheal-no-restart",
             "under autoheal the losing side is not restarted after the heal",
             ("split-brain",), "a partition, then its heal, and the nodes asked once "
             "they should agree again (before any later restart mends it)"),
    Breakage("autoheal-wrong-winner",
             "under autoheal the bigger side restarts after the heal, not the smaller, "
             "dropping what the side that should win confirmed",
             ("autoheal-wrong-side", "lost"),
             "a partition that cuts one node off, long enough to be detected, under "
             "publish load on the other side, then its heal"),
    Breakage("boot-no-wait",
             "a node starting after the whole cluster stopped does not wait for the peers "
             "that outlived it (the last to stop is the master): it serves what its own "
             "disk holds at once", ("lost", "resurrected"),
             "every node stopped one at a time, then started in the order they stopped"),
    Breakage("credit-forgets-held",
             "after a failover a channel grants the new master credit for its consumers' "
             "whole prefetch again, forgetting the deliveries they still hold from the "
             "old one: they get more than their prefetch", ("over-prefetch",),
             "master killed while consumers on other nodes hold deliveries"),
    Breakage("sync-drops-properties",
             "a mirror keeps only the body of each message a sync copies to it: the "
             "message's properties (its id, headers, delivery mode) are gone",
             ("corrupted",),
             "a mirror restarted and synchronised while messages are queued, then "
             "promoted"),
    Breakage("stale-proof-of-life",
             "asked whether it still hears a peer another node lost, a node answers from "
             "its own view (the peer is up to it) instead of checking that it lives now: "
             "news it reads late passes for life, and a partial partition is declared "
             "on a dead node", ("split-brain",),
             "a node reading the master late (a latency below failure detection on the "
             "master's link to it), then the master killed (ignore partition handling: "
             "the split lasts)"),
    Breakage("forget-no-promotion",
             "forget_cluster_node of a stopped node leaves the queues it mastered to "
             "ha-promote-on-shutdown, as any loss of the node: under when-synced they stay "
             "on it, unavailable, instead of promoting their eldest mirror", ("disagreement",),
             "a master forgotten while no mirror is synchronised, then the cluster asked "
             "before it starts again"),
    Breakage("no-ack-get-unsettled",
             "a basic.get with no_ack is taken by the queue as one awaiting an ack: the "
             "client has it settled, the queue holds it for the getter's channel, and a "
             "failover gives it again", ("resurrected",),
             "no-ack basic.get pollers, then the queue's master killed"),
    Breakage("topic-hash-needs-a-word",
             "a topic binding's # matches one or more words, not zero: a routing key that "
             "is the binding's words alone goes nowhere (unroutable, so confirmed and "
             "dropped)", ("lost",),
             "publishes through a topic exchange whose routing key is exactly the words "
             "before a binding's trailing #"),
    Breakage("fanout-one-queue",
             "a fanout exchange routes each message to one of the queues it binds (the "
             "first by name), not to every one: the others never get it", ("lost",),
             "publishes through a fanout exchange bound to two queues, each copy drained"),
    Breakage("direct-one-queue",
             "a direct exchange routes each message to one of the queues bound by its "
             "routing key (the first by name), not to every one: the others never get it",
             ("lost",),
             "publishes through a direct exchange that binds two queues by the same key, "
             "each copy drained"),
    Breakage("mandatory-ignored",
             "a mandatory publish that no queue takes is dropped and confirmed without a "
             "basic.return", ("unreturned",),
             "a mandatory publish to a routing key no queue has"),
    Breakage("exclusive-consumer-ignored",
             "basic.consume ignores exclusivity: a consumer joins a queue that has an "
             "exclusive one, and an exclusive one joins a queue that has consumers",
             ("rule-broken",), f"{_PROBER}, for a consumer beside an exclusive one"),
    Breakage("delete-ignores-if-empty",
             "queue.delete with if_empty deletes a queue that holds messages",
             ("rule-broken",), f"{_PROBER}, for the delete of a queue holding a message"),
    Breakage("delete-ignores-if-unused",
             "queue.delete with if_unused deletes a queue that has consumers",
             ("rule-broken",), f"{_PROBER}, for the delete of a queue with a consumer"),
    Breakage("auto-delete-kept",
             "an auto-delete queue is never deleted when its last consumer goes",
             ("rule-broken",),
             f"{_PROBER}, for an auto-delete queue once its last consumer cancelled"),
    Breakage("auto-delete-per-node",
             "an auto-delete queue is deleted when the consumers of one node are all gone, "
             "though consumers on other nodes remain",
             ("rule-broken",),
             f"{_PROBER}, for an auto-delete queue once its consumer on the queue's node "
             "cancelled while one on another node remains"),
    Breakage("exclusive-queue-shared",
             "an exclusive queue is not locked: other connections may declare, consume "
             "from and get from it",
             ("rule-broken",), f"{_PROBER}, for a consume of another connection's "
             "exclusive queue"),
)}


@dataclass(frozen=True)
class Breaks:
    """Which planted bugs a node runs with: one flag per `CATALOGUE` entry (its name with
    underscores), read where the guarantee is implemented."""

    early_confirm: bool = False
    transient_early_confirm: bool = False
    confirm_one_mirror: bool = False
    early_tx_commit: bool = False
    confirm_waits_for_dead: bool = False
    youngest_promoted: bool = False
    no_requeue_on_promotion: bool = False
    tx_rollback_kept: bool = False
    recover_drops: bool = False
    no_requeue_on_close: bool = False
    unflagged_redelivery: bool = False
    no_failover_cancel: bool = False
    cancel_all_on_failover: bool = False
    instant_sync: bool = False
    sync_noop: bool = False
    cancelled_sync_counts: bool = False
    unsynced_handover: bool = False
    shutdown_promotes_unsynced: bool = False
    failure_promotes_unsynced: bool = False
    rejoin_keeps_contents: bool = False
    requeue_at_tail: bool = False
    no_gm_takeover: bool = False
    gm_reorder: bool = False
    acks_not_replicated: bool = False
    no_ack_not_replicated: bool = False
    multiple_ack_last_only: bool = False
    purge_not_replicated: bool = False
    bindings_not_replicated: bool = False
    unbind_not_replicated: bool = False
    drop_held_publishes: bool = False
    no_fsync: bool = False
    pause_minority_ignored: bool = False
    pause_never_resumes: bool = False
    no_remirror: bool = False
    no_spare_mirror: bool = False
    keeps_unwanted_mirrors: bool = False
    policy_priority_inverted: bool = False
    mirrors_exclusive: bool = False
    forget_deletions: bool = False
    autoheal_no_restart: bool = False
    autoheal_wrong_winner: bool = False
    boot_no_wait: bool = False
    credit_forgets_held: bool = False
    sync_drops_properties: bool = False
    stale_proof_of_life: bool = False
    forget_no_promotion: bool = False
    no_ack_get_unsettled: bool = False
    topic_hash_needs_a_word: bool = False
    fanout_one_queue: bool = False
    direct_one_queue: bool = False
    mandatory_ignored: bool = False
    exclusive_consumer_ignored: bool = False
    delete_ignores_if_empty: bool = False
    delete_ignores_if_unused: bool = False
    auto_delete_kept: bool = False
    auto_delete_per_node: bool = False
    exclusive_queue_shared: bool = False

    @classmethod
    def of(cls, names: list[str] | tuple[str, ...]) -> Breaks:
        unknown = sorted(set(names) - set(CATALOGUE))
        if unknown:
            raise ValueError(f"unknown breakage {unknown[0]!r} "
                             f"(expected one of {', '.join(sorted(CATALOGUE))})")
        return cls(**{name.replace("-", "_"): True for name in names})

    @property
    def names(self) -> list[str]:
        return [f.name.replace("_", "-") for f in fields(self) if getattr(self, f.name)]


CORRECT = Breaks()  # a node with no planted bug
