"""The combined random nemesis: a schedule that depends only on the seed, a runner
whose final heal always runs, and a live run that leaves every link healed and every
node running."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from faults.client import HealVerifier
from faults.nemesis import (
    HEAL,
    Compose,
    InvalidOp,
    NoopNemesis,
    Op,
    ProcessNemesis,
    ScheduleConfig,
    Step,
    UnsupportedOp,
    combined_nemesis,
    plan,
    run_schedule,
)
from faults.nemesis.schedule import FAULTS, is_final
from faults.process import LocalProcesses, ProcessState
from tests.faults.cluster_support import running_cluster

NODES = ["n1", "n2", "n3"]
NODE_LINKS = [f"link:{a}->{b}" for a in NODES for b in NODES if a != b]
CLIENT_LINKS = ["client:c1->n1"]
POLICY = {"name": "ha-all", "pattern": ".*", "definition": {"ha-mode": "all"}}
EVERY_FAULT = ScheduleConfig(duration=600, faults=FAULTS, policies=(POLICY,))


def draw(seed: int, config: ScheduleConfig = EVERY_FAULT) -> list[tuple[float, Op]]:
    return [(step.at, step.op) for step in plan(seed, config, NODES, NODE_LINKS, CLIENT_LINKS)]


def test_the_same_seed_gives_the_same_schedule_and_another_seed_another() -> None:
    assert draw(7) == draw(7)
    assert draw(7) != draw(8)
    # Only the seed counts: the order the cluster is described in does not.
    shuffled = plan(7, EVERY_FAULT, NODES[::-1], NODE_LINKS[::-1], CLIENT_LINKS)
    assert [(s.at, s.op) for s in shuffled] == draw(7)


def test_fault_and_quiet_windows_alternate_and_end_in_the_final_heal() -> None:
    config = ScheduleConfig(duration=600, faults=FAULTS, policies=(POLICY,),
                            fault_seconds=(5, 15), quiet_seconds=(2, 4))
    steps = plan(3, config, NODES, NODE_LINKS, CLIENT_LINKS)
    assert is_final(steps[-1].op) and steps[-1].at == 600
    assert [step.at for step in steps] == sorted(step.at for step in steps)
    body = steps[:-1]
    faults, heals = body[0::2], body[1::2]
    assert all(step.op.f != HEAL for step in faults)
    assert all(step.op == Op(HEAL) for step in heals)
    for fault, heal in zip(faults, heals, strict=False):
        assert 5 <= heal.at - fault.at <= 15
    for heal, fault in zip(heals, faults[1:], strict=False):
        assert 2 <= fault.at - heal.at <= 4
    # Every kind of fault turns up over a long run, with concrete targets.
    kinds = Counter(step.op.f for step in faults)
    assert set(kinds) == {"partition", "kill", "stop", "pause", "restart", "degrade",
                          "set-policy"}
    for step in faults:
        value = step.op.value
        if step.op.f == "partition":
            assert set(value["grudge"]) <= set(NODES) and value["mode"] in ("black-hole", "reset")
        elif step.op.f == "degrade":
            assert set(value["links"]) <= set(NODE_LINKS + CLIENT_LINKS)
        elif step.op.f == "set-policy":
            assert value["node"] in NODES and value["name"] == "ha-all"
        else:
            assert set(value["nodes"]) <= set(NODES)


def test_one_parts_draws_do_not_shift_anothers() -> None:
    # Same timing and choice of kind (two faults each), different link draws.
    with_latency = draw(11, ScheduleConfig(duration=300, faults=("partition-halves", "latency")))
    with_bandwidth = draw(11, ScheduleConfig(duration=300,
                                             faults=("partition-halves", "bandwidth")))
    assert [at for at, _ in with_latency] == [at for at, _ in with_bandwidth]
    partitions = [[op for _, op in steps if op.f == "partition"]
                  for steps in (with_latency, with_bandwidth)]
    assert partitions[0] == partitions[1] and len(partitions[0]) > 2


def test_a_stopped_run_still_ends_with_the_final_heal() -> None:
    steps = plan(5, ScheduleConfig(duration=60, fault_seconds=(1, 2), quiet_seconds=(0, 0.1)),
                 NODES, NODE_LINKS)
    stop = threading.Event()
    stop.set()
    records = run_schedule(NoopNemesis(), steps, stop=stop)
    assert [r.invoked for r in records] == [Op(HEAL, {"final": True})]


class SlowStarts(NoopNemesis):
    """A start takes half a second, as a node's restart takes seconds."""

    fs = frozenset({HEAL, "start", "partition", "kill"})

    def invoke(self, op: Op) -> Op:
        if op.f == "start":
            time.sleep(0.5)
        return op.ok()


