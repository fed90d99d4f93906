"""``cluster-state`` lines from what the management API lists: a node's own replica is
kept when the node reports one, and a node that does not answer is a ``fail`` line."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from faults.management import Management
from harness.history import HistoryWriter, read_history
from harness.process_node import NodeProcess
from harness.run.cluster_state import queue_states, record_cluster_state
from harness.workload import Recorder


def test_queue_states_keep_what_the_history_names_and_the_local_replica() -> None:
    listing = [
        {"name": "q1", "node": "n1", "slave_nodes": ["n2", "n3"],
         "synchronised_slave_nodes": ["n3"], "messages": 12, "consumers": 2,
         "local": {"role": "mirror", "messages": 11, "extra": True}},
        {"name": "q2", "node": "n2", "slave_nodes": [], "synchronised_slave_nodes": [],
         "messages": 0},
    ]
    assert queue_states(listing) == {
        "q1": {"master": "n1", "mirrors": ["n2", "n3"], "synchronised": ["n3"],
               "messages": 12, "local": {"role": "mirror", "messages": 11}},
        "q2": {"master": "n2", "mirrors": [], "synchronised": [], "messages": 0},
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
