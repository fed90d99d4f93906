"""What the run tells whoever watches it (the live display, or a line per phase): the
phase it is in, the step of that phase, the faults in force, and a drain's progress."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from harness.run.faults import ActiveFaults
from harness.workload import Recorder

DRAIN_REPORT_SECONDS = 5.0  # how often a drain tells how far it got


@dataclass
class RunStatus:
    """What the live display shows; written by the run, read by the display."""

    scenario: str
    seed: int
    run_dir: Path
    phase: str = "starting"
    phase_started: float = field(default_factory=time.monotonic)
    phase_seconds: float | None = None
    # The phase's latest step (e.g. the node image's build), shown under the phase.
    step: str | None = None
    step_started: float = field(default_factory=time.monotonic)
    faults: ActiveFaults = field(default_factory=ActiveFaults)
    recorder: Recorder | None = None
    on_enter: Callable[[str, float | None], None] | None = None  # told of each phase
    on_step: Callable[[str], None] | None = None  # told of each step

    def enter(self, phase: str, seconds: float | None = None) -> None:
        self.phase, self.phase_started, self.phase_seconds = phase, time.monotonic(), seconds
        self.step = None
        if self.on_enter is not None:
            self.on_enter(phase, seconds)

    def report(self, step: str) -> None:
        """A step of the current phase: the cluster's start passes it as its `Progress`."""
        self.step, self.step_started = step, time.monotonic()
        if self.on_step is not None:
            self.on_step(step)


@contextlib.asynccontextmanager
async def reporting_drained(status: RunStatus, recorder: Recorder) -> AsyncIterator[None]:
    """While the block runs, tell ``status`` every few seconds how many messages it has
    drained: a drain takes one basic.get per message, tens of seconds for thousands."""
    before = recorder.figures.delivered

    async def tell() -> None:
        while True:
            await asyncio.sleep(DRAIN_REPORT_SECONDS)
            status.report(f"messages drained so far: {recorder.figures.delivered - before}")

    teller = asyncio.create_task(tell())
    try:
        yield
    finally:
        teller.cancel()
