"""The built-in scenarios (SPEC §4.4): RabbitMQ's HA suites' cases, Jepsen-style
partitions, process and network faults, and the combined soak default."""

from __future__ import annotations

from dataclasses import replace

from harness.scenarios.model import NemesisSpec, Phases, Scenario
from harness.workload.spec import WorkloadSpec

_PUBLISH_ONLY = WorkloadSpec(publishers=3, consumers=0)  # confirms, then the final drain
# Consumers on every node that hold each message a while: a failover finds messages
# unacknowledged, which must come back flagged redelivered.
_CONSUME = WorkloadSpec(publishers=2, consumers=3, prefetch=10, ack_delay=0.2,
                        client_nodes="spread")


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
             workload=_PUBLISH_ONLY, nemesis=_kill(hold=6.0, quiet=6.0)),
    Scenario("confirms-survive-stop", "publish with confirms while the master stops "
             "gracefully; every confirmed message is drained afterwards",
             workload=_PUBLISH_ONLY, nemesis=NemesisSpec("stop", "master", hold=6.0, quiet=6.0)),
    Scenario("confirms-survive-policy", "publish with confirms while the policy changes from "
             "ha-mode all to exactly 2 and back",
             workload=_PUBLISH_ONLY,
             nemesis=NemesisSpec("policy", hold=6.0, quiet=4.0, options={
                 "definition": {"ha-mode": "exactly", "ha-params": 2,
                                "ha-sync-mode": "automatic"}})),
    Scenario("consume-survives-kill", "acking consumers keep consuming while the master is "
             "SIGKILLed; unacked messages come back redelivered",
             workload=_CONSUME, nemesis=_kill(hold=6.0, quiet=6.0)),
    Scenario("consume-survives-stop", "acking consumers keep consuming while the master stops "
             "gracefully",
             workload=_CONSUME, nemesis=NemesisSpec("stop", "master", hold=6.0, quiet=6.0)),
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
             "degradation in seeded fault and quiet windows (the soak default)",
             workload=replace(_CONSUME, client_nodes="spread", reconnect="next", getters=1),
             nemesis=NemesisSpec("combined", hold=5.0, quiet=5.0),
             phases=Phases(faults=60.0, recovery=10.0)),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in BUILTINS}
