"""Shared helpers for checker tests: small builders and ways to look at results."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.checker import Result, check
from harness.history import HistoryBuilder

NODES = ("n1", "n2", "n3")


def builder(*, members: tuple[str, ...] = NODES, policy: Mapping[str, Any] | None = None,
            partition_handling: str = "pause_minority", durable: bool = True,
            persistent: bool = True) -> HistoryBuilder:
    """One queue ``q`` mirrored on ``members`` (master first), by default on all nodes."""
    spec = {"members": list(members), "durable": durable,
            "policy": dict(policy if policy is not None else {"ha-mode": "all"})}
    return HistoryBuilder(nodes=NODES, partition_handling=partition_handling,
                          persistent=persistent, queues={"q": spec})


def run(b: HistoryBuilder) -> Result:
    return check(b.build())


def part(result: Result, name: str) -> Result:
    return next(p for p in result.parts if p.checker == name)


def violated(result: Result, kind: str) -> list[str]:
    """Ids of messages with a violation of ``kind``."""
    return sorted(m for a in result.violations if a.kind == kind for m in a.messages)


def excused(result: Result, caveat: str) -> list[str]:
    """Ids of messages excused by ``caveat``."""
    return sorted(m for a in result.caveats if a.caveat == caveat for m in a.messages)


def delivered_and_acked(b: HistoryBuilder, *msgs: str, consumer: str = "c1") -> None:
    for msg in msgs:
        b.deliver(msg, consumer)
        b.ack(msg, consumer)
