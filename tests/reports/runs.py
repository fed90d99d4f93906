"""Run directories for report tests: a history with faults, node reports and every kind
of anomaly, written as the harness stores a run."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from harness.history import HistoryBuilder

NODES = ("n1", "n2", "n3")


def troubled_history() -> HistoryBuilder:
    """Ten seconds of workload with a kill of the master, a partition and a latency
    fault; p1-3 is lost, p1-5 delivered twice without the flag, p2-2 before p2-1 with no
    requeue in between, x-1 never published, p3-1 lost in flight to a no-ack consumer
    (a caveat)."""
    b = HistoryBuilder(nodes=NODES, partition_handling="pause_minority", scenario="mixed", seed=7,
                       run_id="mixed-20260101T120000-seed7",
                       queues={"q": {"members": list(NODES), "policy": {"ha-mode": "all"}}})
    b.consume("c1", node="n2")
    b.consume("c2", node="n3")
    for i in (1, 2):
        b.at(i * 0.4).publish(f"p1-{i}")
        b.deliver(f"p1-{i}", "c1", node="n2")
        b.ack(f"p1-{i}", "c1")
    for i in (3, 4, 5):
        b.at(i * 0.4).publish(f"p1-{i}")
    b.at(2.1)
    kill = b.fault("kill", ["n1"])
    b.node_event("promotion", "n2", queue="q", node="n2", previous="n1")
    b.at(2.4).publish("p2-1")
    b.publish("p2-2")
    b.deliver("p2-2", "c2", node="n3")
    b.deliver("p2-1", "c2", node="n3")
    b.at(2.6).deliver("p1-4", "c1", node="n2")
    b.deliver("p1-5", "c1", node="n2")
    b.deliver("p1-5", "c1", node="n2")
    b.at(4.0).heal(kill)
    b.node_event("mirror-added", "n2", queue="q", node="n1")
    b.node_event("sync-start", "n2", queue="q", node="n2")
    b.at(4.5).node_event("sync-end", "n2", queue="q", node="n2")
    b.deliver("x-1", "c1", node="n2")
    b.at(5.0)
    cut = b.fault("partition", ["n3"])
    b.node_event("partition", "n1", node="n3")
    b.at(5.2).publish("p1-6", node="n2")
    b.at(5.3).consume("c3", "q2", mode="no-ack", node="n3")
    b.publish("p3-1", "q2", node="n3")
    b.disconnect("c3", type="info", node="n3")
    b.deliver("p1-6", "c1", node="n2")
    b.at(7.0).heal(cut)
    b.node_event("partition-healed", "n1", node="n3")
    b.at(7.5)
    slow = b.fault("latency", ["n2"], latency=200, jitter=20)
    for i in range(8, 12):  # confirms slowed down by the latency toxic
        b.at(7.6 + (i - 8) * 0.35).add("p1", "publish", "invoke", msg=f"p1-{i}", queue="q",
                                       node="n2")
        b.at(b.now + 0.2 + i * 0.01).add("p1", "confirm", "ok", msg=f"p1-{i}", queue="q")
        b.deliver(f"p1-{i}", "c1", node="n2")
    b.at(9.1).heal(slow)
    b.at(9.5).drain()
    return b


def write_run(folder: Path, b: HistoryBuilder) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    b.write(folder / "history.jsonl")
    return folder


def read_results(folder: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    return doc


def busy_history(rate: int = 40, seed: int = 1) -> HistoryBuilder:
    """A minute of steady work at ``rate`` messages/s through a kill of the master (with
    a promotion and a resync), a partition and a latency fault: confirms slow down and
    stop where a real run's would, and a few messages go lost or duplicated."""
    rng = random.Random(seed)
    faults = {"kill": (15.0, 24.0, ["n1"]), "partition": (33.0, 40.0, ["n3"]),
              "latency": (47.0, 54.0, ["n2"])}
    lines: list[tuple[float, int, str, dict[str, Any]]] = []  # time, tiebreak, op, fields

    def during(kind: str, t: float) -> bool:
        start, end, _ = faults[kind]
        return start <= t < end

    last_delivery = 0.0
    for seq in range(1, 60 * rate):
        sent = seq / rate
        if during("kill", sent) and sent < faults["kill"][0] + 2:
            continue  # no master to publish to until the promotion
        slow = 0.2 if during("latency", sent) else 0.0
        confirmed = sent + slow + rng.expovariate(1 / 0.004)
        msg = f"p1-{seq}"
        lines.append((sent, len(lines), "publish", {"msg": msg}))
        lines.append((confirmed, len(lines), "confirm", {"msg": msg}))
        if during("kill", sent) and seq % 97 == 0:
            continue  # lost in the failover
        # one consumer channel: deliveries keep publish order
        delivered = last_delivery = max(confirmed + rng.expovariate(1 / 0.003),
                                        last_delivery + 0.0001)
        lines.append((delivered, len(lines), "deliver", {"msg": msg}))
        if during("partition", sent) and seq % 89 == 0:
            lines.append((delivered + 0.01, len(lines), "deliver", {"msg": msg}))
    for kind, (start, end, targets) in faults.items():
        lines.append((start, len(lines), "fault", {"kind": kind, "targets": targets}))
        lines.append((end, len(lines), "heal", {"kind": kind}))
    node_reports = [(16.9, "promotion", "n2", {"queue": "q", "node": "n2"}),
                    (24.2, "mirror-added", "n2", {"queue": "q", "node": "n1"}),
                    (24.3, "sync-start", "n2", {"queue": "q", "node": "n2"}),
                    (25.8, "sync-end", "n2", {"queue": "q", "node": "n2"}),
                    (33.6, "partition", "n1", {"node": "n3"}),
                    (40.4, "partition-healed", "n1", {"node": "n3"})]
    for time, op, reporter, fields in node_reports:
        lines.append((time, len(lines), op, {"reporter": reporter, **fields}))
    b = HistoryBuilder(nodes=NODES, scenario="mixed", seed=seed,
                       run_id=f"mixed-20260101T120000-seed{seed}", step=0.0)
    b.consume("c1", node="n2")
    fault_ids: dict[str, str] = {}
    for time, _, op, fields in sorted(lines):
        b.at(time)
        if op == "publish":
            b.add("p1", "publish", "invoke", msg=fields["msg"], queue="q", node="n2")
        elif op == "confirm":
            b.add("p1", "confirm", "ok", msg=fields["msg"], queue="q", node="n2")
        elif op == "deliver":
            b.deliver(fields["msg"], node="n2")
        elif op == "fault":
            fault_ids[fields["kind"]] = b.fault(fields["kind"], fields["targets"])
        elif op == "heal":
            b.heal(fault_ids[fields["kind"]])
        else:
            b.node_event(op, fields.pop("reporter"), **fields)
    b.at(61.0).drain()
    return b


