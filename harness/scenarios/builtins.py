"""The built-in scenarios: RabbitMQ's HA suites' cases, Jepsen-style
partitions, process and network faults, and the combined soak default."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from harness.scenarios.model import NemesisSpec, Phases, Scenario
from harness.scenarios.nemesis import MASTER_TO_YOUNGEST, SETTLED_STATE, TO_YOUNGEST
from harness.workload.spec import WorkloadSpec

# Confirms, then the final drain. A publisher on each node, so some publish to the
# master through mirrors (as RabbitMQ's suite publishes while it kills the master); one
# that loses its node follows the failover to the next, as an application with the
# cluster's addresses does.
_PUBLISH_ONLY = WorkloadSpec(publishers=3, consumers=0, client_nodes="spread",
                             reconnect="next")
# As RabbitMQ's own HA suite runs its "survive" cases: a mirror restarted by one fault
# is synchronised before the next, so every confirmed message survives however many
# faults the time limit holds (under manual sync the third kill may promote an empty
# mirror, the design's documented loss).
_SURVIVE_POLICY = {"ha-mode": "all", "ha-sync-mode": "automatic"}
# Consumers on every node that hold each message a while: a failover finds messages
# unacknowledged, which must come back flagged redelivered.
_CONSUME = WorkloadSpec(publishers=2, consumers=3, prefetch=10, ack_delay=0.2,
                        client_nodes="spread")


# The detection campaign's workload: a consumed queue that still builds a backlog
# (publishers, one of them transactional, outrun the consumers), consumers with and
# without x-cancel-on-ha-failover, one acking in pairs with basic.ack multiple=true, a
# requeuer, a basic.get poller, a publish-only backlog queue, and a churner declaring
# and deleting queues of its own. Clients start
# spread over every node (a publisher and a plain consumer on each), so some publish to
# the master through mirrors, some consumers outlive each master, and the youngest
# mirror's node has a consumer when the master's link to it is cut.
_GAUNTLET = WorkloadSpec(queues=("q1", "q2"), backlog_queues=("q2",), publishers=3,
                         tx_publishers=1, consumers=3, cancel_consumers=2,
                         multiple_ackers=1, requeuers=1,
                         getters=1, churners=1, rate=60.0, prefetch=5, ack_delay=0.2,
                         client_nodes="spread", reconnect="next")
# The master's other broadcasts and the cluster's metadata: a purger empties the
# backlog queue every 2 s, and every publish goes through a durable topic exchange, so
# each node (also one restarted) must hold the bindings to route it, and match keys of
# zero, one or two words past the queue's name against its "<queue>.#". The transactional
# publisher rolls back every third transaction (never to be delivered); a recoverer
# gives deliveries back with basic.recover and a leaver by closing its connection (they
# must come again, at their place). A fanout publisher's every message must reach both
# queues: through a fanout exchange whatever its routing key, or through a direct one
# that binds both by the same key. The publishers' mandatory probes go through the
# topic exchange to a key both queues were bound by and unbound from at set-up, so every
# node must forget a binding removed (and return them). A rule prober asks, from its
# node and another, for what the broker must refuse or do with queue.delete's
# conditions, exclusive consumers and queues, and auto-delete queues.
_OPS = WorkloadSpec(queues=("q1", "q2"), backlog_queues=("q2",), publishers=2,
                    fanout_publishers=1, tx_publishers=1, tx_rollback_every=3, consumers=2,
                    unroutable_every=10, rule_probers=1,
                    recoverers=1, leavers=1, purgers=1, purge_interval=2.0,
                    exchange="mirrorchaos.topic", exchange_type="topic", rate=60.0, prefetch=5,
                    ack_delay=0.2,
                    client_nodes="spread", reconnect="next")
# Publishers and consumers on every node, for a confirm that must span every replica,
# whether a message is held on disk or in memory only. A broker confirms a channel's
# publishes in order, so a transient message confirmed too early shows only when no
# earlier publish of its channel still waits for the youngest mirror, cut off: p1 and
# p2 (on two nodes, so one is not the youngest's, whose own direct copies survive its
# promotion) publish transient messages only, p3 and p4 every other one (with every
# other message transient, transient-early-confirm still passed seed 1).
_REPLICAS = WorkloadSpec(queues=("q1", "q2"), backlog_queues=("q2",), publishers=4,
                         transient_publishers=2, consumers=2, rate=60.0, prefetch=5,
                         ack_delay=0.2, transient_every=2, client_nodes="spread",
                         reconnect="next")
# Every tenth message of each publisher a body in two frames: through the store, the
# publishes to mirrors, syncs, promotions and a boot from disk, checked whole (content
# and properties) on every delivery like every other message. The consumers fall behind
# the publishers, so each holds its whole prefetch when the master dies.
_CONTENT = WorkloadSpec(queues=("q1", "q2"), backlog_queues=("q2",), publishers=3,
                        tx_publishers=1, consumers=2, getters=1, rate=20.0, prefetch=5,
                        ack_delay=0.2, large_every=10, unroutable_every=10,
                        client_nodes="spread", reconnect="next")
# No-ack consumers beside a manual-ack one, and a no-ack basic.get poller of a backlog
# queue (one publisher feeds it faster than it polls), in a scenario of their own: the
# no-ack-in-flight caveat excuses any loss from their queue once one of them or the
# master breaks, which in another scenario would hide the losses other bugs cause.
_NO_ACK = WorkloadSpec(queues=("q1", "b1"), backlog_queues=("b1",), publishers=3,
                       no_ack_consumers=2, consumers=1, no_ack_getters=1, rate=60.0,
                       prefetch=5, ack_delay=0.2, client_nodes="spread", reconnect="next")
_PROMOTE_POLICY = {"ha-mode": "all", "ha-sync-mode": "manual",
                   "ha-promote-on-failure": "when-synced"}
_ISOLATE_MASTER = {"kind": "isolate", "node": "master", "mode": "black-hole"}
_ISOLATE_MIRROR = {"kind": "isolate", "node": "mirror", "mode": "black-hole"}
_MASTER = {"nodes": "master"}
# Cut off for less than failure detection takes (4 ticks of 0.5 s): nothing the node
# sends in that time reaches its peers, and then it dies.
_CUT = 0.8


def _step(at: float, f: str, value: Mapping[str, object] | None = None) -> dict[str, object]:
    return {"at": at, "f": f, **({"value": value} if value is not None else {})}


# Half the failure-detection time (4 ticks of 0.5 s): the node reads the master's
# heartbeats late but never misses one.
_LATE_MS = 1000


def _read_late_then_kill(at: float) -> list[dict[str, object]]:
    """The youngest mirror reads what the master sends a second late, then the master is
    killed: the eldest mirror loses it at once and asks the youngest whether it still
    hears it, while the youngest still reads its last heartbeats. Once the nodes agree
    again (or the bound runs out) their views are recorded: under ``ignore`` a false
    partial partition leaves two masters for good."""
    late = {"toxic": "latency", "links": MASTER_TO_YOUNGEST, "stream": "upstream",
            "attributes": {"latency": _LATE_MS, "jitter": 0}}
    return [_step(at, "degrade", late), _step(at + 2.0, "kill", _MASTER),
            _step(at + 4.0, SETTLED_STATE), _step(at + 5.0, "heal")]


def _cut_and_kill(at: float, which: str = "master") -> list[dict[str, object]]:
    isolate = _ISOLATE_MASTER if which == "master" else _ISOLATE_MIRROR
    return [_step(at, "partition", isolate), _step(at + _CUT, "kill", {"nodes": which})]


# Before that cut, the master's link to its youngest mirror alone black-holed (for less
# than failure detection too, counting the cut): acks and credit still reach the master
# from consumers there, so it sends them deliveries that never arrive, while its
# broadcasts still reach the eldest mirror by the other link. The promoted mirror then
# knows those deliveries and must give them back.
_DROP = 0.6


def _drop_cut_and_kill(at: float) -> list[dict[str, object]]:
    return [_step(at, "degrade", {"toxic": "timeout", "links": MASTER_TO_YOUNGEST}),
            *_cut_and_kill(at + _DROP)]


def _youngest_left_behind(at: float) -> list[dict[str, object]]:
    """Every node link into the youngest mirror black-holed (for less than failure
    detection: the publishes and the broadcasts reach the master and the eldest mirror,
    not the youngest), then the master and the eldest mirror killed at once: the
    youngest is the one replica left, and must hold every message that was confirmed."""
    return [_step(at, "degrade", {"toxic": "timeout", "links": TO_YOUNGEST}),
            _step(at + _DROP, "kill", {"nodes": ["master", "mirror"]}),
            _step(at + 3.0, "heal")]


def _last_replica(at: float) -> list[dict[str, object]]:
    """Both queues synchronised, the eldest mirror killed, then the master cut off and
    killed: the one mirror left is promoted as the queue's last replica and must enqueue
    and confirm the publishes it held that the master never ordered. Only where a lone
    node keeps running (not under pause_minority)."""
    return [_step(at, "sync-queue", {"queue": "q2"}),
            _step(at + 0.3, "sync-queue", {"queue": "q1"}),
            _step(at + 0.8, "kill", {"nodes": "mirror"}), *_cut_and_kill(at + 1.3)]


def _syncs(at: float) -> list[dict[str, object]]:
    """Both queues synchronised, half a second apart."""
    return [_step(at, "sync-queue", {"queue": "q1"}),
            _step(at + 0.5, "sync-queue", {"queue": "q2"})]


def _full_restart(at: float) -> list[dict[str, object]]:
    """Every node stopped gracefully one at a time, the master last (it then holds what
    the others missed; under pause_minority it would pause instead), and all started
    again in the order they stopped, 2 s apart: the first to start must wait for the
    last to stop (docs/cluster-design.md)."""
    return [_step(at, "stop", {"nodes": "mirror"}), _step(at + 0.7, "stop", {"nodes": "mirror"}),
            _step(at + 1.4, "stop", _MASTER), _step(at + 2.5, "heal", {"stagger": 2.0})]


# Each step opens the window a broken guarantee needs (docs/planted-bugs.md): the master
# cut off and killed (confirms, commits and acks it had not replicated; deliveries to its
# youngest mirror's consumers lost on the way), again while the
# youngest mirror is empty (which mirror is promoted); a graceful stop while no mirror is
# synchronised (when-synced); syncs, then a kill (what a sync copied); the eldest mirror
# cut off and killed (GM take-over: what it never passed on to the youngest), then the
# master; a sync cancelled while it copies (batches of 16 make it last), then syncs; a
# partition long enough to pause the minority, the nodes that answer asked while it
# lasts (a minority master that kept running shows as a second master), and once it is
# back, the nodes' agreement. The run ends with a drain by promotion and the nodes' agreement.
_GAUNTLET_STEPS = [
    *_drop_cut_and_kill(0.0), _step(3.0, "heal"),
    *_cut_and_kill(8.0), _step(11.0, "heal"),
    _step(16.0, "stop", _MASTER), _step(19.0, "heal"),
    _step(22.0, "sync-queue", {"queue": "q2"}), _step(22.5, "sync-queue", {"queue": "q1"}),
    *_cut_and_kill(25.0, "mirror"), _step(28.0, "heal"),
    *_drop_cut_and_kill(33.0), _step(36.0, "heal"),
    _step(38.0, "sync-queue", {"queue": "q2", "node": "master", "cancel_after": 0.0}),
    _step(39.0, "sync-queue", {"queue": "q2"}), _step(39.5, "sync-queue", {"queue": "q1"}),
    _step(41.0, "partition", _ISOLATE_MASTER), _step(45.0, SETTLED_STATE, {"answering": True}),
    _step(47.0, "heal"),
    _step(47.5, SETTLED_STATE),
]


def _forget_and_start(at: float, which: str) -> list[dict[str, object]]:
    """The queue's ``which`` stopped and forgotten, the nodes asked 2 s later (none may
    list it, and a queue it mastered must have promoted a mirror), then started again,
    to rejoin as a new node: empty, unsynchronised."""
    return [_step(at, "forget", {"node": which}), _step(at + 2.0, SETTLED_STATE),
            _step(at + 3.0, "start")]


# The gauntlet's workload without its churner: an exclusive queue lives on one node, so
# the nodes never list the same queues and each cluster-state step would wait out its
# bound, running the forgets late.
_FORGET = replace(_GAUNTLET, churners=0)
# Each mirror in turn forgotten and started again (the eldest first, so both come back
# empty: no mirror is synchronised for the backlog queue), then the master forgotten
# (the stop alone would leave the queue on it under ha-promote-on-shutdown when-synced:
# forgotten, it must promote its eldest mirror whatever the policy), then both queues
# synchronised and the master forgotten once more (the promoted mirror must hold every
# message: the forgotten node came back empty and was counted synchronised only by the
# sync). The drain by promotion then promotes mirrors that joined after each forget.
_FORGET_STEPS = [
    *_forget_and_start(0.0, "mirror"), *_forget_and_start(5.0, "mirror"),
    *_forget_and_start(10.0, "master"),
    # asked of the master: the node just started may list no mirror yet, all synchronised
    _step(16.0, "sync-queue", {"queue": "q1", "node": "master"}),
    _step(16.5, "sync-queue", {"queue": "q2", "node": "master"}),
    *_forget_and_start(18.5, "master"),
]


def _kill(targets: str = "master", hold: float = 6.0, quiet: float = 6.0) -> NemesisSpec:
    return NemesisSpec("kill", targets, hold, quiet)


def _promote(event: str, when: str) -> Scenario:
    package = "kill" if event == "failure" else "stop"
    key = f"ha-promote-on-{event}"
    return Scenario(
        f"promote-on-{event}-{when}",
        f"{'SIGKILL' if package == 'kill' else 'graceful stop of'} the master under "
        f"{key}: {when}" + (" (unavailable rather than promote an unsynchronised mirror)"
                            if when == "when-synced" else ""),
        policy={"ha-mode": "all", key: when},
        workload=_CONSUME,
        nemesis=NemesisSpec(package, "master", hold=6.0, quiet=6.0),
    )


def _partition(kind: str, description: str, **options: str) -> Scenario:
    return Scenario(
        f"partition-{kind}", description,
        nodes=5 if kind == "bridge" else 3,
        workload=replace(_CONSUME, client_nodes="spread", reconnect="next"),
        nemesis=NemesisSpec("partition", "master", hold=8.0, quiet=5.0,
                            options={"kind": "isolate" if kind == "isolate-master" else kind,
                                     **options}),
        phases=Phases(faults=30.0, recovery=8.0),
    )


BUILTINS: tuple[Scenario, ...] = (
    Scenario("smoke", "three nodes, confirming publishers and acking consumers, no faults: "
             "everything confirmed is delivered",
             workload=WorkloadSpec(publishers=2, consumers=2, rate=100),
             phases=Phases(warmup=1.0, faults=4.0, recovery=1.0)),
    Scenario("confirms-survive-kill", "publish with confirms while the master is SIGKILLed; "
             "every confirmed message is drained afterwards",
             policy=_SURVIVE_POLICY, workload=_PUBLISH_ONLY,
             nemesis=_kill(hold=6.0, quiet=6.0)),
    Scenario("confirms-survive-stop", "publish with confirms while the master stops "
             "gracefully; every confirmed message is drained afterwards",
             policy=_SURVIVE_POLICY, workload=_PUBLISH_ONLY,
             nemesis=NemesisSpec("stop", "master", hold=6.0, quiet=6.0)),
    Scenario("confirms-survive-policy", "publish with confirms while the policy changes from "
             "ha-mode all to exactly 2 and back",
             workload=_PUBLISH_ONLY,
             nemesis=NemesisSpec("policy", hold=6.0, quiet=4.0, options={
                 "definition": {"ha-mode": "exactly", "ha-params": 2,
                                "ha-sync-mode": "automatic"}})),
    Scenario("consume-survives-kill", "acking consumers keep consuming while the master is "
             "SIGKILLed; unacked messages come back redelivered",
             policy=_SURVIVE_POLICY, workload=_CONSUME, nemesis=_kill(hold=6.0, quiet=6.0)),
    Scenario("consume-survives-stop", "acking consumers keep consuming while the master stops "
             "gracefully",
             policy=_SURVIVE_POLICY, workload=_CONSUME,
             nemesis=NemesisSpec("stop", "master", hold=6.0, quiet=6.0)),
    Scenario("auto-resume", "consumers without x-cancel-on-ha-failover keep consuming across a "
             "master failover, with no cancel notification",
             workload=replace(_CONSUME, cancel_on_failover=False, client_nodes="spread"),
             nemesis=_kill(hold=6.0, quiet=6.0)),
    _promote("failure", "always"),
    _promote("failure", "when-synced"),
    _promote("shutdown", "always"),
    _promote("shutdown", "when-synced"),
    Scenario("eager-sync", "ha-sync-mode automatic: a restarted mirror is synchronised at once, "
             "then the master is killed",
             policy={"ha-mode": "all", "ha-sync-mode": "automatic"}, workload=_CONSUME,
             nemesis=NemesisSpec("sequence", options={"steps": [
                 {"at": 0.0, "f": "restart", "value": {"nodes": "mirror"}},
                 {"at": 8.0, "f": "kill", "value": {"nodes": "master"}},
                 {"at": 14.0, "f": "heal"}]})),
    Scenario("rejoin-unsynced", "ha-sync-mode manual: a mirror rejoins empty and stays "
             "unsynchronised; the master is killed before the old messages drain",
             policy={"ha-mode": "all", "ha-sync-mode": "manual"}, workload=_PUBLISH_ONLY,
             nemesis=NemesisSpec("sequence", options={"steps": [
                 {"at": 0.0, "f": "restart", "value": {"nodes": "mirror"}},
                 {"at": 6.0, "f": "kill", "value": {"nodes": "master"}},
                 {"at": 12.0, "f": "heal"}]})),
    Scenario("many-node-kill", "five nodes, two SIGKILLed at a time, over and over",
             nodes=5, workload=replace(_CONSUME, client_nodes="spread", reconnect="next"),
             nemesis=_kill("minority", hold=5.0, quiet=5.0),
             phases=Phases(faults=30.0, recovery=8.0)),
    _partition("halves", "the cluster cut into two halves, black-holed, over and over"),
    _partition("isolate-master", "the queue's master cut off from every other node"),
    _partition("bridge", "five nodes in two halves that only one bridge node hears"),
    _partition("one-way", "the master stops hearing one other node; that node still hears it",
               **{"from": "mirror", "to": "master"}),
    Scenario("slow-network", "latency with jitter on every node and client link",
             workload=_CONSUME,
             nemesis=NemesisSpec("degrade", hold=8.0, quiet=4.0, options={
                 "toxic": "latency", "links": "all",
                 "attributes": {"latency": 100, "jitter": 50}})),
    Scenario("pause", "the master SIGSTOPped and resumed (a long GC pause, a frozen VM)",
             workload=_CONSUME, nemesis=NemesisSpec("pause", "master", hold=6.0, quiet=6.0)),
    Scenario("rolling-restart", "every node restarted in turn, each waiting for the cluster "
             "to see the last one back",
             workload=replace(_CONSUME, client_nodes="spread", reconnect="next"),
             nemesis=NemesisSpec("rolling-restart"), phases=Phases(faults=30.0)),
    Scenario("mixed", "the combined random nemesis: partitions, process faults and link "
             "degradation in seeded fault and quiet windows, while a churner declares and "
             "deletes queues (the soak default)",
             workload=replace(_CONSUME, client_nodes="spread", reconnect="next", getters=1,
                              churners=1),
             nemesis=NemesisSpec("combined", hold=5.0, quiet=5.0),
             phases=Phases(faults=60.0, recovery=10.0)),
)

DETECTION: tuple[Scenario, ...] = (
    Scenario("gauntlet", "every window a broken mirrored queue needs, in one run: short "
             "cuts then kills of the master, a kill with an empty youngest mirror, a stop with "
             "no synchronised mirror, syncs, a mirror cut and killed, a cancelled sync, a "
             "paused minority; then a drain by promotion",
             policy={"ha-mode": "all", "ha-sync-mode": "manual", "ha-sync-batch-size": 16},
             workload=_GAUNTLET,
             nemesis=NemesisSpec("sequence", options={"steps": _GAUNTLET_STEPS}),
             phases=Phases(warmup=3.0, faults=50.0, recovery=6.0, promotion_drain=True)),
    Scenario("gauntlet-autoheal", "autoheal partition handling: the master cut off past "
             "failure detection and healed (the smaller side must restart, and the nodes "
             "agree again), a cut and kill of the master, the eldest mirror killed and "
             "then the master (the last replica takes over alone), a power loss of every "
             "node (unsynced writes lost), every node stopped, the master last, and started "
             "in the order they stopped; then a drain by promotion",
             partition_handling="autoheal",
             policy={"ha-mode": "all", "ha-sync-mode": "automatic"}, workload=_GAUNTLET,
             nemesis=NemesisSpec("sequence", options={"steps": [
                 _step(0.0, "partition", _ISOLATE_MASTER), _step(6.0, "heal"),
                 _step(6.5, SETTLED_STATE),
                 *_cut_and_kill(12.0), _step(15.0, "heal"),
                 *_last_replica(17.0), _step(21.5, "heal"),
                 _step(24.5, "power-loss", {"nodes": "all"}), _step(26.5, "heal"),
                 *_full_restart(29.5)]}),
             phases=Phases(warmup=3.0, faults=33.5, recovery=6.0, promotion_drain=True)),
    Scenario("gauntlet-promote", "ha-promote-on-failure when-synced: masters cut off and "
             "killed until no mirror is synchronised, then the master killed again (the queue "
             "must wait for it rather than promote an empty mirror); the policy cut to two "
             "replicas (one mirror must go), the mirror killed (the spare node must replace "
             "it), and back (a mirror added unsynchronised); the policy moved off the "
             "master's node (it must stay until a mirror is synchronised); then a drain by "
             "promotion",
             policy=_PROMOTE_POLICY, workload=_GAUNTLET,
             nemesis=NemesisSpec("sequence", options={"steps": [
                 *_cut_and_kill(0.0), _step(3.0, "heal"),
                 *_cut_and_kill(6.0), _step(9.0, "heal"),
                 *_cut_and_kill(12.0), _step(15.0, "heal"),
                 _step(17.0, "set-policy", {"definition": {
                     **_PROMOTE_POLICY, "ha-mode": "exactly", "ha-params": 2}}),
                 _step(17.2, SETTLED_STATE),
                 _step(17.5, "kill", {"nodes": "mirror"}), _step(18.5, SETTLED_STATE),
                 _step(19.5, "heal"),
                 # named by the backlog queue's mirrors: they never drain, so stay
                 # unsynchronised (the first queue's may have drained by then)
                 _step(20.0, "set-policy", {"queue": "q2", "definition": {
                     **_PROMOTE_POLICY, "ha-mode": "nodes", "ha-params": ["mirror", "youngest"]}}),
                 _step(21.5, "heal")]}),
             phases=Phases(warmup=3.0, faults=23.0, recovery=6.0, promotion_drain=True)),
    Scenario("gauntlet-replicas", "a confirm must span every replica, on disk or (two "
             "publishers' every message, the others' every other one: transient) in "
             "memory: every link into "
             "the youngest mirror black-holed, then the master and its eldest mirror "
             "killed at once, three times (autoheal: the lone youngest mirror is promoted "
             "and must hold every confirmed message; ha-sync-mode automatic synchronises "
             "the restarted nodes between the rounds); then a drain by promotion",
             partition_handling="autoheal",
             policy={"ha-mode": "all", "ha-sync-mode": "automatic"}, workload=_REPLICAS,
             nemesis=NemesisSpec("sequence", options={"steps": [
                 *_youngest_left_behind(0.0), *_youngest_left_behind(8.0),
                 *_youngest_left_behind(16.0)]}),
             phases=Phases(warmup=3.0, faults=22.0, recovery=6.0, promotion_drain=True)),
    Scenario("gauntlet-content", "what a message holds, on every path a copy takes: "
             "every tenth body in two frames, every message's id, header and delivery "
             "mode checked on delivery, a mandatory publish no queue takes after every "
             "tenth, which must come back; a mirror restarted and synchronised, the master "
             "killed twice with syncs between (promoted mirrors fed by syncs), every node "
             "stopped and booted from disk; then a drain by promotion",
             policy={"ha-mode": "all", "ha-sync-mode": "manual"}, workload=_CONTENT,
             nemesis=NemesisSpec("sequence", options={"steps": [
                 _step(0.0, "restart", {"nodes": "mirror"}),
                 *_syncs(3.0), _step(6.0, "kill", _MASTER), _step(8.0, "heal"),
                 *_syncs(10.0), _step(13.0, "kill", _MASTER), _step(15.0, "heal"),
                 *_syncs(17.0), *_full_restart(19.0)]}),
             phases=Phases(warmup=3.0, faults=26.0, recovery=6.0, promotion_drain=True)),
    Scenario("gauntlet-late-peer", "news read late is no proof of life: the master's link "
             "to its youngest mirror delayed 1 s (half of failure detection), then the "
             "master killed, three times; the nodes must agree on one master each time "
             "(ignore partition handling: a partial partition declared on the youngest's "
             "stale view of the master would split them for good); then a drain by "
             "promotion",
             partition_handling="ignore", policy=_SURVIVE_POLICY, workload=_REPLICAS,
             nemesis=NemesisSpec("sequence", options={"steps": [
                 *_read_late_then_kill(0.0), *_read_late_then_kill(7.0),
                 *_read_late_then_kill(14.0)]}),
             phases=Phases(warmup=3.0, faults=20.0, recovery=6.0, promotion_drain=True)),
    Scenario("gauntlet-no-ack", "what a no-ack consumer was sent is gone from every "
             "replica: no-ack consumers and a no-ack basic.get poller beside a manual-ack "
             "consumer, the master stopped and "
             "started again twice, then a mirror restarted and the master killed (each "
             "promoted mirror must not deliver again what the old master settled as it "
             "sent it); then a drain by promotion",
             policy={"ha-mode": "all", "ha-sync-mode": "automatic"}, workload=_NO_ACK,
             nemesis=NemesisSpec("sequence", options={"steps": [
                 _step(4.0, "stop", _MASTER), _step(6.5, "heal"),
                 _step(11.0, "stop", _MASTER), _step(13.5, "heal"),
                 _step(16.0, "restart", {"nodes": "mirror"}),
                 _step(20.0, "kill", _MASTER), _step(22.0, "heal")]}),
             phases=Phases(warmup=3.0, faults=24.0, recovery=6.0, promotion_drain=True)),
    Scenario("gauntlet-forget", "forget_cluster_node: each mirror stopped and forgotten "
             "and started again (it must leave every queue, and come back empty and "
             "unsynchronised), the master forgotten while no mirror is synchronised (its "
             "queues must promote their eldest mirror whatever ha-promote-on-shutdown says), "
             "both queues synchronised and the master forgotten again, the nodes asked after "
             "each forget (none may list the forgotten node); then a drain by promotion",
             policy={"ha-mode": "all", "ha-sync-mode": "manual"}, workload=_FORGET,
             nemesis=NemesisSpec("sequence", options={"steps": _FORGET_STEPS}),
             phases=Phases(warmup=3.0, faults=23.5, recovery=6.0, promotion_drain=True)),
    Scenario("gauntlet-ops", "the master's other broadcasts and the cluster's metadata: "
             "a queue nobody consumes purged every 2 s (what a purge removed must never "
             "come back, also not from a mirror promoted later), every publish routed "
             "through a durable topic exchange (every node, also one restarted, must hold "
             "its bindings; a binding's # matches zero, one or two words; a binding removed "
             "at set-up routes no mandatory probe), a fanout publisher's every message "
             "(through a fanout exchange or a direct one binding both queues by one key) "
             "delivered from both queues, transactions rolled back (never delivered) and "
             "deliveries given back with basic.recover or by closing the connection "
             "(delivered again, at their place), a rule prober asking for what queue.delete's "
             "conditions, exclusive consumers and queues, and auto-delete queues must refuse "
             "or do; the master killed, a mirror restarted, both queues synchronised and the "
             "master killed again, with purges between; then a drain by promotion",
             policy={"ha-mode": "all", "ha-sync-mode": "manual"}, workload=_OPS,
             nemesis=NemesisSpec("sequence", options={"steps": [
                 _step(5.0, "kill", _MASTER), _step(8.0, "heal"),
                 _step(13.0, "kill", {"nodes": "mirror"}), _step(15.0, "heal"),
                 *_syncs(16.5),
                 _step(19.0, "kill", _MASTER), _step(21.0, "heal")]}),
             phases=Phases(warmup=3.0, faults=24.0, recovery=6.0, promotion_drain=True)),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in BUILTINS + DETECTION}
