"""``lost`` and the documented caveats that may excuse a loss, each in both directions."""

from __future__ import annotations

from harness.history import HistoryBuilder
from tests.checker.histories import builder, delivered_and_acked, excused, part, run, violated


def test_a_delivered_message_is_not_lost() -> None:
    b = builder()
    b.publish("p1-1")
    delivered_and_acked(b, "p1-1")
    b.drain()
    result = run(b)
    assert result.valid is True
    assert result.counts["lost"] == 0


def test_a_confirmed_message_missing_without_any_fault_is_a_violation() -> None:
    b = builder()
    b.publish("p1-1")
    b.publish("p1-2")
    delivered_and_acked(b, "p1-1")
    b.drain()
    result = run(b)
    assert result.valid is False
    assert violated(result, "lost") == ["p1-2"]
    assert result.counts["lost"] == 1 and result.counts["caveat_lost"] == 0
    (loss,) = result.violations
    assert "should still be held by n1, n2, n3" in loss.explanation


def test_unconfirmed_messages_that_vanish_are_not_lost() -> None:
    b = builder()
    b.publish("p1-1", outcome="info")
    b.publish("p1-2", outcome="nack")
    b.publish("p1-3", outcome=None)
    b.drain()
    assert run(b).valid is True


def _mirrors_rejoin_empty(b: HistoryBuilder) -> None:
    """Crash both mirrors and restart them: they rejoin the queue empty."""
    fault = b.fault("kill", ["n2", "n3"])
    b.heal(fault)


def test_master_killed_with_only_unsynchronised_mirrors_is_a_caveat() -> None:
    b = builder()
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.publish("p1-2")  # published after the rejoin: the mirrors hold this one
    kill = b.fault("kill", ["n1"])
    b.heal(kill)
    b.drain()
    result = run(b)
    assert excused(result, "unsynchronised-promotion") == ["p1-1"]
    assert violated(result, "lost") == ["p1-2"]
    caveat = result.caveats[0]
    assert [f.id for f in caveat.faults] == ["f1", "f2"]
    assert "joined after the publish" in caveat.explanation
    assert result.counts["lost"] == 2 and result.counts["caveat_lost"] == 1


def test_the_same_loss_after_a_completed_sync_is_a_violation() -> None:
    b = builder()
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    sync = b.fault("sync", queue="q")
    b.heal(sync)  # the harness saw the sync complete
    kill = b.fault("kill", ["n1"])
    b.heal(kill)
    b.drain()
    result = run(b)
    assert violated(result, "lost") == ["p1-1"]
    assert result.caveats == []


def test_a_node_reported_sync_also_makes_the_mirrors_hold_the_message() -> None:
    b = builder()
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.node_event("sync-end", "n1", queue="q")
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_a_sync_that_did_not_complete_does_not_count() -> None:
    b = builder()
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.heal(b.fault("sync", queue="q"), type="fail")
    b.node_event("sync-end", "n1", queue="q", outcome="cancelled")
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    assert excused(run(b), "unsynchronised-promotion") == ["p1-1"]


def test_a_sync_the_harness_cancelled_does_not_count() -> None:
    """A ``sync-queue`` with ``cancel_after`` that found the sync still going."""
    b = builder()
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.heal(b.fault("sync", queue="q", cancelled=True))
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    assert excused(run(b), "unsynchronised-promotion") == ["p1-1"]
    b = builder()
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.heal(b.fault("sync", queue="q", cancelled=False))  # it had finished by the cancel
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_a_synchronised_mirror_surviving_makes_the_loss_a_violation() -> None:
    b = builder()
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n3"]))  # only n3 rejoins empty; n2 still holds p1-1
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    result = run(b)
    assert violated(result, "lost") == ["p1-1"]
    assert "held by n2" in result.violations[0].explanation


def test_when_synced_keeps_the_queue_on_its_master_instead_of_promoting() -> None:
    b = builder(policy={"ha-mode": "all", "ha-promote-on-failure": "when-synced"})
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.heal(b.fault("kill", ["n1"]))  # no promotion; the restarted master reloads p1-1
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_a_master_still_down_at_the_drain_makes_its_messages_unavailable() -> None:
    b = builder(policy={"ha-mode": "all", "ha-promote-on-failure": "when-synced"})
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.fault("kill", ["n1"])  # never restarted
    b.drain()
    assert excused(run(b), "master-down-at-drain") == ["p1-1"]


