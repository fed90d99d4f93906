"""The checker protocols, as Jepsen has them: ``check(history) -> Result``.

Checkers that can share a single streaming pass also implement ``start``: they get the
pass's shared :class:`Run` and return an :class:`Observer` with a handler per op they
care about and a ``finish`` that produces their result. :class:`Composed` runs any
number of them over one read of the history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from harness.checker.result import Result
from harness.checker.run import Run
from harness.history.model import Event
from harness.history.reader import History

Handler = Callable[[Event], None]


@runtime_checkable
class Checker(Protocol):
    name: str

    def check(self, history: History) -> Result: ...


class Observer(Protocol):
    def handlers(self) -> Mapping[str, Handler]:
        """Op name -> function called with each event of that op, before the run
        applies it."""
        ...

    def finish(self) -> Result: ...


class StreamingChecker(Checker, Protocol):
    def start(self, run: Run) -> Observer: ...
