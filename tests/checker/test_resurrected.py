"""``resurrected``: a delivery after an ack the broker must have had, and the acks the
design may lose (the acking connection or the master failed, or a link fault touched
the master or the acker's node, within the grace period around the ack)."""

from __future__ import annotations

from harness.checker import check
from harness.checker.resurrected import Resurrected
from harness.history import HistoryBuilder
from tests.checker.histories import builder, part, run, violated


def _acked_at_1(node: str = "n2") -> HistoryBuilder:
    """``p1-1`` delivered to c1 (on ``node``) and acked at t=1; the master is n1."""
    b = builder()
    b.connect("c1", node=node)
    b.consume("c1", node=node)
    b.connect("c2", node="n3")
    b.consume("c2", node="n3")
    b.publish("p1-1")
    b.deliver("p1-1", node=node)
    b.at(1.0).ack("p1-1")
    return b


def _redelivered_at_10(b: HistoryBuilder) -> HistoryBuilder:
    b.at(10.0).deliver("p1-1", "c2", redelivered=True, node="n3")
    b.at(12.0).drain()
    return b


def test_a_redelivery_long_after_a_firm_ack_is_a_violation() -> None:
    result = run(_redelivered_at_10(_acked_at_1()))
    assert violated(result, "resurrected") == ["p1-1"]
    assert result.valid is False


def test_an_ack_whose_connection_dropped_within_the_grace_period_may_be_lost() -> None:
    b = _acked_at_1()
    b.at(2.5).disconnect("c1", type="info")
    result = run(_redelivered_at_10(b))
    assert result.valid is True
    assert part(result, "resurrected").counts == {"resurrected": 0, "resurrected_allowed": 1}


def test_a_connection_drop_after_the_grace_period_excuses_nothing() -> None:
    b = _acked_at_1()
    b.at(3.5).disconnect("c1", type="info")
    assert violated(run(_redelivered_at_10(b)), "resurrected") == ["p1-1"]


def test_the_grace_period_is_configurable() -> None:
    b = _acked_at_1()
    b.at(3.5).disconnect("c1", type="info")
    result = check(_redelivered_at_10(b).build(), [Resurrected(grace_s=5.0)])
    assert result.valid is True


def test_a_master_failing_within_the_grace_period_may_lose_the_ack() -> None:
    b = _acked_at_1()
    b.at(2.0).heal(b.fault("kill", ["n1"]))
    assert run(_redelivered_at_10(b)).valid is True


def test_a_master_failing_after_the_grace_period_excuses_nothing() -> None:
    b = _acked_at_1()
    b.at(4.0).heal(b.fault("kill", ["n1"]))
    assert violated(run(_redelivered_at_10(b)), "resurrected") == ["p1-1"]


def test_a_mirror_failing_within_the_grace_period_excuses_nothing() -> None:
    b = _acked_at_1()
    b.at(1.5).heal(b.fault("kill", ["n3"]))
    assert violated(run(_redelivered_at_10(b)), "resurrected") == ["p1-1"]


def test_a_link_fault_on_the_ackers_node_just_after_the_ack_may_lose_it() -> None:
    b = _acked_at_1()
    b.at(2.5).heal(b.fault("latency", ["n2"]))
    assert run(_redelivered_at_10(b)).valid is True


def test_a_link_fault_long_after_the_ack_excuses_nothing() -> None:
    """By then the master had the ack and had passed it to its mirrors."""
    b = _acked_at_1()
    b.at(5.0).heal(b.fault("latency", ["n2"]))
    assert violated(run(_redelivered_at_10(b)), "resurrected") == ["p1-1"]


def test_a_link_fault_elsewhere_excuses_nothing() -> None:
    b = _acked_at_1()
    b.at(2.5).heal(b.fault("latency", ["n3"]))
    assert violated(run(_redelivered_at_10(b)), "resurrected") == ["p1-1"]


def test_a_redelivery_read_by_a_connection_that_then_drops_is_not_judged() -> None:
    b = _acked_at_1()
    b.at(10.0).deliver("p1-1", "c2", redelivered=True, node="n3")
    b.at(11.0).disconnect("c2", type="info")
    b.drain()
    assert part(run(b), "resurrected").counts == {"resurrected": 0, "resurrected_allowed": 1}


