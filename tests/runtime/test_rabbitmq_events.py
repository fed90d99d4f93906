"""Node reports made from RabbitMQ's management listings: the pure watch on listing
sequences, the records read back as node events and by the checker, and the poller
against a real cluster of our own broker (whose management API has RabbitMQ's shapes)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pika
import pytest

from faults.management import Management, ManagementError
from harness.checker.timeline import Timeline
from harness.history.node_events import read_node_events
from harness.runtime import ClusterSpec, ProcessRuntime
from harness.runtime.process import ProcessCluster
from harness.runtime.rabbitmq_events import EventPoller, NodeWatch
from tests.ha_cases import wait_for


def queue(name: str = "q", master: str = "n1", mirrors: tuple[str, ...] = ("n2", "n3"),
          synced: tuple[str, ...] = ("n2", "n3")) -> dict[str, Any]:
    """One entry of ``GET /api/queues/%2F`` as RabbitMQ lists it."""
    return {"name": name, "vhost": "/", "node": master, "state": "running",
            "slave_nodes": list(mirrors), "synchronised_slave_nodes": list(synced)}


def watched(node: str, *listings: list[dict[str, Any]],
            partitions: tuple[list[str], ...] = ()) -> list[list[dict[str, Any]]]:
    """What ``node``'s watch returns for each listing after the first (the baseline),
    observed at mono 1, 2, ... (wall 1001, 1002, ...)."""
    watch = NodeWatch(node)
    parts = partitions or tuple([] for _ in listings)
    out = [watch.observe(q, p, float(i), 1000.0 + i)
           for i, (q, p) in enumerate(zip(listings, parts, strict=True))]
    assert out[0] == [], "the first listing is the baseline"
    return out[1:]


def events(records: list[list[dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    """(event, fields) of each record, leaving out what RabbitMQ's reports never say:
    the line's own keys, the one vhost and the fields left unknown (None)."""
    return [(r["event"], {k: v for k, v in r.items() if v is not None
                          and k not in ("ts", "mono", "node", "event", "vhost")})
            for batch in records for r in batch]


# -- the watch ---------------------------------------------------------------------------

def test_a_mirror_becoming_master_reports_its_promotion_once() -> None:
    out = watched("n2", [queue()], [queue(master="n2", mirrors=("n3",), synced=("n3",))],
                  [queue(master="n2", mirrors=("n3",), synced=("n3",))])
    assert out == [[{"ts": 1001.0, "mono": 1.0, "node": "n2", "event": "promotion",
                     "vhost": "/", "queue": "q", "member": "n2", "synchronised": None,
                     "previous": None}], []]


def test_another_nodes_promotion_is_not_reported() -> None:
    before, after = [queue()], [queue(master="n2", mirrors=("n3",), synced=("n3",))]
    assert watched("n3", before, after) == [[]]
    assert watched("n1", before, after) == [[]], "the old master lost it: no event of ours"


def test_the_baseline_and_unchanged_listings_report_nothing() -> None:
    listing = [queue(), queue("other", master="n3", mirrors=("n1",), synced=())]
    assert watched("n1", listing, listing, listing, partitions=(["n2"], ["n2"], ["n2"])) \
        == [[], []]


def test_a_mirror_dropped_is_reported_but_not_one_promoted() -> None:
    dropped = queue(mirrors=("n3",), synced=("n3",))
    assert events(watched("n2", [queue()], [dropped])) == [
        ("mirror_dropped", {"queue": "q", "member": "n2"})]
    promoted = queue(master="n2", mirrors=("n3",), synced=("n3",))
    assert events(watched("n2", [queue()], [promoted])) == [
        ("promotion", {"queue": "q", "member": "n2"})]