def test_a_late_step_moves_the_rest_so_the_gaps_after_it_stay_as_planned() -> None:
    """The cut before a kill lasts its 0.3 s even though the start before it ended
    0.4 s after the cut was due: the steps after a late one are not run back to back."""
    steps = [Step(0.0, Op("start")), Step(0.1, Op("partition")), Step(0.4, Op("kill")),
             Step(0.5, Op(HEAL, {"final": True}))]
    records = run_schedule(SlowStarts(), steps)
    invoked = {r.invoked.f: r.invoked_at for r in records}
    assert invoked["partition"] >= 0.5  # late: the start took 0.5 s
    assert invoked["kill"] - invoked["partition"] >= 0.3
    assert records[-1].invoked_at - invoked["kill"] >= 0.1


def test_a_step_that_raises_still_ends_with_the_final_heal() -> None:
    nemesis = Compose([ProcessNemesis(LocalProcesses({}), random.Random(0))])
    seen: list[Op] = []
    steps = plan(1, ScheduleConfig(duration=1, faults=("kill",), quiet_seconds=(0, 0)), NODES)
    with pytest.raises(InvalidOp):  # the schedule names nodes this control does not run
        run_schedule(nemesis, steps, on_record=lambda record: seen.append(record.completed))
    assert seen == [Op(HEAL, [{"resumed": [], "started": [], "failed": {}}], "ok")]


def test_composition_routes_each_op_to_the_nemesis_that_handles_it() -> None:
    def processes() -> ProcessNemesis:
        return ProcessNemesis(LocalProcesses({}), random.Random(0))

    with pytest.raises(ValueError, match="two nemeses handle"):
        Compose([processes(), processes()])
    nemesis = Compose([NoopNemesis(), processes()])
    assert nemesis.fs == processes().fs
    with pytest.raises(UnsupportedOp):
        nemesis.invoke(Op("partition"))
    assert nemesis.invoke(Op("start")).value == {"nodes": [], "failed": {}}
    assert nemesis.invoke(Op(HEAL)).type == "ok"


def test_a_live_random_run_ends_with_every_link_healed_and_every_node_running(
    tmp_path: Path,
) -> None:
    config = ScheduleConfig(duration=9, fault_seconds=(0.8, 1.5), quiet_seconds=(0.2, 0.5),
                            faults=FAULTS, policies=(POLICY,))
    with running_cluster(tmp_path, clients=[("c1", "n1")]) as cluster:
        topology = cluster.topology
        steps = plan(2024, config, cluster.names, [link.name for link in topology.node_links],
                     [link.name for link in topology.client_links])
        assert len(steps) >= 7
        nemesis = combined_nemesis(
            2024, control=cluster.control, view=cluster.view(), client=cluster.client,
            topology=topology, verifier=HealVerifier(cluster.client, timeout=10),
            management={name: cluster.mgmt(name) for name in cluster.names})
        records = run_schedule(nemesis, steps)
        assert [r.invoked for r in records] == [s.op for s in steps]
        failures = [(r.invoked, r.completed.error) for r in records if r.completed.type != "ok"]
        assert failures == []
        for name, proxy in cluster.client.proxies().items():
            assert proxy.enabled and proxy.toxics == (), name
        assert all(topology.probe(link) for link in topology.links)
        assert all(cluster.control.state(n) is ProcessState.RUNNING for n in cluster.names)
        cluster.wait_formed()
        assert all(cluster.mgmt(n).policy("/", "ha-all") is None for n in cluster.names)
        nemesis.teardown()  # nothing is left to end