def test_an_ack_before_any_delivery_acknowledges_nothing() -> None:
    b = builder()
    b.consume("c1")
    b.publish("p1-1")
    b.ack("p1-1")
    b.at(5.0).deliver("p1-1")
    b.ack("p1-1")
    b.drain()
    assert violated(run(b), "resurrected") == []


def test_a_queue_down_between_the_ack_and_the_redelivery_may_reload_the_ack() -> None:
    b = builder(members=("n1",), policy={"ha-mode": "none"})  # no mirror to promote
    b.consume("c1", node="n2")
    b.publish("p1-1")
    b.deliver("p1-1", node="n2")
    b.at(1.0).ack("p1-1")
    kill = b.at(5.0).fault("kill", ["n1"])
    b.at(6.0).heal(kill)
    b.at(10.0).deliver("p1-1", redelivered=True, node="n2")
    b.ack("p1-1")
    b.drain()
    assert part(run(b), "resurrected").counts == {"resurrected": 0, "resurrected_allowed": 1}


def test_the_ackers_node_is_the_one_it_was_connected_to_when_it_acked() -> None:
    b = builder()
    b.connect("c1", node="n2")
    b.consume("c1", node="n2")
    b.publish("p1-1")
    b.publish("p1-2")
    b.deliver("p1-1", node="n2")
    b.ack("p1-1")
    b.connect("c1", node="n3")  # a new connection, on another node
    b.deliver("p1-2", node="n3")
    b.ack("p1-2")
    b.at(1.5).heal(b.fault("latency", ["n3"]))
    b.at(10.0).deliver("p1-1", "c2", redelivered=True)
    b.deliver("p1-2", "c2", redelivered=True)
    b.at(12.0).drain()
    assert violated(run(b), "resurrected") == ["p1-1"]


def _isolated(node: str) -> dict[str, list[str]]:
    return {n: ([m for m in ("n1", "n2", "n3") if m != node] if n == node else [node])
            for n in ("n1", "n2", "n3")}


def test_a_cut_between_the_master_and_a_mirror_excuses_nothing() -> None:
    """Under pause_minority a cut too short to be detected pauses nobody: the master
    stays and GM passes the ack on to n2 around the cut."""
    b = _acked_at_1()
    b.at(1.5)
    cut = b.fault("partition", ["n3"], grudge=_isolated("n3"))
    b.at(3.0).heal(cut)
    assert violated(run(_redelivered_at_10(b)), "resurrected") == ["p1-1"]


def test_a_detected_cut_of_a_mirror_may_pause_the_master_too() -> None:
    """The master loses n3 while n2 still hears it for a moment: it pauses as for a
    partial partition, and n2 takes over without the ack."""
    b = _acked_at_1()
    b.at(1.5)
    cut = b.fault("partition", ["n3"], grudge=_isolated("n3"))
    b.at(4.0).heal(cut)
    assert run(_redelivered_at_10(b)).valid is True


def test_a_mirror_cut_then_killed_before_detection_excuses_nothing() -> None:
    """The cut stands in the record until the heal, but once its node is dead its
    links close at once: nobody races into a pause."""
    b = _acked_at_1()
    b.at(1.5)
    cut = b.fault("partition", ["n3"], grudge=_isolated("n3"))
    killed = b.at(2.3).fault("kill", ["n3"])
    b.at(4.0).heal(cut)
    b.heal(killed)
    assert violated(run(_redelivered_at_10(b)), "resurrected") == ["p1-1"]


def test_a_cut_that_pauses_the_master_right_after_the_ack_may_lose_it() -> None:
    b = _acked_at_1("n1")
    b.at(1.5)
    cut = b.fault("partition", ["n1"], grudge=_isolated("n1"))
    b.at(3.0).heal(cut)
    assert run(_redelivered_at_10(b)).valid is True


def test_the_ackers_node_failing_within_the_grace_period_may_hold_the_ack() -> None:
    """A paused node keeps the ack it was given; the master requeues what it had
    delivered there once it hears the node went."""
    b = _acked_at_1()
    b.at(1.5).heal(b.fault("pause", ["n2"]))
    assert run(_redelivered_at_10(b)).valid is True