def test_a_mirror_added_then_synchronised_reports_each_when_it_shows() -> None:
    alone = queue(mirrors=(), synced=())
    joined = queue(mirrors=("n2",), synced=())
    synced = queue(mirrors=("n2",), synced=("n2",))
    assert events(watched("n2", [alone], [joined], [synced], [synced])) == [
        ("mirror_added", {"queue": "q", "member": "n2"}),
        ("mirror_synchronised", {"queue": "q", "member": "n2"})]
    # an empty queue's new mirror is synchronised as it joins: both in one listing
    assert events(watched("n2", [alone], [synced])) == [
        ("mirror_added", {"queue": "q", "member": "n2"}),
        ("mirror_synchronised", {"queue": "q", "member": "n2"})]
    # another mirror's sync is not this node's news
    assert watched("n3", [queue(synced=("n3",))], [queue()]) == [[]]


def test_a_mirror_that_restarts_unsynchronised_reports_its_sync_again() -> None:
    fresh = queue(synced=("n3",))
    assert events(watched("n2", [queue()], [fresh], [queue()])) == [
        ("mirror_synchronised", {"queue": "q", "member": "n2"})]


def test_a_vanished_queue_reports_nothing_and_comes_back_as_a_new_one() -> None:
    elsewhere = queue(master="n2", mirrors=(), synced=())
    assert watched("n2", [queue()], [], [elsewhere]) == [[], []], \
        "declared again on n2 after a delete: not a promotion"
    assert events(watched("n3", [queue()], [], [queue()])) == [
        ("mirror_added", {"queue": "q", "member": "n3"}),
        ("mirror_synchronised", {"queue": "q", "member": "n3"})]


def test_a_queue_declared_after_the_baseline_is_no_promotion() -> None:
    assert watched("n1", [], [queue()]) == [[]]


def test_partitions_detected_and_healed() -> None:
    out = watched("n1", [], [], [], [], partitions=([], ["n3", "n2"], ["n3"], []))
    assert events(out) == [("partition_detected", {"peer": "n2"}),
                           ("partition_detected", {"peer": "n3"}),
                           ("partition_healed", {"peer": "n2"}),
                           ("partition_healed", {"peer": "n3"})]


def test_an_unmirrored_queue_lists_no_mirror_keys() -> None:
    plain = {"name": "q", "node": "n1", "state": "running"}
    assert watched("n1", [plain], [plain]) == [[]]


# -- read back ---------------------------------------------------------------------------

def test_records_read_back_as_the_node_reports_the_checker_knows(tmp_path: Path) -> None:
    out = watched("n2", [queue(mirrors=("n3",), synced=("n3",))],
                  [queue(synced=("n3",))], [queue()],
                  [queue(master="n2", mirrors=("n3",), synced=("n3",))],
                  [queue(master="n2", mirrors=("n3",), synced=("n3",))],
                  [queue(master="n3", mirrors=(), synced=())],
                  partitions=([], [], [], ["n1"], [], []))
    path = tmp_path / "n2.events.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for batch in out for r in batch))
    read = read_node_events(path)
    assert [(e.op, e.process, e.node, e.queue, e.time) for e in read] == [
        ("mirror-added", "n2", "n2", "q", 1.0),
        ("node-event", "n2", "n2", "q", 2.0),
        ("partition", "n2", "n1", None, 3.0),
        ("promotion", "n2", "n2", "q", 3.0),
        ("partition-healed", "n2", "n1", None, 4.0),
    ]
    assert all(e.type == "info" for e in read)
    assert read[1].get("event") == "mirror_synchronised"
    assert read[3].get("wall") == 1003.0
    # the checker takes the sync for that one mirror's, not the whole queue's
    timeline = Timeline(str(path))
    for ev in read:
        timeline.node_report(ev)
    assert timeline.syncs == [(2.0, "q", "n2")]


# -- the poller --------------------------------------------------------------------------