def test_a_black_holed_master_killed_half_a_second_later_heals_in_one_go(
    tmp_path: Path,
) -> None:
    """The partition's cuts go first, so the killed node can hear its peers when it
    starts again; its links are verified once it runs."""
    with running_cluster(tmp_path) as cluster:
        nemesis = combined_nemesis(
            1, control=cluster.control, view=cluster.view(), client=cluster.client,
            topology=cluster.topology, verifier=HealVerifier(cluster.client, timeout=2),
            management={name: cluster.mgmt(name) for name in cluster.names})
        steps = [Step(0.0, Op("partition", {"kind": "isolate", "node": "n1",
                                            "mode": "black-hole"})),
                 Step(0.5, Op("kill", {"nodes": ["n1"]})),
                 Step(1.0, Op(HEAL, {"final": True}))]
        records = run_schedule(nemesis, steps)
        assert [(r.invoked.f, r.completed.type) for r in records] == [
            ("partition", "ok"), ("kill", "ok"), (HEAL, "ok")]
        assert all(cluster.control.state(n) is ProcessState.RUNNING for n in cluster.names)
        for name, proxy in cluster.client.proxies().items():
            assert proxy.enabled and proxy.toxics == (), name
        cluster.wait_formed()


def test_forget_stops_a_node_a_running_node_forgets_it_and_the_heal_starts_it(
    tmp_path: Path,
) -> None:
    with running_cluster(tmp_path) as cluster:
        nemesis = combined_nemesis(
            1, control=cluster.control, view=cluster.view(),
            management={name: cluster.mgmt(name) for name in cluster.names})
        done = nemesis.invoke(Op("forget", {"node": "n3"}))
        assert done.type == "ok", done.error
        assert done.value["node"] == "n3" and done.value["forgotten_by"] in ("n1", "n2")
        assert cluster.control.state("n3") is ProcessState.STOPPED
        again = nemesis.invoke(Op("forget", {"node": "n3"}))
        assert again.type == "fail" and "not running" in (again.error or "")
        with pytest.raises(InvalidOp, match="forget needs the node's name"):
            nemesis.invoke(Op("forget", {"node": ["n3"]}))
        assert nemesis.invoke(Op(HEAL)).type == "ok"
        assert cluster.control.state("n3") is ProcessState.RUNNING
        cluster.wait_formed()


def test_two_faults_on_one_link_heal_directly_without_a_reset(tmp_path: Path) -> None:
    """A degrade and a partition both black-hole n1->n3: every fault is undone before
    any heal checks that bytes flow, so neither check waits on the other's toxic nor
    falls back to recreating the proxy or resetting the server."""
    with running_cluster(tmp_path) as cluster:
        nemesis = combined_nemesis(
            1, control=cluster.control, view=cluster.view(), client=cluster.client,
            topology=cluster.topology, verifier=HealVerifier(cluster.client, timeout=2),
            management={name: cluster.mgmt(name) for name in cluster.names})
        assert nemesis.invoke(Op("degrade", {"toxic": "timeout",
                                             "links": ["link:n1->n3"]})).type == "ok"
        assert nemesis.invoke(Op("partition", {"kind": "isolate", "node": "n1",
                                               "mode": "black-hole"})).type == "ok"
        assert len(cluster.client.proxy("link:n1->n3").toxics) >= 2
        healed = nemesis.invoke(Op(HEAL))
        assert healed.type == "ok"
        methods = Counter(method for part in healed.value if isinstance(part, dict)
                          for method in (part.get("healed") or {}).values())
        assert set(methods) == {"direct"}
        for name, proxy in cluster.client.proxies().items():
            assert proxy.enabled and proxy.toxics == (), name
        cluster.wait_formed()
