"""The semantic checker: one streaming pass over a history, one checker per
concern, documented caveats told apart from violations."""

from harness.checker.checkers import check, default_checkers
from harness.checker.command import check_command, check_path
from harness.checker.completeness import Completeness
from harness.checker.compose import Composed, Noop, Streaming
from harness.checker.duplicates import Duplicates
from harness.checker.latency import Latency
from harness.checker.lost import Lost
from harness.checker.ordering import Ordering
from harness.checker.protocol import Checker, Observer, StreamingChecker
from harness.checker.recovered import Recovered
from harness.checker.result import (
    EXIT_BAD_INPUT,
    EXIT_INVALID,
    EXIT_UNKNOWN,
    EXIT_VALID,
    Anomaly,
    Fault,
    Result,
    Validity,
    exit_code,
    merge_validity,
)
from harness.checker.results import results_json
from harness.checker.run import Run
from harness.checker.throughput import Throughput
from harness.checker.unexpected import Unexpected

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INVALID",
    "EXIT_UNKNOWN",
    "EXIT_VALID",
    "Anomaly",
    "Checker",
    "Completeness",
    "Composed",
    "Duplicates",
    "Fault",
    "Latency",
    "Lost",
    "Noop",
    "Observer",
    "Ordering",
    "Recovered",
    "Result",
    "Run",
    "Streaming",
    "StreamingChecker",
    "Throughput",
    "Unexpected",
    "Validity",
    "check",
    "check_command",
    "check_path",
    "default_checkers",
    "exit_code",
    "merge_validity",
    "results_json",
]
