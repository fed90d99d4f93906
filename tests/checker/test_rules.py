"""``rule-broken``: an ask the broker must refuse that it did, or one it must do that it
refused, is a violation unless a fault was near it; kept rules and unanswered asks are
only counted."""

from __future__ import annotations

import pytest

from harness.history import BadHistory
from tests.checker.histories import builder, part, run


def test_kept_rules_and_unanswered_asks_are_valid_and_counted() -> None:
    b = builder()
    b.rule("delete-if-empty", "refused", "fail")
    b.rule("consume-shared", "done", "ok")
    b.rule("auto-delete-after-last", "refused", "info")
    b.drain()
    result = part(run(b), "rule-broken")
    assert result.valid is True
    assert result.counts == {"rules_asked": 3, "rules_kept": 2, "rules_unknown": 1,
                             "rules_allowed": 0, "rules_broken": 0}


@pytest.mark.parametrize(("rule", "expect", "answer"), [
    ("delete-if-unused", "refused", "ok"), ("auto-delete-kept", "done", "fail")])
def test_an_answer_against_the_rule_is_a_violation(rule: str, expect: str,
                                                   answer: str) -> None:
    b = builder()
    b.rule(rule, expect, answer, node="n2")
    b.drain()
    result = run(b)
    assert result.valid is False
    [anomaly] = [a for a in result.violations if a.kind == "rule-broken"]
    assert anomaly.messages == [f"e1:{rule}:churn.e1.1"]
    assert f"asked n2 for {rule}" in anomaly.explanation
    assert part(result, "rule-broken").counts["rules_broken"] == 1


def test_a_fault_just_before_the_ask_excuses_it_one_long_healed_or_later_does_not(
) -> None:
    b = builder()
    b.at(1.0)
    fault = b.fault("kill", ["n1"])
    b.at(2.0).heal(fault)
    b.at(3.0).rule("consume-exclusive-held", "refused", "ok")  # within 2 s of the heal
    b.at(10.0).rule("consume-exclusive-held", "refused", "ok", queue="churn.e1.2")
    b.at(10.5).fault("kill", ["n2"])  # after the answer: it changed nothing
    b.drain()
    result = run(b)
    counts = part(result, "rule-broken").counts
    assert (counts["rules_allowed"], counts["rules_broken"]) == (1, 1)
    assert [m for a in result.violations if a.kind == "rule-broken"
            for m in a.messages] == ["e1:consume-exclusive-held:churn.e1.2"]


def test_a_rule_line_must_say_what_it_expects() -> None:
    with pytest.raises(BadHistory, match="'expect': expected done or refused"):
        builder().rule("delete-if-empty", "granted", "ok")
