"""Client errors reach the event log at most a burst per host and window; the rest are
counted and reported once the window is over."""

from __future__ import annotations

from cluster.session.error_log import ErrorLogLimit


def test_a_host_gets_its_burst_then_is_counted_and_reported_once() -> None:
    limit = ErrorLogLimit(burst=3, window=10.0)
    admitted = [limit.admit("10.0.0.1", 100.0 + i) for i in range(8)]
    assert admitted == [True] * 3 + [False] * 5
    assert limit.ended(109.9) == []  # the window is not over yet
    assert limit.ended(110.0) == [("10.0.0.1", 5)]
    assert limit.ended(200.0) == []  # reported once, then forgotten
    assert limit.admit("10.0.0.1", 200.0)  # a new window


def test_hosts_are_limited_apart() -> None:
    limit = ErrorLogLimit(burst=2, window=10.0)
    for _ in range(5):
        limit.admit("10.0.0.1", 100.0)
    assert limit.admit("10.0.0.2", 100.0)
    assert limit.ended(111.0) == [("10.0.0.1", 3)]


def test_a_window_without_excess_reports_nothing() -> None:
    limit = ErrorLogLimit(burst=2, window=10.0)
    assert limit.admit("10.0.0.1", 100.0) and limit.admit("10.0.0.1", 101.0)
    assert limit.ended(120.0) == []
