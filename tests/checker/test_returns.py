"""``unreturned``: a mandatory publish no queue could take, confirmed without its
basic.return, is a violation whatever the faults; a returned one, or one whose answer
never came, is only counted."""

from __future__ import annotations

import pytest

from harness.history import BadHistory, HistoryBuilder
from tests.checker.histories import builder, part, run, violated


def _probe(b: HistoryBuilder, probe: str, type: str = "ok", **outcome: object) -> None:
    b.add("p1", "unroutable", "invoke", probe=probe, key="mirrorchaos.unroutable")
    b.add("p1", "unroutable", type, probe=probe, **outcome)


def test_a_returned_probe_is_valid_and_counted() -> None:
    b = builder()
    _probe(b, "p1-u1", returned=True)
    _probe(b, "p1-u2", "info", error="ConnectionLost")
    b.drain()
    result = part(run(b), "unreturned")
    assert result.valid is True
    assert (result.counts["unroutable_probes"], result.counts["unroutable_returned"],
            result.counts["unroutable_unknown"]) == (2, 1, 1)


def test_a_probe_confirmed_without_its_return_is_a_violation_even_under_a_fault() -> None:
    b = builder()
    b.at(1.0).fault("kill", ["n1"])  # no fault gives an unroutable key a route
    _probe(b, "p1-u1", returned=False)
    b.drain()
    result = run(b)
    assert violated(result, "unreturned") == ["p1-u1"]
    assert result.valid is False


def test_an_ok_probe_must_say_whether_it_came_back() -> None:
    with pytest.raises(BadHistory, match="'returned': expected true or false"):
        _probe(builder(), "p1-u1")