def test_transient_messages_die_with_their_only_replica() -> None:
    b = builder(members=("n1",), policy={}, persistent=False)
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    assert excused(run(b), "transient-no-replica") == ["p1-1"]


def test_persistent_messages_survive_their_only_replica_restarting() -> None:
    b = builder(members=("n1",), policy={})
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_a_message_marked_transient_in_a_durable_queue_is_transient() -> None:
    b = builder(members=("n1",), policy={})
    b.publish("p1-1", persistent=False)
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    assert excused(run(b), "transient-no-replica") == ["p1-1"]


def test_graceful_stop_does_not_promote_an_unsynchronised_mirror_by_default() -> None:
    b = builder()
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.heal(b.fault("stop", ["n1"]))  # ha-promote-on-shutdown defaults to when-synced
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_graceful_stop_with_promote_on_shutdown_always_is_a_caveat() -> None:
    b = builder(policy={"ha-mode": "all", "ha-promote-on-shutdown": "always"})
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.heal(b.fault("stop", ["n1"]))
    b.drain()
    assert excused(run(b), "unsynchronised-promotion") == ["p1-1"]


def test_a_policy_change_that_adds_mirrors_adds_them_empty() -> None:
    b = builder(members=("n1",), policy={})
    b.publish("p1-1")
    policy = b.fault("policy", definition={"ha-mode": "all"}, pattern="^q$")
    b.heal(b.fault("kill", ["n1"]))  # n2 was added after the publish: promoted empty
    b.heal(policy)
    b.drain()
    assert excused(run(b), "unsynchronised-promotion") == ["p1-1"]


def test_a_policy_change_for_another_queue_changes_nothing_here() -> None:
    b = builder(members=("n1",), policy={})
    b.publish("p1-1")
    b.fault("policy", definition={"ha-mode": "all"}, pattern="^other$")
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_partition_under_ignore_is_a_split_brain_caveat() -> None:
    b = builder(partition_handling="ignore")
    b.publish("p1-1")
    cut = b.fault("partition", ["n1"])
    b.at(b.now + 2.5).heal(cut)
    b.drain()
    assert excused(run(b), "partition-split-brain") == ["p1-1"]


def test_partition_under_autoheal_is_a_split_brain_caveat() -> None:
    b = builder(partition_handling="autoheal")
    b.publish("p1-1")
    cut = b.fault("partition", grudge={"n3": ["n1", "n2"], "n1": ["n3"], "n2": ["n3"]})
    b.at(b.now + 2.5).heal(cut)
    b.drain()
    assert excused(run(b), "partition-split-brain") == ["p1-1"]


def test_an_autoheal_loser_may_confirm_for_a_moment_after_the_heal() -> None:
    """The losing side serves until the nodes hear each other again and it restarts:
    a publish 1 s after the heal may be lost under autoheal, not under ignore, and
    not long after the heal."""
    for handling, after, caveat in (("autoheal", 1.0, True), ("ignore", 1.0, False),
                                    ("autoheal", 5.0, False)):
        b = builder(partition_handling=handling)
        cut = b.fault("partition", ["n1"])
        b.at(b.now + 2.5).heal(cut)
        b.at(b.now + after).publish("p1-1")
        b.drain()
        result = run(b)
        if caveat:
            assert excused(result, "partition-split-brain") == ["p1-1"], handling
        else:
            assert violated(result, "lost") == ["p1-1"], (handling, after)


def test_under_autoheal_the_side_that_wins_keeps_what_it_confirmed() -> None:
    """n1 cut off from n2 and n3: the bigger side wins, so a publish through n2 must
    survive and one through n1 may be lost; of two alike (n1 and n2 cut from n3 and n4)
    the side with n1 wins. A publisher's node is the one it last connected to."""
    for nodes, cut, via, caveat in (
            (("n1", "n2", "n3"), ["n1"], "n1", True),
            (("n1", "n2", "n3"), ["n1"], "n2", False),
            (("n1", "n2", "n3", "n4"), ["n1", "n2"], "n3", True),
            (("n1", "n2", "n3", "n4"), ["n3", "n4"], "n2", False)):
        b = HistoryBuilder(nodes=nodes, partition_handling="autoheal",
                           queues={"q": {"members": list(nodes)}})
        b.connect("p1", node="n3")
        b.connect("p1", node=via)
        fault = b.fault("partition", cut)
        b.publish("p1-1", node=via)
        b.at(b.now + 2.5).heal(fault)
        b.drain()
        result = run(b)
        if caveat:
            assert excused(result, "partition-split-brain") == ["p1-1"], (cut, via)
        else:
            assert violated(result, "lost") == ["p1-1"], (cut, via)


