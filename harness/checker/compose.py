"""Running checkers over one streaming pass, and the no-op checker.

A checker that raises is isolated: its result becomes ``unknown`` with the error, the
others go on (a crashed checker makes the verdict unknown, never valid).
A :class:`BadHistory` is not a crash: it is the input's fault and propagates.
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping, Sequence

from harness.checker.protocol import Handler, Observer, StreamingChecker
from harness.checker.result import Result, merge_validity
from harness.checker.run import Run
from harness.history.errors import BadHistory
from harness.history.reader import History


class Composed:
    """Several checkers, one read of the history; the result holds each one's as a part."""

    def __init__(self, checkers: Sequence[StreamingChecker], name: str = "mirrorchaos") -> None:
        self.name = name
        self.checkers = list(checkers)

    def check(self, history: History) -> Result:
        run = Run(history.header, history.source)
        observers: dict[str, Observer] = {}
        results: dict[str, Result] = {}
        for checker in self.checkers:
            try:
                observers[checker.name] = checker.start(run)
            except Exception as err:  # isolating checkers is the point
                results[checker.name] = _crashed(checker.name, err)
        table, owners = _dispatch(observers, run)
        find = run.ledger.find
        events = 0
        time: float | None = None
        for ev in history:
            if events == 0:
                run.first = ev.time
            events += 1
            time = ev.time
            run.log = find(ev) if ev.producer is not None else None
            for handle in table.get(ev.op, ()):
                try:
                    handle(ev)
                except BadHistory:
                    raise
                except Exception as err:
                    name = owners.get(handle)
                    if name is None:  # the shared state itself failed
                        return self._all_crashed(err, ev.line)
                    results[name] = _crashed(name, err, ev.line)
                    del observers[name]
                    table, owners = _dispatch(observers, run)
        run.events, run.last, run.torn = events, time, history.torn
        for name, observer in observers.items():
            try:
                results[name] = observer.finish()
            except BadHistory:
                raise
            except Exception as err:
                results[name] = _crashed(name, err)
        parts = [results[c.name] for c in self.checkers]
        return self._merge(run, parts)

    def _merge(self, run: Run, parts: list[Result]) -> Result:
        merged = Result(self.name, merge_validity(p.valid for p in parts))
        merged.counts.update(run.ledger.counts())
        t0 = run.header.time
        merged.data.update(events=run.events, ledger_bytes=run.ledger.nbytes(),
                           faults=[f.to_json(t0) for f in run.timeline.faults()],
                           node_reports=dict(run.timeline.node_reports))
        for part in parts:
            merged.counts.update(part.counts)
            merged.violations.extend(part.violations)
            merged.caveats.extend(part.caveats)
            merged.data.update(part.data)
        errors = [f"{p.checker}: {p.error}" for p in parts if p.error]
        merged.error = "; ".join(errors) or None
        merged.parts = parts
        return merged

    def _all_crashed(self, err: Exception, line: int) -> Result:
        parts = [_crashed(c.name, err, line) for c in self.checkers]
        return Result(self.name, "unknown", error=parts[0].error if parts else repr(err),
                      parts=parts)


def _dispatch(observers: Mapping[str, Observer],
              run: Run) -> tuple[dict[str, list[Handler]], dict[Handler, str]]:
    """Op -> the checkers' handlers in order, then the run's own update; and which
    checker owns each handler (the run's own are not listed)."""
    table: dict[str, list[Handler]] = {}
    owners: dict[Handler, str] = {}
    for name, observer in observers.items():
        for op, handle in observer.handlers().items():
            table.setdefault(op, []).append(handle)
            owners[handle] = name
    for op, apply in run.appliers().items():
        table.setdefault(op, []).append(apply)
    return table, owners


def _crashed(name: str, err: Exception, line: int | None = None) -> Result:
    where = f" at history line {line}" if line is not None else ""
    frame = traceback.extract_tb(err.__traceback__)[-1] if err.__traceback__ else None
    origin = f" ({frame.filename}:{frame.lineno})" if frame else ""
    return Result(name, "unknown", error=f"crashed{where}: {err!r}{origin}")


class Streaming:
    """Base for checkers that run in a shared pass; alone, ``check`` is a pass of one."""

    name = "checker"

    def start(self, run: Run) -> Observer:
        raise NotImplementedError

    def check(self, history: History) -> Result:
        return Composed([self], name=self.name).check(history).parts[0]


class Noop(Streaming):
    """Checks nothing and is always valid (for runs whose checking is switched off)."""

    name = "noop"

    def start(self, run: Run) -> Observer:
        return _NoopObserver()


class _NoopObserver:
    def handlers(self) -> Mapping[str, Handler]:
        return {}

    def finish(self) -> Result:
        return Result("noop", True)