def _back_together(stopped: str) -> HistoryBuilder:
    """Every member killed at 0.3 s and started together at 0.6 s; c1 (on n2) acks at
    3 s; ``stopped`` is stopped gracefully from 3.2 s to 3.5 s."""
    b = builder()
    b.connect("c1", node="n2")
    b.consume("c1", node="n2")
    b.publish("p1-1")
    b.deliver("p1-1", node="n2")
    everyone = b.at(0.3).fault("kill", ["n1", "n2", "n3"])
    b.at(0.6).heal(everyone)
    b.at(3.0).ack("p1-1")
    stop = b.at(3.2).fault("stop", [stopped])
    b.at(3.5).heal(stop)
    return _redelivered_at_10(b)


def test_after_every_member_came_back_at_once_any_of_them_may_be_the_master() -> None:
    """The record cannot tell which of them the cluster settled on: a stop of any of
    them within the grace period may have taken the ack with it."""
    assert run(_back_together("n3")).valid is True


def test_a_master_known_again_after_a_promotion_is_judged_as_before() -> None:
    b = builder()
    b.connect("c1", node="n2")
    b.consume("c1", node="n2")
    everyone = b.at(0.3).fault("kill", ["n1", "n2", "n3"])
    b.at(0.6).heal(everyone)
    killed = b.at(0.8).fault("kill", ["n1"])  # n2 promoted: the master is known again
    b.at(1.0).heal(killed)
    b.at(2.0).publish("p1-1")
    b.deliver("p1-1", node="n2")
    b.at(3.5).ack("p1-1")
    stop = b.at(3.7).fault("stop", ["n3"])
    b.at(4.0).heal(stop)
    assert violated(run(_redelivered_at_10(b)), "resurrected") == ["p1-1"]


def _refused_at_1(requeue: bool) -> HistoryBuilder:
    b = builder()
    b.consume("r1", node="n2")
    b.consume("c2", node="n3")
    b.publish("p1-1")
    b.deliver("p1-1", "r1", node="n2")
    b.at(1.0).reject("p1-1", "r1", requeue=requeue)
    return _redelivered_at_10(b)


def test_a_redelivery_after_a_reject_without_requeue_is_a_violation() -> None:
    """The message was dropped for good: it must never come back."""
    assert violated(run(_refused_at_1(requeue=False)), "resurrected") == ["p1-1"]


def test_a_redelivery_after_a_reject_with_requeue_is_what_was_asked() -> None:
    assert violated(run(_refused_at_1(requeue=True)), "resurrected") == []


def test_a_policy_change_of_the_queue_near_the_ack_may_hand_it_over_without_it() -> None:
    """The master hands over to a synchronised mirror when a new policy leaves its node
    out; an ack on its way is then lost as in a graceful stop."""
    for at, pattern, valid in ((2.0, "^p", False), (2.0, "^q", True), (4.0, "^q", False)):
        b = _acked_at_1()
        b.at(at).heal(b.fault("policy", pattern=pattern,
                              definition={"ha-mode": "nodes", "ha-params": ["n2", "n3"]}))
        assert run(_redelivered_at_10(b)).valid is valid, (at, pattern)


def test_a_redelivery_after_a_no_ack_delivery_is_a_violation_unless_a_failure_excuses_it(
) -> None:
    """A no-ack delivery settles the message as it is sent: a later delivery of it is
    a resurrection, unless the master failed within the grace period (the take may
    not have reached the mirrors)."""
    for kill_at, valid in ((None, False), (1.5, True)):
        b = builder()
        b.connect("a1", node="n2")
        b.consume("a1", mode="no-ack", node="n2")
        b.connect("c2", node="n3")
        b.consume("c2", node="n3")
        b.publish("p1-1")
        b.at(1.0).deliver("p1-1", "a1", mode="no-ack", node="n2")
        if kill_at is not None:
            b.at(kill_at).heal(b.fault("kill", ["n1"]))
        result = run(_redelivered_at_10(b))
        assert part(result, "resurrected").valid is valid, kill_at
