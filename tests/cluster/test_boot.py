"""The full-cluster restart rule, as `BootGate` decides it, and its file."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.peer.boot import BootError, BootGate, LastRunningFile

PEERS = frozenset({"n2", "n3"})


def test_a_node_that_stopped_last_or_never_ran_starts_alone() -> None:
    assert BootGate(PEERS, frozenset()).may_start(running=set(), reachable=set())


def test_a_node_that_stopped_first_waits_for_a_peer_that_outlived_it() -> None:
    gate = BootGate(PEERS, frozenset({"n2", "n3"}))
    assert not gate.may_start(running=set(), reachable=set())
    assert not gate.may_start(running=set(), reachable={"n2"})  # n2 is starting as well
    assert gate.may_start(running={"n3"}, reachable={"n3"})


def test_nodes_that_all_outlived_one_another_start_together() -> None:
    # A cluster that crashed at once: each node names the others; once they are all
    # here, none of them runs yet, and they start together.
    gate = BootGate(PEERS, frozenset({"n2", "n3"}))
    assert gate.may_start(running=set(), reachable={"n2", "n3"})


def test_force_boot_skips_the_wait() -> None:
    assert BootGate(PEERS, frozenset({"n2"}), force=True).may_start(set(), set())


def test_the_refusal_names_the_peers_to_start_first() -> None:
    message = BootGate(PEERS, frozenset({"n3", "n2"})).refusal(30)
    assert "stopped while n2, n3 still ran" in message and "30s" in message


def test_discovery_ends_when_every_peer_said_hello() -> None:
    gate = BootGate(PEERS, frozenset())
    assert not gate.discovered({"n2"})
    assert gate.discovered({"n2", "n3"})


def test_the_file_round_trips_and_names_itself_when_broken(tmp_path: Path) -> None:
    file = LastRunningFile(tmp_path / "cluster.json")
    assert file.load() == frozenset()
    file.save(frozenset({"n3", "n2"}))
    assert file.load() == frozenset({"n2", "n3"})
    (tmp_path / "cluster.json").write_text('{"running_peers": "n2"}')
    with pytest.raises(BootError, match=r"cluster\.json: expected"):
        file.load()
    (tmp_path / "cluster.json").write_text("{")
    with pytest.raises(BootError, match=r"cluster\.json: not valid JSON"):
        file.load()
