"""A short run on local processes with every new piece of the workload and the end of a
run: requeuers, cancel consumers and a backlog queue, a fault sequence that black-holes
the master, kills it half a second later and heals, a sync, and the drain by promotion
with the nodes' reports of their queues before it and at the end. On the correct broker
the record is complete and the verdict valid; on nodes that confirm before their mirrors
have a message, the messages confirmed during the black-hole are lost.

The backlog queue comes first, so ``master`` is its master: what that master confirmed
is still queued when it dies, not already consumed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.run.promotion import ACK_GRACE_SECONDS
from tests.run.test_run import events, mirrorchaos

pytestmark = pytest.mark.campaign  # the campaign-tests session

NODES = ["n1", "n2", "n3"]
SCENARIO = """\
name = "promotion-drain"
nodes = 3
[workload]
queues = ["b1", "q1"]
backlog_queues = ["b1"]
publishers = 2
consumers = 1
requeuers = 1
cancel_consumers = 1
rate = 60
[phases]
warmup = 1.0
faults = 4.0
recovery = 2.0
promotion_drain = true
[nemesis]
package = "sequence"
[[nemesis.options.steps]]
at = 0.0
f = "partition"
value = {kind = "isolate", node = "master", mode = "black-hole"}
[[nemesis.options.steps]]
at = 0.5
f = "kill"
value = {nodes = "master"}
[[nemesis.options.steps]]
at = 2.0
f = "heal"
[[nemesis.options.steps]]
at = 3.5
f = "sync-queue"
"""


def faults(lines: list[dict[str, Any]], kind: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in lines:
        if e.get("fault") == kind:
            out.setdefault(e["fault_id"], []).append(e)
    return out


def run(tmp_path: Path, text: str) -> tuple[int, dict[str, Any], Path]:
    scenario = tmp_path / "promotion.toml"
    scenario.write_text(text)
    store = tmp_path / "store"
    done = mirrorchaos("run", str(scenario), "--seed", "11", "--store", str(store), timeout=150)
    run_dir = (store / "latest").resolve()
    results = json.loads((run_dir / "results.json").read_text())
    return done.returncode, results, run_dir


def test_a_run_with_requeues_a_backlog_and_a_drain_by_promotion(tmp_path: Path) -> None:
    code, results, run_dir = run(tmp_path, SCENARIO)
    assert code == 0 and results["valid"] is True, results
    lines = events(run_dir)

    # the workload's new clients
    consumes = {e["process"]: (e["cancel_on_failover"], e["prefetch"]) for e in lines
                if e["op"] == "consume" and e["type"] == "ok"}
    assert consumes["x1"][0] is True and consumes["c1"][0] is False
    assert consumes["r1"] == (False, 1)
    for op in ("nack", "reject"):
        assert any(e["op"] == op and e["type"] == "ok" and e["requeue"] is True
                   and e["process"] == "r1" for e in lines), op
    assert {e["process"] for e in lines if e.get("queue") == "b1" and "msg" in e
            and e["op"] in ("deliver", "get")} == {"drain"}

    # the sequence: the isolated master is the one killed, and both end with the heal
    partition, = faults(lines, "partition").values()
    kills = list(faults(lines, "kill").values())
    assert partition[-1]["op"] == "fault-end" and partition[-1]["type"] == "ok"
    assert kills[0][0]["targets"] == partition[1]["targets"]
    assert [e["op"] + " " + e["type"] for e in kills[0]][-1] == "fault-end ok"

    # syncs: the sequence's (the first queue by default), then one per mirrored queue
    syncs = [(f[0]["queue"], f[-1]["op"], f[-1]["type"]) for f in faults(lines, "sync").values()]
    assert syncs == [("b1", "fault-end", "ok"), ("b1", "fault-end", "ok"),
                     ("q1", "fault-end", "ok")]

    # the drain by promotion: gets while the second kill is in force, after the reports
    states = [e for e in lines if e["op"] == "cluster-state"]
    before = [e for e in states if e["phase"] == "before-drain"]
    end = [e for e in states if e["phase"] == "end"]
    assert sorted(e["node"] for e in before) == sorted(e["node"] for e in end) == NODES
    assert all(e["type"] == "ok" and set(e["queues"]) == {"q1", "b1"} for e in before + end)
    for e in before:  # every queue was synchronised before the drain
        for queue in e["queues"].values():
            assert queue["mirrors"] and set(queue["mirrors"]) <= set(queue["synchronised"])
    promotion = kills[1]
    killed_at = promotion[1]["time"]
    back_at = promotion[-1]["time"]
    assert promotion[-1]["op"] == "fault-end" and promotion[-1]["type"] == "ok"
    assert max(e["time"] for e in before) < killed_at
    gets = [e for e in lines if e["process"] == "drain" and e["op"] == "get"
            and e["type"] == "ok" and killed_at < e["time"] < back_at]
    assert any(e["queue"] == "b1" and "msg" in e for e in gets)  # the backlog, promoted
    assert promotion[1]["targets"][0] not in {e["node"] for e in gets}
    # each drainer stayed connected after its last ack, so the broker had every ack
    acked = max(e["time"] for e in lines if e["process"] == "drain" and e["op"] == "ack"
                and e["queue"] == "b1" and killed_at < e["time"] < back_at)
    closed = min(e["time"] for e in lines if e["process"] == "drain"
                 and e["op"] == "disconnect" and e["time"] > acked)
    assert closed - acked >= ACK_GRACE_SECONDS
    assert min(e["time"] for e in end) > back_at


def test_confirms_before_the_mirrors_have_the_message_are_caught(tmp_path: Path) -> None:
    code, results, _ = run(tmp_path, 'node_args = ["--break", "early-confirm"]\n' + SCENARIO)
    assert code == 1 and results["valid"] is False
    assert "lost" in {v["kind"] for v in results["violations"]}
    assert results["counts"]["lost"] > 0
