"""The contract between the broker's event log and the harness's reading of it: a
simulated cluster goes through a mirror's rejoin, a cancelled sync, a mirror dropped by
policy and its master's death; every event its nodes emitted is written as a node
writes it, read back by the history reader, and given to the checker's timeline."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from pamqp import commands

from cluster import events
from harness.checker.timeline import Timeline
from harness.history import read_node_events
from harness.history.model import Event
from tests.cluster.simcluster import SimCluster


def _through_the_reader(sim: SimCluster, root: Path) -> list[Event]:
    """Every event the cluster emitted, one node file each, read back in time order."""
    lines: dict[str, list[str]] = defaultdict(list)
    for mono, (node, event) in enumerate(sim.reports):
        lines[node].append(json.dumps(events.line(event, node, float(mono), float(mono))))
    read: list[Event] = []
    for node, written in lines.items():
        path = root / f"{node}.events.jsonl"
        path.write_text("\n".join(written) + "\n")
        read += read_node_events(path)
    return sorted(read, key=lambda ev: ev.time)


def test_what_the_nodes_emit_reads_as_the_checker_expects(tmp_path: Path) -> None:
    sim = SimCluster(["n1", "n2", "n3"], seed=5)
    sim.set_policy("n1", "^ha", {"ha-mode": "all"})
    client = sim.client("n1")
    client.send(1, commands.Queue.Declare(queue="ha.q", durable=True))
    client.publish(1, b"m0", "ha.q", persistent=True)
    sim.pump()
    sim.kill("n3")
    sim.restart("n3")  # an empty mirror: only a sync makes it hold m0
    rejoined = len(sim.reports)  # the time of the first event after it (see the reader)
    coordinator = sim.coordinators["n1"]
    (queue,) = [q for q in coordinator.queues() if q.name == "ha.q"]
    coordinator.sync(queue)
    coordinator.cancel_sync(queue)
    sim.pump()
    sim.set_policy("n1", "^ha", {"ha-mode": "nodes", "ha-params": ["n1", "n2"]})
    sim.kill("n1")
    sim.pump()

    read = _through_the_reader(sim, tmp_path)
    assert len(read) == len(sim.reports)  # the reader refused none
    about = [(ev.op, ev.process, ev.node) for ev in read if ev.op != "node-event"]
    assert ("mirror-added", "n3", "n3") in about
    assert ("sync-start", "n1", "n1") in about
    assert ("mirror-dropped", "n1", "n3") in about  # the master reports it; it is n3's
    assert ("promotion", "n2", "n2") in about
    (promotion,) = [ev for ev in read if ev.op == "promotion"]
    assert [m.partition("/")[0] for m in promotion.get("previous")] == ["n1"]
    (ended,) = [ev for ev in read if ev.op == "sync-end"]
    assert ended.get("outcome") == "cancelled"

    timeline = Timeline("contract")
    for ev in read:
        timeline.node_report(ev)
    # the cancelled sync made no mirror synchronised (the syncs before were at the
    # declaration: every member holds a message published after it joined)
    assert not [s for s in timeline.syncs if s[0] >= rejoined]
    assert timeline.node_reports["sync-end"] == 1
