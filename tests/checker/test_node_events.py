"""Broker nodes' events.jsonl, translated and merged into a run's history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.checker import check_path
from harness.history import BadHistory, read_node_events, read_run
from tests.checker.histories import builder


def _node_file(path: Path, *records: dict[str, Any], tail: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)
    return path


def test_known_node_events_become_history_ops_and_others_stay_generic(tmp_path: Path) -> None:
    path = _node_file(
        tmp_path / "n1.events.jsonl",
        {"ts": 1.0, "mono": 5.0, "node": "n1", "event": "mirror_added", "queue": "q",
         "mirror": "n3"},
        {"ts": 2.0, "mono": 6.0, "node": "n1", "event": "promotion", "queue": "q",
         "master": "n1", "previous": "n2"},
        {"ts": 3.0, "mono": 7.0, "node": "n1", "event": "sync_end", "queue": "q"},
        {"ts": 4.0, "mono": 8.0, "node": "n1", "event": "memory_alarm", "state": "set"},
        tail='{"ts": 5.0, "mono": 9.0, "no')  # cut short by SIGKILL
    events = read_node_events(path)
    assert [(e.op, e.process, e.node, e.queue, e.time, e.wall) for e in events] == [
        ("mirror-added", "n1", "n3", "q", 5.0, 1.0),
        ("promotion", "n1", "n1", "q", 6.0, 2.0),
        ("sync-end", "n1", "n1", "q", 7.0, 3.0),
        ("node-event", "n1", "n1", None, 8.0, 4.0)]
    assert events[1].get("previous") == "n2" and events[3].get("event") == "memory_alarm"
    assert all(e.type == "info" for e in events)


def test_a_bad_node_event_line_names_its_file_and_line(tmp_path: Path) -> None:
    path = _node_file(tmp_path / "n2.events.jsonl",
                      {"ts": 1.0, "mono": 5.0, "node": "n2", "event": "restart"},
                      {"ts": 1.0, "node": "n2", "event": "restart"},
                      {"ts": 1.0, "mono": 6.0, "node": "n2", "event": "restart"})
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
    _node_file(tmp_path / "nodes" / "n1.events.jsonl",
               {"ts": 0.0, "mono": 0.5, "node": "n1", "event": "sync_end", "queue": "q"})
    _node_file(tmp_path / "nodes" / "n2.events.jsonl",
               {"ts": 0.0, "mono": 0.0, "node": "n2", "event": "restart"},
               {"ts": 0.0, "mono": 9.0, "node": "n2", "event": "restart"})
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
    """The broker's own line for a cancelled sync (cluster/ha/coordinator.py emits
    ``outcome="cancelled"``): the loss after it stays the excused unsynchronised
    promotion."""
    _mirrors_back_then_master_killed(tmp_path)
    _node_file(tmp_path / "nodes" / "n1.events.jsonl",
               {"ts": 0.0, "mono": 0.5, "node": "n1", "event": "sync_end", "queue": "q",
                "outcome": "cancelled"})
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
               {"ts": 0.0, "mono": 0.5, "node": "n1", "event": "mirror_synchronised",
                "vhost": "/", "queue": "q", "member": member})
    results = check_path(tmp_path)
    assert results["valid"] is excused
    if excused:
        assert [c["caveat"] for c in results["caveats"]] == ["unsynchronised-promotion"]
    else:
        assert results["violations"][0]["messages"] == ["p1-1"]
