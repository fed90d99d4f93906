"""``cluster-state`` lines from what the management API lists: a node's own replica is
kept when the node reports one, and a node that does not answer is a ``fail`` line; the
mid-run step waits for the nodes to agree, within its bound."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from faults.management import Management
from faults.nemesis import Op
from faults.process.node import NodeProcess
from harness.history import HistoryWriter, read_history
from harness.run.cluster_state import (
    SettledState,
    queue_states,
    record_cluster_state,
    replicas_agree,
    settled,
)
from harness.scenarios.nemesis import SETTLED_STATE
from harness.workload import Recorder


def test_queue_states_keep_what_the_history_names_and_the_local_replica() -> None:
    listing = [
        {"name": "q1", "node": "n1", "slave_nodes": ["n2", "n3"],
         "synchronised_slave_nodes": ["n3"], "messages": 12, "consumers": 2,
         "local": {"role": "mirror", "messages": 11, "extra": True},
         "effective_policy_definition": {"ha-mode": "all"}},
        {"name": "q2", "node": "n2", "slave_nodes": [], "synchronised_slave_nodes": [],
         "messages": 0},
    ]
    assert queue_states(listing) == {
        "q1": {"master": "n1", "mirrors": ["n2", "n3"], "synchronised": ["n3"],
               "messages": 12, "policy": {"ha-mode": "all"},
               "local": {"role": "mirror", "messages": 11}},
        "q2": {"master": "n2", "mirrors": [], "synchronised": [], "messages": 0,
               "policy": {}},
    }


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_node_that_answers_and_one_that_does_not(node: NodeProcess, tmp_path: Path) -> None:
    management = Management(node.mgmt_url)
    management.call("PUT", "/api/queues/%2F/q1", {"durable": True})
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, run_id="r", scenario="t", seed=1, config={
            "nodes": ["n1", "n2"], "partition_handling": "ignore"}) as writer:
        record_cluster_state(Recorder(writer), "end", {
            "n1": management, "n2": Management(f"http://127.0.0.1:{closed_port()}")})
    ok, fail = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert (ok["op"], ok["type"], ok["node"], ok["phase"]) == ("cluster-state", "ok", "n1", "end")
    assert ok["queues"]["q1"]["mirrors"] == [] and ok["queues"]["q1"]["messages"] == 0
    assert (fail["type"], fail["node"], fail["phase"]) == ("fail", "n2", "end")
    assert "no answer" in fail["error"]
    assert len(list(read_history(path))) == 2  # lines the history's reader accepts


def test_replicas_agree_once_every_synchronised_mirror_holds_the_masters_count() -> None:
    def view(role: str, held: int, synchronised: tuple[str, ...] = ("n1", "n2")) -> dict:
        return {"master": "n1", "mirrors": ["n2", "n3"], "synchronised": list(synchronised),
                "messages": 0, "local": {"role": role, "messages": held}}

    # the master lists itself among the synchronised (as after a promotion): no matter
    assert replicas_agree({"n1": {"q": view("master", 0)}, "n2": {"q": view("mirror", 0)},
                           "n3": {"q": view("mirror", 5)}})  # n3 is not synchronised
    assert not replicas_agree({"n1": {"q": view("master", 0)},
                               "n2": {"q": view("mirror", 1)}})
    # a mirror that could not be asked, or whose count is unknown, holds nothing back
    assert replicas_agree({"n1": {"q": view("master", 0)}, "n2": "no answer"})


def test_reports_have_settled_when_all_answer_and_name_the_same_masters_and_mirrors() -> None:
    view = {"master": "n1", "mirrors": ["n2", "n3"], "messages": 4}
    assert settled({"n1": {"q": view}, "n2": {"q": {**view, "mirrors": ["n3", "n2"],
                                                    "messages": 9}}})
    assert not settled({"n1": {"q": view}, "n2": {"q": {**view, "master": "n2"}}})
    assert not settled({"n1": {"q": view}, "n2": {}})
    assert not settled({"n1": {"q": view}, "n2": "no answer"})
    assert not settled({})
    # mid-partition, asking the nodes that answer: a paused minority is left out, a
    # second master is not
    assert settled({"n1": {"q": view}, "n2": "app_stopped"}, answering=True)
    assert not settled({"n1": {"q": view}, "n2": {"q": {**view, "master": "n2"}},
                        "n3": "app_stopped"}, answering=True)
    assert not settled({"n1": "app_stopped"}, answering=True)


def test_reports_have_settled_only_once_each_queue_is_placed_as_its_policy_says() -> None:
    """Under exactly 2 with n3 dead, the spare n2 must be the mirror; under all, every
    answering node."""
    alone = {"master": "n1", "mirrors": [], "policy": {"ha-mode": "exactly", "ha-params": 2}}
    assert settled({"n1": {"q": alone}, "n2": {"q": alone}})  # no queue to place
    assert not settled({"n1": {"q": alone}, "n2": {"q": alone}}, queues=["q"])
    placed = {**alone, "mirrors": ["n2"]}
    assert settled({"n1": {"q": placed}, "n2": {"q": placed}}, queues=["q"])
    everywhere = {**placed, "policy": {"ha-mode": "all"}}
    assert settled({"n1": {"q": everywhere}, "n2": {"q": everywhere}}, queues=["q"])
    assert not settled({"n1": {"q": everywhere}, "n2": {"q": everywhere},
                        "n3": {"q": everywhere}}, queues=["q"])


def test_the_settled_step_records_at_once_when_the_nodes_agree(node: NodeProcess,
                                                               tmp_path: Path) -> None:
    management = Management(node.mgmt_url)
    management.call("PUT", "/api/queues/%2F/q1", {"durable": True})
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, run_id="r", scenario="t", seed=1, config={
            "nodes": ["n1"], "partition_handling": "autoheal"}) as writer:
        step = SettledState(Recorder(writer), {"n1": management}, lambda: ["n1"],
                            settle_s=60.0)
        first, second = step.invoke(Op(SETTLED_STATE)), step.invoke(Op(SETTLED_STATE))
    assert (first.type, first.value) == ("ok", {"phase": "settled-1", "settled": True})
    assert second.value["phase"] == "settled-2"
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert [(e["node"], e["phase"], e["type"]) for e in lines] == [
        ("n1", "settled-1", "ok"), ("n1", "settled-2", "ok")]
    assert lines[0]["queues"]["q1"]["master"] == management.call("GET", "/api/overview")["node"]


def test_the_settled_step_records_what_it_has_when_the_bound_runs_out(
        node: NodeProcess, tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    endpoints = {"n1": Management(node.mgmt_url),
                 "n2": Management(f"http://127.0.0.1:{closed_port()}")}
    with HistoryWriter(path, run_id="r", scenario="t", seed=1, config={
            "nodes": ["n1", "n2"], "partition_handling": "autoheal"}) as writer:
        done = SettledState(Recorder(writer), endpoints, lambda: ["n1", "n2"],
                            settle_s=0.5, poll=0.1).invoke(Op(SETTLED_STATE))
    assert done.value == {"phase": "settled-1", "settled": False}
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert [(e["node"], e["type"]) for e in lines] == [("n1", "ok"), ("n2", "fail")]