def test_a_cut_the_nodes_never_detected_is_no_split_brain() -> None:
    """Healed within the detection time, or the node it cut off killed within it: no
    two sides ever served apart, so a loss is judged as the kill's."""
    for kill in (False, True):
        b = builder(members=("n1", "n2"), partition_handling="autoheal")
        b.publish("p1-1")
        cut = b.fault("partition", ["n1"])
        if kill:
            b.at(b.now + 0.8).fault("kill", ["n1"])
        b.at(b.now + (3.0 if kill else 1.0)).heal(cut)
        b.drain()
        assert violated(run(b), "lost") == ["p1-1"], kill


def test_a_partition_that_ended_before_the_publish_excuses_nothing() -> None:
    b = builder(partition_handling="ignore")
    b.heal(b.fault("partition", ["n1"]))
    b.publish("p1-1")
    b.drain()
    result = run(b)
    assert violated(result, "lost") == ["p1-1"]
    assert result.violations[0].faults == ()


def test_pause_minority_pausing_a_mirror_is_no_excuse() -> None:
    b = builder(partition_handling="pause_minority")
    b.publish("p1-1")
    b.heal(b.fault("partition", ["n3"]))  # n3 pauses; the master keeps the message
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_pause_minority_pausing_the_master_promotes_like_a_crash() -> None:
    b = builder(partition_handling="pause_minority")
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.heal(b.fault("partition", ["n1"]))  # n1 is the minority: it pauses
    b.drain()
    assert excused(run(b), "unsynchronised-promotion") == ["p1-1"]


def test_pause_minority_a_one_way_cut_pauses_both_its_ends() -> None:
    b = builder(partition_handling="pause_minority")
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    # n3 cannot hear the master n1; n2 still reaches both, so both ends pause (a
    # partial partition) and n2's empty mirror is promoted.
    b.heal(b.fault("partition", grudge={"n3": ["n1"]}))
    b.drain()
    assert excused(run(b), "unsynchronised-promotion") == ["p1-1"]


def test_pause_minority_a_node_cut_off_from_everyone_pauses_alone() -> None:
    b = builder(partition_handling="pause_minority")
    b.publish("p1-1")
    _mirrors_rejoin_empty(b)
    b.heal(b.fault("partition", grudge={"n3": ["n1", "n2"]}))  # the master keeps running
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_no_ack_consumer_losing_its_connection_after_the_publish_is_a_caveat() -> None:
    b = builder()
    b.consume("c1", mode="no-ack")
    b.publish("p1-1")
    b.disconnect("c1", type="info")
    b.drain()
    assert excused(run(b), "no-ack-in-flight") == ["p1-1"]


def test_ack_mode_consumer_losing_its_connection_is_no_excuse() -> None:
    b = builder()
    b.consume("c1", mode="ack")
    b.publish("p1-1")
    b.disconnect("c1", type="info")
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_no_ack_consumer_that_broke_before_the_publish_is_no_excuse() -> None:
    b = builder()
    b.consume("c1", mode="no-ack")
    b.disconnect("c1", type="info")
    b.publish("p1-1")
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_no_ack_consumer_closing_cleanly_is_no_excuse() -> None:
    b = builder()
    b.consume("c1", mode="no-ack")
    b.publish("p1-1")
    b.disconnect("c1", type="ok")
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_no_ack_consumer_whose_node_crashed_after_the_publish_is_a_caveat() -> None:
    b = builder()
    b.consume("c1", mode="no-ack", node="n3")
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n3"]))
    b.drain()
    assert excused(run(b), "no-ack-in-flight") == ["p1-1"]


def test_no_ack_get_whose_answer_never_came_is_a_caveat() -> None:
    b = builder()
    b.publish("p1-1")
    b.add("g1", "get", "invoke", queue="q", mode="no-ack")
    b.add("g1", "get", "info", queue="q", mode="no-ack")
    b.drain()
    assert excused(run(b), "no-ack-in-flight") == ["p1-1"]


