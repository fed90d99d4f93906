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


def test_of_nodes_starting_together_one_that_a_peer_saw_stop_waits_for_that_peer() -> None:
    # A power loss of all three, killed n2 first, then n3 and n1: n3 saw n2 go down
    # and dropped it from its queues, then confirmed publishes with n1 alone. n2's
    # file names n1 and n3, n3's only n1, n1's only n3. All are here and starting; n2
    # must not start first and make its stale copy the cluster's.
    all_here = {"n1", "n3"}
    told = {"n1": frozenset({"n3"}), "n3": frozenset({"n1"})}
    n2 = BootGate(frozenset({"n1", "n3"}), frozenset({"n1", "n3"}), me="n2")
    assert n2.saw_us_stop(told) == ["n1", "n3"]
    assert not n2.may_start(running=set(), reachable=all_here, outlived_by=told)
    assert n2.may_start(running={"n3"}, reachable=all_here, outlived_by=told)
    # n1 and n3 crashed without either seeing the other stop: they start together.
    n1 = BootGate(frozenset({"n2", "n3"}), frozenset({"n3"}), me="n1")
    told_n1 = {"n2": frozenset({"n1", "n3"}), "n3": frozenset({"n1"})}
    assert n1.may_start(running=set(), reachable={"n2", "n3"}, outlived_by=told_n1)
    n3 = BootGate(frozenset({"n1", "n2"}), frozenset({"n1"}), me="n3")
    told_n3 = {"n2": frozenset({"n1", "n3"}), "n1": frozenset({"n3"})}
    assert n3.may_start(running=set(), reachable={"n1", "n2"}, outlived_by=told_n3)


def test_a_peer_that_stopped_last_was_seen_stopping_by_nobody_but_saw_us() -> None:
    # Its file is empty: it starts at once, and we wait for it.
    gate = BootGate(PEERS, frozenset({"n2"}), me="n1")
    told = {"n2": frozenset(), "n3": frozenset({"n1", "n2"})}
    assert not gate.may_start(running=set(), reachable={"n2", "n3"}, outlived_by=told)
    assert gate.may_start(running={"n2"}, reachable={"n2", "n3"}, outlived_by=told)


def test_peers_that_do_not_say_whom_their_file_names_start_together_as_before() -> None:
    gate = BootGate(PEERS, frozenset({"n2", "n3"}), me="n1")
    assert gate.may_start(running=set(), reachable={"n2", "n3"}, outlived_by={})
