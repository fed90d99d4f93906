"""A campaign's progress on stderr while its runs go: runs done, running, waiting,
failing and retried. A line per run as it finishes (and per retry) either way; on a
terminal a live status line under them, elsewhere (CI logs, `nohup`) the status as a
plain line every `PERIOD` seconds, so a long campaign shows it is alive."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.text import Text

from reports.soak.task import RunTask, TaskRecord

PERIOD = 30.0  # seconds between status lines when stderr is no terminal


class Progress:
    def __init__(self, console: Console, planned: int, running: Callable[[], int]) -> None:
        self.console = console
        self.planned = planned
        self.running = running  # tasks running now, as Spark counts them
        self.done = 0
        self.failing = 0  # finished without a valid verdict: not done, or exit 1 or 2
        self.retried: set[str] = set()  # runs run again, by the campaign or by Spark
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._live: Live | None = None
        self._ticker: threading.Thread | None = None

    def status(self) -> str:
        try:
            running = self.running()
        except Exception:  # Spark already stopped: the count is no longer known
            running = 0
        with self._lock:
            waiting = max(self.planned - self.done - running, 0)
            return (f"runs: {self.done}/{self.planned} done, {running} running, {waiting} "
                    f"waiting; {self.failing} failing, {len(self.retried)} retried")

    def finished(self, record: TaskRecord) -> None:
        with self._lock:
            self.done += 1
            if record["status"] != "done" or record["exit_code"] != 0:
                self.failing += 1
            if (record["spark_attempt"] or 0) > 0:
                self.retried.add(record["task"])
        elapsed = "-" if record["elapsed_s"] is None else f"{record['elapsed_s']:.0f}"
        where = f" on {record['worker']} executor {record['executor']}" if record["worker"] else ""
        self._line(f"  {record['task']}: {record['status']} (exit {record['exit_code']}, "
                   f"{elapsed} s){where}" + (f": {record['error']}" if record["status"] == "lost"
                                            else ""))

    def retrying(self, task: RunTask, attempt: int, attempts: int, reason: str) -> None:
        with self._lock:
            self.retried.add(task.name)
        self._line(f"  {task.name}: its Spark job failed ({reason}); same seed again, "
                   f"attempt {attempt + 1} of {attempts}")

    def _line(self, text: str) -> None:
        # soft wrap: seeds, paths and commands stay whole, to copy
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        if self._live is not None:  # the counts under it have changed
            self._live.refresh()

    def __enter__(self) -> Progress:
        if self.console.is_terminal:
            self._live = Live(get_renderable=lambda: Text(self.status(), style="bold"),
                              console=self.console, refresh_per_second=1, transient=True)
            self._live.start()
        else:
            self._ticker = threading.Thread(target=self._tick, name="soak-progress",
                                            daemon=True)
            self._ticker.start()
        return self

    def _tick(self) -> None:
        while not self._stop.wait(PERIOD):
            self._line(self.status())

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._stop.set()
        if self._live is not None:
            self._live.stop()
        if self._ticker is not None:
            self._ticker.join()
        self._line(self.status())
