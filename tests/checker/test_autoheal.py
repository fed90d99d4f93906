"""``autoheal-wrong-side``: a node's autoheal restart against the sides of the partition
the harness made, and the restarts it cannot judge."""

from __future__ import annotations

from typing import Any

from harness.history import HistoryBuilder
from tests.checker.histories import builder, part, run, violated


def _healed_cut(targets: list[str], *, last: float = 4.0, handling: str = "autoheal",
                kill_at: float | None = None, **detail: Any) -> HistoryBuilder:
    b = builder(partition_handling=handling)
    cut = b.fault("partition", targets, **detail)
    if kill_at is not None:
        b.at(kill_at).fault("kill", ["n3"])
    b.at(last).heal(cut)
    return b


def _restarted(b: HistoryBuilder, *nodes: str, at: float = 6.0) -> HistoryBuilder:
    b.at(at)
    for node in nodes:
        b.node_event("restart", node, node=node, reason="autoheal")
    b.at(at + 1).drain()
    return b


def test_the_smaller_side_restarting_is_valid() -> None:
    assert run(_restarted(_healed_cut(["n1"]), "n1")).valid is True
    assert run(_restarted(_healed_cut(["n3"]), "n3")).valid is True


def test_a_node_of_the_bigger_side_restarting_is_a_violation() -> None:
    result = run(_restarted(_healed_cut(["n1"]), "n1", "n2"))
    assert violated(result, "autoheal-wrong-side") == ["n2"]
    assert result.valid is False


def test_a_tie_is_won_by_the_side_with_the_first_node() -> None:
    def four() -> HistoryBuilder:
        b = HistoryBuilder(nodes=("n1", "n2", "n3", "n4"), partition_handling="autoheal")
        cut = b.fault("partition", ["n1", "n4"])
        b.at(4.0).heal(cut)
        return b

    assert run(_restarted(four(), "n2", "n3")).valid is True
    assert violated(run(_restarted(four(), "n4")), "autoheal-wrong-side") == ["n4"]


def test_a_grudge_parting_two_sides_is_judged_by_its_sides() -> None:
    grudge = {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}
    b = _healed_cut([], grudge=grudge)
    assert violated(run(_restarted(b, "n3")), "autoheal-wrong-side") == ["n3"]
    b = _healed_cut([], grudge=grudge)
    assert run(_restarted(b, "n1")).valid is True


def test_restarts_the_record_cannot_judge() -> None:
    cases = {
        "too short to detect": _healed_cut(["n1"], last=1.0),
        "a bridge node hears both sides":
            _healed_cut([], grudge={"n1": ["n3"], "n3": ["n1"]}),
        "another fault in between": _healed_cut(["n1"], kill_at=3.0),
        "long after the heal": _healed_cut(["n1"], last=4.0),
    }
    for name, b in cases.items():
        at = 30.0 if name == "long after the heal" else 6.0
        result = run(_restarted(b, "n2", at=at))
        assert part(result, "autoheal-wrong-side").valid is True, name
        assert part(result, "autoheal-wrong-side").counts["restarts_unjudged"] == 1, name


def test_other_partition_handling_is_not_judged() -> None:
    b = _restarted(_healed_cut(["n1"], handling="pause_minority"), "n2")
    assert part(run(b), "autoheal-wrong-side").counts["restarts_unjudged"] == 0
    assert part(run(b), "autoheal-wrong-side").valid is True
