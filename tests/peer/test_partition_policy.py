"""The partition policy fed its failure detector's real outputs, with times: the node
events, app changes and cluster-layer news it asks for under each partition handling."""

from __future__ import annotations

import pytest

from cluster import events
from cluster.breakages import Breaks
from cluster.peer.detector import Event, FailureDetector, Output
from cluster.peer.partition_policy import (
    Action,
    Disconnect,
    Emit,
    Handling,
    PartitionPolicy,
    PauseApp,
    RestartApp,
    ResumeApp,
    TellPeerDown,
    TellPeerUp,
)

ALL = ["n1", "n2", "n3"]


def linked(handling: Handling, me: str = "n1") -> tuple[FailureDetector, PartitionPolicy]:
    """``me`` with both peers up and serving, each told to the cluster layer."""
    peers = [p for p in ALL if p != me]
    detector = FailureDetector(me, peers, tick=1.0, count=4)
    policy = PartitionPolicy(me, detector, handling, Breaks())
    for peer in peers:
        assert TellPeerUp(peer, "i-" + peer) in feed(
            policy, detector.heard(peer, "i-" + peer, True, ALL, now=0.0))
    return detector, policy


def feed(policy: PartitionPolicy, outputs: list[Output], app_takes_input: bool = True,
         ) -> list[Action]:
    """The policy's actions for the detector's events among ``outputs``, as the node
    passes them on."""
    actions: list[Action] = []
    for output in outputs:
        if isinstance(output, Event):
            actions += policy.handle(output, app_takes_input)
    return actions


def back(detector: FailureDetector, peer: str, now: float) -> list[Output]:
    """``peer`` is heard again with the incarnation it had: it never restarted."""
    return detector.heard(peer, "i-" + peer, True, ALL, now=now)


def peer_up(peer: str, partition: bool = True) -> list[Action]:
    reports: list[Action] = [Emit(events.PeerUp(peer=peer, incarnation="i-" + peer,
                                                restarted=False))]
    if partition:
        reports.append(Emit(events.PartitionDetected(peer=peer)))
    return reports


def lost(peer: str) -> Emit:
    return Emit(events.PeerDown(peer=peer, reason="connection closed"))


# -- ignore -----------------------------------------------------------------------------


def test_ignore_tells_a_loss_at_once_and_keeps_the_sides_apart_after_a_partition() -> None:
    detector, policy = linked("ignore")
    assert feed(policy, detector.link_closed("n2", now=1.0)) == [lost("n2"), TellPeerDown("n2")]
    assert feed(policy, detector.answered("n3", "n2", False)) == []  # PeerLost: told before
    assert feed(policy, back(detector, "n2", now=2.0)) == peer_up("n2")  # not merged


def test_a_peer_that_restarted_after_a_partition_heals_it_and_is_told() -> None:
    detector, policy = linked("ignore")
    feed(policy, detector.link_closed("n2", now=1.0))
    feed(policy, detector.answered("n3", "n2", False))
    feed(policy, back(detector, "n2", now=2.0))
    actions = feed(policy, detector.heard("n2", "i-n2b", True, ALL, now=3.0))
    assert actions == [
        Emit(events.PeerDown(peer="n2", reason="restarted")), TellPeerDown("n2"),
        Emit(events.PeerUp(peer="n2", incarnation="i-n2b", restarted=True)),
        Emit(events.PartitionHealed(peer="n2")), TellPeerUp("n2", "i-n2b")]


def test_an_app_that_takes_no_cluster_input_is_told_nothing() -> None:
    detector, policy = linked("ignore")
    assert feed(policy, detector.link_closed("n2", now=1.0), app_takes_input=False) == [lost("n2")]


@pytest.mark.parametrize("handling", ["ignore", "autoheal"])
def test_a_partial_partition_is_made_full_by_disconnecting_from_the_peer_that_hears(
        handling: Handling) -> None:
    detector, policy = linked(handling)
    feed(policy, detector.link_closed("n2", now=1.0))
    assert feed(policy, detector.answered("n3", "n2", True)) == [
        Emit(events.PartialPartition(lost="n2", via="n3")),
        Disconnect("n3", "partial partition: it still hears n2")]


# -- pause_minority ---------------------------------------------------------------------