def test_a_fault_the_nemesis_failed_to_inject_excuses_nothing() -> None:
    b = builder()
    b.publish("p1-1")
    b.fault("kill", ["n2", "n3"], type="fail")
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_the_brokers_own_claims_never_excuse_a_loss() -> None:
    b = builder()
    b.publish("p1-1")
    b.node_event("mirror-dropped", "n1", queue="q", node="n2")
    b.node_event("mirror-dropped", "n1", queue="q", node="n3")
    b.node_event("promotion", "n2", queue="q", node="n2", synchronised=False)
    b.node_event("partition", "n1", peer="n2")
    b.drain()
    result = run(b)
    assert violated(result, "lost") == ["p1-1"]
    assert result.data["node_reports"] == {"mirror-dropped": 2, "promotion": 1, "partition": 1}


def test_losses_in_the_same_circumstances_are_one_entry() -> None:
    b = builder()
    for seq in range(3):
        b.publish(f"p1-{seq}")
    _mirrors_rejoin_empty(b)
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    result = run(b)
    (caveat,) = result.caveats
    assert caveat.messages == ["p1-0", "p1-1", "p1-2"]
    assert caveat.queue == "q"


def test_faults_outside_the_messages_life_are_not_its_context() -> None:
    b = builder()
    b.heal(b.fault("latency", ["n1"], latency=100))
    b.publish("p1-1")
    during = b.fault("bandwidth", ["n2"], rate=10)
    b.heal(during)
    b.drain()
    b.fault("kill", ["n3"])  # after the drain
    (loss,) = run(b).violations
    assert [f.id for f in loss.faults] == [during]


def test_without_a_final_drain_undelivered_messages_make_the_verdict_unknown() -> None:
    b = builder()
    b.publish("p1-1")
    result = run(b)
    assert result.valid == "unknown"
    lost = part(result, "lost")
    assert lost.valid == "unknown"
    assert "no final drain recorded for q (1 confirmed" in (lost.error or "")


def test_a_drain_of_one_queue_judges_that_queue() -> None:
    b = builder()
    b.publish("p1-1")
    b.drain(queue="q")
    assert violated(run(b), "lost") == ["p1-1"]


def test_under_pause_minority_a_survivor_in_the_minority_pauses_and_drops_transients() -> None:
    b = builder(persistent=False)
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n1", "n2"]))  # n3 alone is no majority: it pauses too
    b.drain()
    assert excused(run(b), "transient-no-replica") == ["p1-1"]


def test_under_ignore_a_lone_survivor_keeps_transients() -> None:
    b = builder(persistent=False, partition_handling="ignore")
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n1", "n2"]))
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


ALL_NODE_LINKS = ["link:n2->n1", "link:n3->n1", "link:n3->n2", "client:c1->n1"]


def _lost_under(kind: str, links: list[str], *,
                published_after: bool = False) -> HistoryBuilder:
    """p1-1 confirmed while (or, ``published_after``, after) ``kind`` stood on
    ``links``, and never delivered."""
    b = builder(partition_handling="pause_minority")
    fault = b.at(1.0).fault(kind, ["n1", "n2", "n3"], links=links)
    if not published_after:
        b.publish("p1-1")
    b.at(5.0).heal(fault)
    if published_after:
        b.publish("p1-1")
    b.at(10.0).drain()
    return b


def test_links_closing_between_every_node_under_pause_minority_are_a_caveat() -> None:
    for kind in ("limit_data", "reset_peer"):
        result = run(_lost_under(kind, ALL_NODE_LINKS))
        assert excused(result, "pause-churn") == ["p1-1"], kind
        assert result.valid is True


def test_closing_links_excuse_no_loss_they_cannot_explain() -> None:
    """A node the fault left alone keeps the message; a publish after the heal meets no
    churn; latency closes nothing."""
    for b in (_lost_under("limit_data", ["link:n2->n1", "client:c1->n3"]),
              _lost_under("limit_data", ALL_NODE_LINKS, published_after=True),
              _lost_under("latency", ALL_NODE_LINKS)):
        assert violated(run(b), "lost") == ["p1-1"]
