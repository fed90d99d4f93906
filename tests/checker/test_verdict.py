"""The verdict, its exit codes, composition, crash isolation and results.json."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from harness.checker import (
    Checker,
    Composed,
    Noop,
    Observer,
    Result,
    Run,
    Streaming,
    check,
    check_command,
    default_checkers,
    exit_code,
    merge_validity,
    results_json,
)
from harness.checker.protocol import Handler
from harness.history import Event, HistoryBuilder
from tests.checker.histories import builder, delivered_and_acked, part, run


def _healthy() -> Result:
    b = builder()
    b.consume("c1")
    b.publish("p1-1")
    delivered_and_acked(b, "p1-1")
    b.drain()
    return run(b)


def test_a_healthy_history_is_valid_with_every_checker_agreeing() -> None:
    result = _healthy()
    assert result.valid is True
    assert [p.checker for p in result.parts] == [
        "history", "lost", "lost-unacked", "unexpected", "corrupted", "unreturned",
        "rule-broken",
        "duplicated",
        "resurrected", "recovered", "unanswered", "ordering", "overtaken", "cancel-missing",
        "cancel-unexpected", "stalled", "over-prefetch", "disagreement", "split-brain",
        "sync-incomplete", "under-replicated", "over-replicated", "node-unavailable",
        "undeleted", "purged", "wrong-promotion", "autoheal-wrong-side", "latency",
        "throughput", "failover"]
    assert all(p.valid is True for p in result.parts)


def test_validity_merges_false_over_unknown_over_true() -> None:
    assert merge_validity([True, True]) is True
    assert merge_validity([True, "unknown"]) == "unknown"
    assert merge_validity(["unknown", False, True]) is False
    assert [exit_code(v) for v in (True, False, "unknown")] == [0, 1, 2]


def test_a_history_without_a_final_drain_is_unknown() -> None:
    b = builder()
    b.publish("p1-1")
    b.deliver("p1-1")
    result = run(b)
    assert result.valid == "unknown"
    assert part(result, "history").error == "no final drain recorded"


def test_a_failed_drain_is_unknown() -> None:
    b = builder()
    b.drain(type="info")
    b.drain(queue="q", type="ok")
    result = run(b)
    assert result.valid == "unknown"
    assert "drain of all queues did not succeed" in (result.error or "")


def test_a_violation_in_an_incomplete_history_is_still_invalid() -> None:
    b = builder()
    b.publish("p1-1")
    b.deliver("p1-1")
    b.deliver("p1-1")
    assert run(b).valid is False


def test_an_unverified_heal_is_recorded_and_the_fault_stays_in_force() -> None:
    b = builder(partition_handling="ignore")
    b.publish("p1-1")
    fault = b.fault("partition", ["n1"])
    b.heal(fault, type="fail")
    b.drain()
    result = run(b)
    assert result.data["history"]["heal_failed"] == [fault]
    assert result.caveats[0].faults[0].end is None


class _Exploding(Streaming):
    name = "exploding"

    def __init__(self, when: str) -> None:
        self.when = when

    def start(self, run: Run) -> Observer:
        if self.when == "start":
            raise RuntimeError("boom at start")
        return _ExplodingObserver(self.when)


class _ExplodingObserver:
    def __init__(self, when: str) -> None:
        self.when = when

    def handlers(self) -> Mapping[str, Handler]:
        return {"deliver": self.deliver}

    def deliver(self, ev: Event) -> None:
        if self.when == "event":
            raise ValueError("boom at an event")

    def finish(self) -> Result:
        raise KeyError("boom at finish")


@pytest.mark.parametrize("when", ["start", "event", "finish"])
def test_a_crashing_checker_makes_the_verdict_unknown_and_the_others_still_run(
        when: str) -> None:
    b = builder()
    b.publish("p1-1")
    b.deliver("p1-1")
    b.drain()
    result = Composed([_Exploding(when), *default_checkers()]).check(b.build())
    assert result.valid == "unknown"
    crashed = part(result, "exploding")
    assert crashed.valid == "unknown" and "boom" in (crashed.error or "")
    assert "crashed" in (result.error or "")
    assert part(result, "lost").valid is True


def test_a_crashing_checker_does_not_hide_a_violation() -> None:
    b = builder()
    b.publish("p1-1")
    b.drain()
    assert Composed([_Exploding("event"), *default_checkers()]).check(b.build()).valid is False


def test_each_checker_also_checks_alone_and_the_noop_checker_is_valid() -> None:
    b = builder()
    b.publish("p1-1")
    b.drain()
    history = b.build()
    for checker in [*default_checkers(), Noop()]:
        assert isinstance(checker, Checker)
        assert checker.check(history).checker == checker.name
    assert Noop().check(history).valid is True
    assert default_checkers()[1].check(history).valid is False  # lost


def test_results_json_has_what_the_issue_asks_for() -> None:
    b = builder()
    b.publish("p1-1")
    b.heal(b.fault("kill", ["n1"]))
    b.drain()
    doc = results_json(check(b.build()), b.header)
    json.dumps(doc)  # serialisable as is
    assert doc["valid"] is False
    for key in ("scenario", "seed", "runtime", "counts", "violations", "caveats",
                "latency_ms", "throughput", "availability", "failover", "faults", "checkers"):
        assert key in doc
    for count in ("attempted", "confirmed", "nacked", "indeterminate", "delivered", "lost",
                  "unexpected", "duplicated", "redelivered", "recovered", "caveat_lost"):
        assert isinstance(doc["counts"][count], int)
    (violation,) = doc["violations"]
    assert violation["kind"] == "lost" and violation["messages"] == ["p1-1"]
    assert violation["faults"][0]["kind"] == "kill" and violation["explanation"]
    assert doc["faults"][0]["targets"] == ["n1"]
    assert {"confirm_p50", "confirm_p99"} <= doc["latency_ms"].keys()


def test_check_command_writes_results_and_returns_the_exit_code(tmp_path: Path) -> None:
    cases = {"valid": (_healthy_builder(), 0), "invalid": (_lossy_builder(), 1),
             "unknown": (_undrained_builder(), 2)}
    for name, (b, code) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        b.write(folder / "history.jsonl")
        out = io.StringIO()
        assert check_command(folder, out=out) == code
        written = json.loads((folder / "results.json").read_text())
        assert written["valid"] == json.loads(out.getvalue())["valid"]


def test_check_command_on_bad_input_says_where_and_returns_254(tmp_path: Path) -> None:
    path = _healthy_builder().write(tmp_path / "history.jsonl")
    path.write_text(path.read_text().replace('"op":"ack"', '"op":"acknowledge"'))
    err = io.StringIO()
    assert check_command(path, err=err, out=io.StringIO()) == 254
    assert f"bad input: {path}:" in err.getvalue() and "field 'op'" in err.getvalue()
    assert not (tmp_path / "results.json").exists()
    assert check_command(tmp_path / "nowhere", err=io.StringIO()) == 254


def _healthy_builder() -> HistoryBuilder:
    b = builder()
    b.publish("p1-1")
    delivered_and_acked(b, "p1-1")
    b.drain()
    return b


def _lossy_builder() -> HistoryBuilder:
    b = builder()
    b.publish("p1-1")
    b.drain()
    return b


def _undrained_builder() -> HistoryBuilder:
    b = builder()
    b.publish("p1-1")
    return b
