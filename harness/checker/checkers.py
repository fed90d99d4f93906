"""The standard set of checkers, composed into one pass."""

from __future__ import annotations

from harness.checker.agreement import KINDS as AGREEMENT_KINDS
from harness.checker.agreement import Agreement
from harness.checker.autoheal import AutohealWrongSide
from harness.checker.cancels import CancelMissing, CancelUnexpected
from harness.checker.completeness import Completeness
from harness.checker.compose import Composed
from harness.checker.corrupted import Corrupted
from harness.checker.duplicates import Duplicates
from harness.checker.failover import Failover
from harness.checker.latency import Latency
from harness.checker.lost import Lost
from harness.checker.ordering import Ordering
from harness.checker.overtaken import Overtaken
from harness.checker.prefetch import OverPrefetch
from harness.checker.promotions import WrongPromotion
from harness.checker.protocol import StreamingChecker
from harness.checker.purges import Purged
from harness.checker.recovered import Recovered
from harness.checker.result import Result
from harness.checker.resurrected import Resurrected
from harness.checker.returns import Unreturned
from harness.checker.rules import RuleBroken
from harness.checker.stalls import Stalls
from harness.checker.throughput import Throughput
from harness.checker.unacked import LostUnacked
from harness.checker.unanswered import Unanswered
from harness.checker.undeleted import Undeleted
from harness.checker.unexpected import Unexpected
from harness.history.reader import History


def default_checkers(bucket_s: float = 1.0) -> list[StreamingChecker]:
    """One checker per concern; each becomes one JUnit test case in reports."""
    return [Completeness(), Lost(), LostUnacked(), Unexpected(), Corrupted(), Unreturned(),
            RuleBroken(), Duplicates(),
            Resurrected(), Recovered(), Unanswered(), Ordering(), Overtaken(),
            CancelMissing(), CancelUnexpected(), Stalls(), OverPrefetch(),
            *(Agreement(kind) for kind in AGREEMENT_KINDS), Undeleted(), Purged(),
            WrongPromotion(),
            AutohealWrongSide(), Latency(bucket_s), Throughput(bucket_s), Failover()]


def check(history: History, checkers: list[StreamingChecker] | None = None) -> Result:
    """Run ``checkers`` (the default set if None) over ``history`` in one pass."""
    return Composed(checkers if checkers is not None else default_checkers()).check(history)