class Scripted(Management):
    """A node's management API that answers from a script, one listing a round."""

    def __init__(self, node: str, rounds: list[list[dict[str, Any]] | Exception],
                 listed_as: str | None = None) -> None:
        super().__init__("http://scripted")
        self.name = listed_as or node
        self.rounds = rounds
        self.done = threading.Event()

    def call(self, method: str, path: str, body: Any = None) -> Any:
        if path == "/api/nodes":
            return [{"name": self.name, "partitions": []},
                    {"name": "n9", "partitions": ["n1"]}]
        if len(self.rounds) == 1:
            self.done.set()
        answer = self.rounds.pop(0) if len(self.rounds) > 1 else self.rounds[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_the_poller_skips_a_silent_node_and_records_what_it_cannot_read(
        tmp_path: Path) -> None:
    down = ManagementError("GET /api/queues/%2F", None, "refused")
    n2 = Scripted("n2", [[queue()], down, down, [queue(master="n2", mirrors=(), synced=())]])
    n3 = Scripted("n3", [[queue()], [{"no": "name"}], [queue()]])
    n4 = Scripted("n4", [[queue()]], listed_as="elsewhere")
    paths = {n: tmp_path / f"{n}.events.jsonl" for n in ("n2", "n3", "n4")}
    poller = EventPoller({"n2": n2, "n3": n3, "n4": n4}, paths, interval=0.01)
    poller.start()
    poller.start()
    try:
        assert all(api.done.wait(10) for api in (n2, n3, n4))
    finally:
        poller.stop()
        poller.stop()
    lines = [json.loads(line) for line in paths["n2"].read_text().splitlines()]
    assert [(r["node"], r["event"], r["queue"], r["member"]) for r in lines] == [
        ("n2", "promotion", "q", "n2")], "its state kept while it did not answer"
    assert not paths["n3"].exists(), "nothing changed on n3 once it answered again"
    assert sorted(poller.errors) == [
        "n3: KeyError('name')", "n4: ValueError('/api/nodes does not list n4 itself')"]


# -- against real nodes ------------------------------------------------------------------

TICK = 0.2


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ProcessCluster]:
    spec = ClusterSpec.of(3, tick=TICK, base_dir=tmp_path / "run")
    running = ProcessRuntime().start(spec)
    try:
        yield running
    finally:
        running.stop()


def test_the_poller_reports_the_promotion_after_the_master_is_killed(
        cluster: ProcessCluster, tmp_path: Path) -> None:
    apis = {node: Management(cluster.mgmt_url(node)) for node in cluster.nodes}
    apis["n1"].put_policy("/", "ha-all", {"pattern": "^ha\\.", "definition": {"ha-mode": "all"}})
    with pika.BlockingConnection(pika.ConnectionParameters(*cluster.amqp_address("n1"))) as c:
        c.channel().queue_declare("ha.watched", durable=True)

    def listed(node: str) -> dict[str, Any]:
        found = apis[node].call("GET", "/api/queues/%2F/ha.watched")
        assert isinstance(found, dict)
        return found

    wait_for(lambda: sorted(listed("n1")["synchronised_slave_nodes"]) == ["n2", "n3"],
             "ha.watched mirrored in sync on n2 and n3")
    paths = {node: tmp_path / "nodes" / f"{node}.events.jsonl" for node in cluster.nodes}
    poller = EventPoller(apis, paths, interval=0.1)
    poller.start()
    try:
        wait_for(lambda: all(w.last is not None for w in poller.watches.values()),
                 "every node's baseline, the queue mastered by n1")
        cluster.process_control().kill("n1")
        wait_for(lambda: listed("n2")["node"] != "n1", "a mirror promoted")
        master = listed("n2")["node"]
        wait_for(lambda: paths[master].exists(), f"{master}'s report", timeout=10)
    finally:
        poller.stop()
    reports = read_node_events(paths[master])
    assert [(e.op, e.process, e.node, e.queue) for e in reports] == [
        ("promotion", master, master, "ha.watched")]
    assert not any(paths[n].exists() for n in cluster.nodes if n != master), \
        "only the new master had news of its own"
    assert poller.errors == []
