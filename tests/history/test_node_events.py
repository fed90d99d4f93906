"""Broker nodes' events.jsonl, translated and merged into a run's history. Every line
here is written through cluster/events.py, the schema the broker itself emits."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any

import pytest

from cluster import events
from harness.checker import check_path
from harness.history import BadHistory, read_node_events, read_run
from tests.checker.histories import builder


def _node_file(path: Path, *records: dict[str, Any], tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def _line(node: str, mono: float, event: events.NodeEvent) -> dict[str, Any]:
    return events.line(event, node, mono, wall=mono - 4.0)


SYNCED = events.SyncEnd(vhost="/", queue="q", outcome="synchronised", mirrors=("n2/a", "n3/b"))
RESTART = events.Restart(reason="autoheal", winners=("n1",))


def test_known_node_events_become_history_ops_and_others_stay_generic(tmp_path: Path) -> None:
    path = _node_file(
        tmp_path / "n1.events.jsonl",
        _line("n1", 5.0, events.MirrorDropped(vhost="/", queue="q", member="n3/9a2c#1",
                                              reason="down")),
        _line("n1", 6.0, events.Promotion(vhost="/", queue="q", member="n1/6f1e#1",
                                          synchronised=True, previous=("n2/77aa#1",))),
        _line("n1", 7.0, SYNCED),
        _line("n1", 8.0, events.MemoryAlarm(state="set", used=10, limit=5)),
        tail='{"ts": 5.0, "mono": 9.0, "no')  # cut short by SIGKILL
    read = read_node_events(path)
    assert [(e.op, e.process, e.node, e.queue, e.time, e.wall) for e in read] == [
        ("mirror-dropped", "n1", "n3", "q", 5.0, 1.0),  # the master's report names the mirror
        ("promotion", "n1", "n1", "q", 6.0, 2.0),
        ("sync-end", "n1", "n1", "q", 7.0, 3.0),
        ("node-event", "n1", "n1", None, 8.0, 4.0)]
    assert read[1].get("previous") == ["n2/77aa#1"] and read[3].get("event") == "memory_alarm"
    assert all(e.type == "info" for e in read)


def test_every_node_event_reads_back_as_a_history_line(tmp_path: Path) -> None:
    """One instance of each event class, written as the broker writes it: the reader
    accepts them all, and each becomes its class's op about its class's subject."""
    samples = [_sample(cls) for cls in events.EVENTS.values()]
    path = _node_file(tmp_path / "n1.events.jsonl",
                      *(_line("n1", float(i), e) for i, e in enumerate(samples)))
    read = read_node_events(path)
    assert [e.op for e in read] == [e.op for e in samples]
    assert [e.node for e in read] == [e.subject() or "n1" for e in samples]


def _sample(cls: type[events.NodeEvent]) -> events.NodeEvent:
    values = {"vhost": "/", "queue": "q", "member": "n2/a#1", "peer": "n3", "state": "set",
              "reason": "down" if cls is events.MirrorDropped else "minority",
              "outcome": "cancelled", "definition": {"ha-mode": "all"}}
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            continue
        hint = events._hints(cls)[f.name]
        if type(None) in typing.get_args(hint):  # optional: a value of its other type
            (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
        fields[f.name] = values.get(f.name) or (
            1.5 if hint is float else 1 if hint is int else True if hint is bool
            else () if typing.get_origin(hint) is tuple else "x")
    return cls(**fields)


@pytest.mark.parametrize(("record", "field"), [
    ({"event": "promotion", "vhost": "/", "queue": "q", "master": "n1"}, "master"),
    ({"event": "sync_end", "vhost": "/", "queue": "q"}, "outcome"),
    ({"event": "sync_end", "vhost": "/", "queue": "q", "outcome": "done"}, "outcome"),
    ({"event": "peer_up", "peer": "n2", "incarnation": "i", "restarted": 1}, "restarted"),
    ({"event": "cluster_wait_timeout", "peers": "n2"}, "peers"),
    ({"event": "promoted", "queue": "q"}, "event"),
])
def test_a_line_outside_the_schema_is_refused_naming_its_key(
        tmp_path: Path, record: dict[str, Any], field: str) -> None:
    path = _node_file(tmp_path / "n1.events.jsonl",
                      {"ts": 1.0, "mono": 5.0, "node": "n1", **record})
    with pytest.raises(BadHistory) as info:
        read_node_events(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 1, field)


def test_a_bad_node_event_line_names_its_file_and_line(tmp_path: Path) -> None:
    restart = _line("n2", 5.0, RESTART)
    path = _node_file(tmp_path / "n2.events.jsonl", restart,
                      {k: v for k, v in restart.items() if k != "mono"}, restart)
    with pytest.raises(BadHistory) as info:
        read_node_events(path)
    assert (info.value.path, info.value.line, info.value.field) == (str(path), 2, "mono")


def _mirrors_back_then_master_killed(run_dir: Path) -> None:
    """p1-1 published, the mirrors killed and back (empty), then the master killed."""
    b = builder()
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n2", "n3"]))
    b.at(1.0)
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    b.write(run_dir / "history.jsonl")


def test_a_run_directory_merges_node_events_by_time(tmp_path: Path) -> None:
    _mirrors_back_then_master_killed(tmp_path)
    # n1 reports a completed sync between the mirrors' restart and its own death
    _node_file(tmp_path / "nodes" / "n1.events.jsonl", _line("n1", 0.5, SYNCED))
    _node_file(tmp_path / "nodes" / "n2.events.jsonl",
               _line("n2", 0.0, RESTART), _line("n2", 9.0, RESTART))
    history = read_run(tmp_path)
    times = [e.time for e in history]
    assert times == sorted(times)
    assert [e.op for e in history].count("restart") == 2
    results = check_path(tmp_path)
    # the sync makes the mirrors hold p1-1: its loss is not excused
    assert results["valid"] is False
    assert results["violations"][0]["messages"] == ["p1-1"]
    assert results["node_reports"] == {"sync-end": 1, "restart": 2}


def test_a_sync_the_broker_reports_cancelled_does_not_make_the_mirrors_hold(
        tmp_path: Path) -> None:
    """The broker's own line for a cancelled sync: the loss after it stays the excused
    unsynchronised promotion."""
    _mirrors_back_then_master_killed(tmp_path)
    _node_file(tmp_path / "nodes" / "n1.events.jsonl",
               _line("n1", 0.5, events.SyncEnd(vhost="/", queue="q", outcome="cancelled")))
    results = check_path(tmp_path)
    assert results["valid"] is True
    assert [c["caveat"] for c in results["caveats"]] == ["unsynchronised-promotion"]


@pytest.mark.parametrize(("member", "excused"), [("n2/6f1e", False), ("n3/9a2c", True)])
def test_a_mirror_the_master_reports_synchronised_by_draining_holds_its_messages(
        tmp_path: Path, member: str, excused: bool) -> None:
    """The master's ``mirror_synchronised`` for one mirror (a sync by draining): that
    mirror, and only it, must hold what the master holds. n2 is the heir: its report
    makes the loss a violation; one about n3 leaves the excused unsynchronised
    promotion."""
    _mirrors_back_then_master_killed(tmp_path)
    _node_file(tmp_path / "nodes" / "n1.events.jsonl",
               _line("n1", 0.5, events.MirrorSynchronised(vhost="/", queue="q",
                                                          member=member)))
    results = check_path(tmp_path)
    assert results["valid"] is excused
    if excused:
        assert [c["caveat"] for c in results["caveats"]] == ["unsynchronised-promotion"]
    else:
        assert results["violations"][0]["messages"] == ["p1-1"]
