"""``forget`` faults (a graceful stop, then ``forget_cluster_node``): the forgotten node
leaves every queue, a queue it mastered promotes its eldest surviving mirror whatever
its policy, and started again it is a new, empty, unsynchronised mirror. Judged from
the harness's record only."""

from __future__ import annotations

from typing import Any

from harness.history import HistoryBuilder
from tests.checker.histories import builder, excused, part, run, violated

# ha-promote-on-* when-synced: a stop or a crash alone would never promote an
# unsynchronised mirror
_WHEN_SYNCED = {"ha-mode": "all", "ha-promote-on-shutdown": "when-synced",
                "ha-promote-on-failure": "when-synced"}


def _forget(b: HistoryBuilder, node: str) -> str:
    return b.fault("forget", [node], forgotten_by="n3" if node != "n3" else "n2")


def test_a_loss_after_forgetting_a_master_with_synchronised_mirrors_is_a_violation() -> None:
    b = builder(policy=_WHEN_SYNCED)
    b.publish("p1-1")
    b.heal(_forget(b, "n1"))  # n2 was a member at the publish: it holds p1-1
    b.drain()
    result = run(b)
    assert violated(result, "lost") == ["p1-1"]
    assert "held by n2" in result.violations[0].explanation


def test_a_loss_after_forgetting_a_master_whose_only_mirror_just_joined_is_a_caveat() -> None:
    """A stop alone would have left the queue on n1, which reloads p1-1 from disk."""
    b = builder(members=("n1", "n2"), policy=_WHEN_SYNCED)
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n2"]))  # n2 rejoins empty
    b.heal(_forget(b, "n1"))
    b.drain()
    result = run(b)
    assert excused(result, "unsynchronised-promotion") == ["p1-1"]
    assert result.valid is True
    b = builder(members=("n1", "n2"), policy=_WHEN_SYNCED)
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n2"]))
    b.heal(b.fault("stop", ["n1"]))  # the same without the forget: no excuse
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def test_a_forgotten_mirror_started_again_is_a_new_unsynchronised_mirror() -> None:
    b = builder(members=("n1", "n2"))
    b.publish("p1-1")
    b.heal(_forget(b, "n2"))  # back as a new mirror, empty
    b.heal(b.fault("kill", ["n1"]))  # n2, promoted, never held p1-1
    b.drain()
    assert excused(run(b), "unsynchronised-promotion") == ["p1-1"]
    b = builder(members=("n1", "n2"))
    b.publish("p1-1")
    b.heal(_forget(b, "n2"))
    b.heal(b.fault("sync", queue="q"))  # synchronised by the harness: it holds p1-1
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    assert violated(run(b), "lost") == ["p1-1"]


def _listing(master: str, mirrors: tuple[str, ...], local: int = 5,
             synchronised: tuple[str, ...] | None = None) -> dict[str, Any]:
    return {"q": {"master": master, "mirrors": list(mirrors),
                  "synchronised": list(mirrors if synchronised is None else synchronised),
                  "messages": 5, "local": {"role": "mirror", "messages": local}}}


def _forgotten_master_asked(master: str, forgotten_by: str | None = "n3") -> HistoryBuilder:
    """n1 forgotten while n2 is not synchronised; the nodes asked before it starts."""
    b = builder(policy=_WHEN_SYNCED)
    b.heal(b.fault("kill", ["n2", "n3"]))
    detail = {"forgotten_by": forgotten_by} if forgotten_by else {}
    forget = b.fault("forget", ["n1"], type="ok" if forgotten_by else "info", **detail)
    for node in ("n2", "n3"):
        b.cluster_state(node, "settled-1", _listing(master, ("n3",) if master == "n2"
                                                    else ("n2", "n3")))
    b.heal(forget)
    b.drain()
    return b


def test_a_forgotten_master_still_named_while_it_is_down_is_a_disagreement() -> None:
    result = part(run(_forgotten_master_asked("n1")), "disagreement")
    assert result.valid is False
    assert result.violations[0].messages == ["n1"]
    assert "forgotten in f2" in result.violations[0].explanation
    assert part(run(_forgotten_master_asked("n2")), "disagreement").valid is True


def test_a_forget_the_record_does_not_show_done_judges_no_listing() -> None:
    """Stopped, but no node said it forgot it: the queue may rightly wait for it."""
    assert part(run(_forgotten_master_asked("n1", forgotten_by=None)),
                "disagreement").valid is True


def test_a_forgotten_node_listed_as_a_mirror_is_a_disagreement_until_it_starts() -> None:
    b = builder()
    forget = _forget(b, "n3")
    for node in ("n1", "n2"):
        b.cluster_state(node, "settled-1", _listing("n1", ("n2", "n3")))
    b.heal(forget)
    for node in ("n1", "n2", "n3"):
        b.cluster_state(node, "settled-2", _listing("n1", ("n2", "n3")))
    b.drain()
    result = part(run(b), "disagreement")
    assert [a.explanation.split(",")[0] for a in result.violations] == ["at settled-1"]


def test_a_forgotten_queue_without_any_mirror_stays_on_it() -> None:
    b = builder(members=("n1",), policy={})
    forget = _forget(b, "n1")
    b.cluster_state("n2", "settled-1", _listing("n1", ()))
    b.heal(forget)
    b.drain()
    assert part(run(b), "disagreement").valid is True


def test_a_forgotten_node_back_as_a_synchronised_mirror_with_old_messages_is_flagged(
) -> None:
    """Started again it must be empty; listed synchronised holding more than the master
    (what it kept from before the forget), the quiet snapshot shows it."""
    b = builder()
    b.publish("p1-1")
    b.heal(_forget(b, "n3"))
    b.deliver("p1-1")
    b.ack("p1-1")
    for node, local in (("n1", 0), ("n2", 0), ("n3", 1)):
        b.cluster_state(node, "quiet", {"q": {**_listing("n1", ("n2", "n3"), local)["q"],
                                              "messages": 0}})
    b.drain()
    result = run(b)
    assert result.valid is False
    anomaly = next(a for a in result.violations if a.kind == "disagreement")
    assert anomaly.messages == ["n1", "n3"]
