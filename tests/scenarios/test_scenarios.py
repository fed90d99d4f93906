"""Built-in scenarios and scenario files: every name the spec lists, plans that reach
the nemeses' own validation, and precise errors for bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.core.policy import Policy, effective_policy
from faults.nemesis import HEAL
from faults.nemesis.schedule import is_final
from harness.scenarios import (
    POLICY_NAME,
    SCENARIOS,
    ScenarioError,
    decoy_policies,
    find_scenario,
    load_scenario,
    queue_pattern,
)
from harness.scenarios.nemesis import check_plan
from harness.workload.spec import CHURN_PREFIX

SPEC_NAMES = {
    "smoke", "confirms-survive-kill", "confirms-survive-stop", "confirms-survive-policy",
    "consume-survives-kill", "consume-survives-stop", "auto-resume",
    "promote-on-failure-always", "promote-on-failure-when-synced",
    "promote-on-shutdown-always", "promote-on-shutdown-when-synced", "eager-sync",
    "rejoin-unsynced", "many-node-kill", "partition-halves", "partition-isolate-master",
    "partition-bridge", "partition-one-way", "slow-network", "pause", "rolling-restart",
    "mixed",
}


def test_every_spec_scenario_is_built_in_and_plans_to_a_final_heal() -> None:
    assert set(SCENARIOS) >= SPEC_NAMES
    for scenario in SCENARIOS.values():
        steps = check_plan(scenario)
        assert is_final(steps[-1].op) and steps[-1].at == scenario.phases.faults
        assert all(s.at <= scenario.phases.faults for s in steps), scenario.name


def test_packages_map_to_their_nemesis_ops() -> None:
    def fs(name: str) -> set[str]:
        return {s.op.f for s in check_plan(SCENARIOS[name])} - {HEAL}
    assert fs("smoke") == set()
    assert fs("confirms-survive-kill") == {"kill"}
    assert fs("promote-on-shutdown-always") == {"stop"}
    assert fs("confirms-survive-policy") == {"set-policy"}
    assert fs("partition-halves") == {"partition"}
    assert fs("slow-network") == {"degrade"}
    assert fs("rolling-restart") == {"rolling-restart"}
    isolate = check_plan(SCENARIOS["partition-isolate-master"])[0].op
    assert isolate.value == {"kind": "isolate", "mode": "black-hole", "node": "master"}
    many = check_plan(SCENARIOS["many-node-kill"])[0].op
    assert SCENARIOS["many-node-kill"].nodes >= 5 and many.value == {"nodes": "minority"}
    promote = SCENARIOS["promote-on-failure-when-synced"]
    assert promote.policy["ha-promote-on-failure"] == "when-synced"


def test_mixed_plans_the_same_schedule_for_the_same_seed() -> None:
    from harness.scenarios import plan_steps
    mixed = SCENARIOS["mixed"]
    links = ["link:n1->n2", "link:n2->n1", "client:c1->n1"]
    one = plan_steps(mixed, 7, links[:2], links[2:])
    assert one == plan_steps(mixed, 7, links[:2], links[2:])
    assert one != plan_steps(mixed, 8, links[:2], links[2:])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


def test_a_file_based_on_a_built_in_changes_only_what_it_says(tmp_path: Path) -> None:
    path = write(tmp_path, 'base = "confirms-survive-kill"\nnodes = 5\n'
                 '[workload]\nrate = 200\nqueues = ["a", "b"]\n'
                 '[nemesis]\nhold = 2.5\n[phases]\nfaults = 9\n')
    scenario = find_scenario(str(path))
    base = SCENARIOS["confirms-survive-kill"]
    assert scenario.name == "mine" and scenario.nodes == 5
    assert scenario.workload.rate == 200.0 and scenario.workload.queues == ("a", "b")
    assert scenario.workload.publishers == base.workload.publishers
    assert scenario.nemesis.package == "kill" and scenario.nemesis.hold == 2.5
    assert scenario.phases.faults == 9.0 and scenario.phases.warmup == base.phases.warmup


def test_a_whole_file_with_a_sequence_nemesis(tmp_path: Path) -> None:
    path = write(tmp_path, 'name = "seq"\nnodes = 3\npartition_handling = "autoheal"\n'
                 'policy = {"ha-mode" = "exactly", "ha-params" = 2}\n'
                 '[nemesis]\npackage = "sequence"\n'
                 '[[nemesis.options.steps]]\nat = 1\nf = "pause"\nvalue = {nodes = ["n2"]}\n'
                 '[[nemesis.options.steps]]\nat = 3\nf = "heal"\n')
    scenario = load_scenario(path, SCENARIOS)
    assert scenario.policy == {"ha-mode": "exactly", "ha-params": 2}
    steps = check_plan(scenario)
    assert [(s.at, s.op.f) for s in steps] == [(1.0, "pause"), (3.0, "heal"), (20.0, "heal")]


PROMOTION = ('name = "promotion"\n'
             '[workload]\nqueues = ["q1", "q2", "b1"]\nbacklog_queues = ["b1"]\n'
             'requeuers = 2\ncancel_consumers = 1\n'
             '[phases]\npromotion_drain = true\n'
             '[nemesis]\npackage = "sequence"\n'
             '[[nemesis.options.steps]]\nat = 0\nf = "partition"\n'
             'value = {kind = "isolate", node = "master", mode = "black-hole"}\n'
             '[[nemesis.options.steps]]\nat = 0.5\nf = "kill"\nvalue = {nodes = "master"}\n'
             '[[nemesis.options.steps]]\nat = 2\nf = "heal"\n'
             '[[nemesis.options.steps]]\nat = 4\nf = "sync-queue"\n'
             '[[nemesis.options.steps]]\nat = 5\nf = "sync-queue"\nvalue = {queue = "b1"}\n')


def test_a_file_with_requeuers_cancel_consumers_a_backlog_and_a_promotion_drain(
        tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, PROMOTION), SCENARIOS)
    w = scenario.workload
    assert (w.requeuers, w.cancel_consumers, w.backlog_queues) == (2, 1, ("b1",))
    assert scenario.phases.promotion_drain is True
    steps = check_plan(scenario)
    assert [(s.at, s.op.f) for s in steps] == [
        (0.0, "partition"), (0.5, "kill"), (2.0, "heal"), (4.0, "sync-queue"),
        (5.0, "sync-queue"), (20.0, "heal")]
    # a sync without a queue syncs the first workload queue
    assert [s.op.value for s in steps if s.op.f == "sync-queue"] == [{"queue": "q1"},
                                                                     {"queue": "b1"}]
    assert SCENARIOS["smoke"].phases.promotion_drain is False
    replication = load_scenario(write(tmp_path, '[nemesis]\npackage = "degrade"\n'
                                      'options = {links = "master-out", stream = "upstream"}\n'),
                                SCENARIOS)
    degrade = check_plan(replication)[0].op
    assert degrade.f == "degrade" and degrade.value["links"] == "master-out"


def test_a_set_policy_step_redefines_the_runs_own_policy_on_the_workloads_queues(
        tmp_path: Path) -> None:
    text = ('[workload]\nqueues = ["q1", "b1"]\nchurners = 1\n'
            '[nemesis]\npackage = "sequence"\n'
            '[[nemesis.options.steps]]\nat = 1\nf = "set-policy"\n'
            'value = {definition = {"ha-mode" = "exactly", "ha-params" = 2}}\n')
    (step, _) = check_plan(load_scenario(write(tmp_path, text), SCENARIOS))
    assert step.op.value == {"name": POLICY_NAME, "pattern": r"^(q1|b1|churn\..+)$",
                             "priority": 0, "apply-to": "queues",
                             "definition": {"ha-mode": "exactly", "ha-params": 2}}
    bare = text.replace('value = {definition = {"ha-mode" = "exactly", "ha-params" = 2}}\n', "")
    with pytest.raises(ScenarioError, match="set-policy takes"):
        load_scenario(write(tmp_path, bare), SCENARIOS)


def test_a_forget_step_names_one_node_symbolically_or_by_name(tmp_path: Path) -> None:
    text = ('[nemesis]\npackage = "sequence"\n'
            '[[nemesis.options.steps]]\nat = 1\nf = "forget"\nvalue = {node = "master"}\n'
            '[[nemesis.options.steps]]\nat = 2\nf = "start"\n'
            '[[nemesis.options.steps]]\nat = 3\nf = "forget"\nvalue = {node = "n3"}\n')
    steps = check_plan(load_scenario(write(tmp_path, text), SCENARIOS))
    assert [(s.op.f, s.op.value) for s in steps[:3]] == [
        ("forget", {"node": "master"}), ("start", None), ("forget", {"node": "n3"})]
    for bad in ('{node = "n9"}', '{nodes = "master"}', '"master"'):
        with pytest.raises(ScenarioError, match="forget takes"):
            load_scenario(write(tmp_path, text.replace('{node = "n3"}', bad)), SCENARIOS)


@pytest.mark.parametrize(("text", "key", "expected"), [
    ("nodes = 0\n", "nodes", "a number above zero"),
    ('nodes = "3"\n', "nodes", "a whole number"),
    ("colour = 1\n", "colour", "one of name, description"),
    ('[workload]\nrate = -1\n', "workload.rate", "a number above zero"),
    ('[workload]\nclient_nodes = "any"\n', "workload.client_nodes", "one of 'master'"),
    ('[workload]\nqueues = "q"\n', "workload.queues", "a list of strings"),
    ('[phases]\nwarmup = true\n', "phases.warmup", "a number"),
    ('partition_handling = "pause-minority"\n', "partition_handling", "one of 'ignore'"),
    ('policy = {"ha-mode" = "some"}\n', "policy", "a policy definition the broker takes"),
    ('[nemesis]\npackage = "fire"\n', "nemesis.package", "one of none, kill"),
    ('[nemesis]\npackage = "kill"\ntargets = "boss"\n', "nemesis", "targets must be master"),
    ('[nemesis]\npackage = "partition"\noptions = {kind = "moat"}\n', "nemesis",
     "partition kind must be one of"),
    ('[nemesis]\npackage = "kill"\noptions = {kind = "halves"}\n', "nemesis.options.kind",
     "an option of package 'kill'"),
    ('base = "nope"\n', "base", "the name of a built-in scenario"),
    ('[workload]\npublishers = 0\n', "workload.publishers", "at least one publisher"),
    ('[workload]\nrequeuers = -1\n', "workload.requeuers", "a number not below zero"),
    ('[workload]\ncancel_consumers = 1.5\n', "workload.cancel_consumers", "a whole number"),
    ('[workload]\nbacklog_queues = ["b"]\n', "workload.backlog_queues",
     "queues listed in workload.queues"),
    ('[workload]\nqueues = ["a"]\nbacklog_queues = ["a"]\n', "workload.backlog_queues",
     "at least one queue of workload.queues left for consumers"),
    ('[workload]\npurgers = 1\n', "workload.backlog_queues", "at least one queue for the "
     "purgers"),
    ('[workload]\nexchange = 5\n', "workload.exchange", "a string or nothing"),
    ('[workload]\npurge_interval = 0\n', "workload.purge_interval", "a number above zero"),
    ('[workload]\ncancel_on_failover = true\ncancel_consumers = 1\n',
     "workload.cancel_on_failover", "false when cancel_consumers"),
    ('[phases]\npromotion_drain = "yes"\n', "phases.promotion_drain", "true or false"),
    ('[nemesis]\npackage = "sequence"\n[[nemesis.options.steps]]\nat = 1\n'
     'f = "sync-queue"\nvalue = {queue = "elsewhere"}\n', "nemesis",
     "sync-queue's queue must be one of the workload's queues"),
    ('[nemesis]\npackage = "degrade"\noptions = {links = "master-in"}\n', "nemesis",
     "links must be nodes, clients, all, master-out"),
])
def test_bad_files_name_the_file_the_key_and_what_was_expected(
        tmp_path: Path, text: str, key: str, expected: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, SCENARIOS)
    assert caught.value.key == key
    assert expected in caught.value.expected
    assert str(path) in str(caught.value) and f"'{key}'" in str(caught.value)


def test_not_toml_and_unknown_names_are_scenario_errors(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="valid TOML"):
        load_scenario(write(tmp_path, "nodes = = 3\n"), SCENARIOS)
    with pytest.raises(ScenarioError, match="a built-in scenario name"):
        find_scenario("no-such-scenario")


def test_the_decoy_policies_lose_to_the_runs_own_policy_on_every_workload_queue() -> None:
    """Set beside the run's policy, a decoy is in force on a workload queue only for a
    broker that matches policies wrong (priority inverted, pattern ignored)."""
    for scenario in SCENARIOS.values():
        decoys = decoy_policies(scenario)
        if not scenario.policy:
            assert decoys == {}
            continue
        policies = [Policy.create("/", name, body["pattern"], body["definition"],
                                  body["priority"], body["apply-to"])
                    for name, body in decoys.items()]
        own = Policy.create("/", POLICY_NAME, queue_pattern(scenario), scenario.policy, 0,
                            "queues")
        churned = [f"{CHURN_PREFIX}k1.1"] if scenario.workload.churners else []
        matching = [p for p in [*policies, own] if p.pattern == own.pattern]
        for queue in [*scenario.workload.queues, *churned]:
            assert effective_policy([*policies, own], "/", queue) == own, (scenario.name, queue)
        # what a broker that picks the lowest priority, or ignores patterns, applies
        assert min(matching, key=lambda p: p.priority).name == "mirrorchaos-decoy-lower"
        assert max([*policies, own], key=lambda p: p.priority).name != POLICY_NAME