def test_pause_minority_pauses_before_telling_and_resumes_with_a_majority() -> None:
    detector, policy = linked("pause_minority")
    assert feed(policy, detector.link_closed("n2", now=1.0)) == [lost("n2")]  # not yet told
    # Losing n3 too leaves n1 alone; the settled losses then reach no cluster layer.
    assert feed(policy, detector.link_closed("n3", now=1.1)) == [
        lost("n3"), Emit(events.Paused(reason="minority", reachable=1, nodes=3)), PauseApp()]
    assert policy.paused
    # The app is stopped meanwhile: what comes back is for the app that starts anew.
    assert feed(policy, back(detector, "n2", now=2.0), app_takes_input=False) == [
        *peer_up("n2"), Emit(events.Resumed(reachable=2, nodes=3)), ResumeApp()]
    assert not policy.paused


def test_pause_minority_tells_a_loss_once_settled_and_the_return_without_a_restart() -> None:
    detector, policy = linked("pause_minority")
    feed(policy, detector.link_closed("n2", now=1.0))
    assert feed(policy, detector.answered("n3", "n2", False)) == [TellPeerDown("n2")]
    assert feed(policy, back(detector, "n2", now=2.0)) == [*peer_up("n2"),
                                                           TellPeerUp("n2", "i-n2")]


def test_pause_minority_settles_a_loss_nobody_answered_for_after_a_detection_window() -> None:
    detector, policy = linked("pause_minority")
    feed(policy, detector.link_closed("n2", now=1.0))
    detector.message("n3", now=4.0)  # n3 talks but says nothing of n2
    assert feed(policy, detector.tick(now=4.9)) == []
    assert feed(policy, detector.tick(now=5.1)) == [TellPeerDown("n2")]


def test_pause_minority_restarts_for_a_peer_back_before_its_loss_settled() -> None:
    detector, policy = linked("pause_minority")
    feed(policy, detector.link_closed("n2", now=1.0))
    assert feed(policy, back(detector, "n2", now=1.3)) == [
        *peer_up("n2"),
        Emit(events.Restart(reason="partition healed before its loss settled", peer="n2")),
        RestartApp()]


def test_pause_minority_pauses_for_a_partial_partition_until_the_whole_cluster_is_back(
        ) -> None:
    detector, policy = linked("pause_minority")
    feed(policy, detector.link_closed("n2", now=1.0))
    assert feed(policy, detector.answered("n3", "n2", True)) == [
        Emit(events.PartialPartition(lost="n2", via="n3")),
        Emit(events.Paused(reason="partial partition", reachable=2, nodes=3)), PauseApp()]
    # A majority is not enough now: n3 goes and comes back, n1 stays paused.
    feed(policy, detector.link_closed("n3", now=1.5), app_takes_input=False)
    assert feed(policy, back(detector, "n3", now=2.0), app_takes_input=False) == peer_up("n3")
    assert feed(policy, back(detector, "n2", now=2.5), app_takes_input=False) == [
        *peer_up("n2"), Emit(events.Resumed(reachable=3, nodes=3)), ResumeApp()]


# -- autoheal ---------------------------------------------------------------------------


def part_and_meet(detector: FailureDetector, policy: PartitionPolicy,
                  others: list[str]) -> list[list[Action]]:
    """``others`` part from us, then come back in turn: the actions for each return."""
    for now, peer in enumerate(others, start=1):
        feed(policy, detector.link_closed(peer, now=float(now)))
    return [feed(policy, back(detector, peer, now=float(now)))
            for now, peer in enumerate(others, start=11)]


def test_autoheal_restarts_the_smaller_side() -> None:
    detector, policy = linked("autoheal")
    # n2 back first is a tie that n1 wins; with n3 back too, n1 is the smaller side.
    assert part_and_meet(detector, policy, ["n2", "n3"]) == [
        peer_up("n2"),
        [*peer_up("n3"), Emit(events.Restart(reason="autoheal", winners=("n2", "n3"))),
         RestartApp()]]


def test_autoheal_keeps_the_bigger_side_running() -> None:
    detector, policy = linked("autoheal")
    assert part_and_meet(detector, policy, ["n3"]) == [peer_up("n3")]  # n1 and n2 win


def test_autoheal_breaks_a_tie_for_the_side_with_the_first_node_by_name() -> None:
    for me, other, restarts in (("n1", "n2", False), ("n2", "n1", True)):
        detector, policy = linked("autoheal", me=me)
        feed(policy, detector.link_closed("n3", now=0.5))  # gone for good: one against one
        restart = [Emit(events.Restart(reason="autoheal", winners=(other,))), RestartApp()]
        assert part_and_meet(detector, policy, [other]) == [
            [*peer_up(other), *restart] if restarts else peer_up(other)]