def storm_history(faults: list[tuple[str, float, float, str]], *, length: float = 60.0,
                  set_up: float = 0.0) -> HistoryBuilder:
    """``length`` seconds of a publisher and a consumer at 5 messages/s under ``faults``,
    each (kind, start, end, target node) in seconds since the workload began; that is
    ``set_up`` seconds after the run's start, as after a node image build and the cluster's
    start, which the nodes report meanwhile."""
    plan = [(seq / 5, "work", seq) for seq in range(1, int(length * 5))]
    plan += [(start, "fault", i) for i, (_, start, _, _) in enumerate(faults)]
    plan += [(end, "heal", i) for i, (_, _, end, _) in enumerate(faults)]
    b = HistoryBuilder(nodes=NODES, scenario="storm", run_id="storm-20260101T120000-seed1",
                       step=0.0)
    for node in NODES if set_up else ():
        b.at(set_up / 2).node_event("node-event", node, event="node_started", node=node)
    b.at(set_up).consume("c1")
    ids: dict[int, str] = {}
    for time, what, n in sorted(plan):
        b.at(set_up + time)
        if what == "work":
            b.publish(f"p1-{n}")
            b.deliver(f"p1-{n}")
            b.ack(f"p1-{n}")
        elif what == "fault":
            kind, _, _, target = faults[n]
            ids[n] = b.fault(kind, [target])
        else:
            b.heal(ids[n])
    b.at(set_up + length + 1).drain()
    return b


# four kills starting 0.5 s apart, each lasting 6 s
CLOSE_KILLS = [("kill", 10 + i / 2, 16 + i / 2, node)
               for i, node in enumerate(("n1", "n2", "n3", "n1"))]


def fault_storm(count: int = 40, length: float = 60.0,
                seed: int = 3) -> list[tuple[str, float, float, str]]:
    """``count`` faults of four kinds, starting anywhere in ``length`` seconds and
    lasting 0.5-6 s, for :func:`storm_history`."""
    rng = random.Random(seed)
    kinds = ("kill", "partition", "latency", "pause")
    starts = sorted(rng.uniform(1, length - 2) for _ in range(count))
    return [(kinds[i % 4], start, start + rng.uniform(0.5, 6), NODES[i % 3])
            for i, start in enumerate(starts)]
