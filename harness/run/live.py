"""The live display of a run: phase and its progress (the step it is at,
e.g. the node image's build), faults in force, op rates, and anomalies seen so far.
Shown only on a terminal; otherwise the run prints a line per phase and per step."""

from __future__ import annotations

import threading
import time
from collections import Counter

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from harness.run.status import RunStatus

_RATES = ("publish invoke", "confirm ok", "deliver ok", "get ok", "ack ok")


class LiveDisplay:
    """Renders a `RunStatus` a few times a second until stopped."""

    def __init__(self, console: Console, refresh: float = 0.5) -> None:
        self.console = console
        self.refresh = refresh
        self._status: RunStatus | None = None
        self._live: Live | None = None
        self._last: tuple[float, Counter[str]] = (time.monotonic(), Counter())
        self._rates: dict[str, float] = {}
        self._lock = threading.Lock()

    def attach(self, status: RunStatus) -> None:
        self._status = status
        self._live = Live(self.render(), console=self.console, refresh_per_second=4,
                          get_renderable=self.render, transient=False)
        self._live.start()

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()

    def render(self) -> Group | Text:
        status = self._status
        if status is None or status.recorder is None:
            return Text("starting")
        with self._lock:
            self._update_rates(status)
        figures = status.recorder.figures
        elapsed = time.monotonic() - status.phase_started
        phase = f"{status.phase} {elapsed:5.1f}s"
        if status.phase_seconds:
            phase += f" / {status.phase_seconds:.0f}s"
        head = Text.assemble((f"{status.scenario} ", "bold"), f"seed {status.seed}  ",
                             ("phase: ", "dim"), (phase, "cyan"))
        step = status.step
        lines = [head] if step is None else [head, Text.assemble(
            (f"  {time.monotonic() - status.step_started:5.1f}s ", "dim"), step,
            no_wrap=True, overflow="ellipsis")]  # one line, however long the step's text
        faults = ", ".join(status.faults.active.values()) or "none"
        fault_line = Text.assemble(("faults in force: ", "dim"),
                                   (faults, "red" if status.faults.active else "green"),
                                   f"  (started {status.faults.started}, heal failures "
                                   f"{status.faults.heal_failures})")
        table = Table(show_header=True, box=None, pad_edge=False)
        for name in ("confirmed", "nacked", "unknown", "delivered", "unflagged dup",
                     "unexpected", "conn. lost"):
            table.add_column(name, justify="right")
        table.add_row(str(figures.confirmed), str(figures.nacked), str(figures.indeterminate),
                      str(figures.delivered), _alarm(figures.unflagged_duplicates),
                      _alarm(figures.unexpected), str(figures.connection_losses))
        rates = "  ".join(f"{op.split()[0]} {rate:.0f}/s" for op, rate in self._rates.items())
        return Group(*lines, fault_line, Text.assemble(("rates: ", "dim"), rates or "-"),
                     table)

    def _update_rates(self, status: RunStatus) -> None:
        assert status.recorder is not None
        now = time.monotonic()
        then, before = self._last
        if now - then < self.refresh:
            return
        current = Counter({op: status.recorder.figures.ops[op] for op in _RATES})
        self._rates = {op: (current[op] - before[op]) / (now - then) for op in _RATES}
        self._last = (now, current)


def _alarm(count: int) -> Text:
    return Text(str(count), style="bold red" if count else "")
