"""For a `mirrorchaos run` started as a child of another harness process (a soak task,
a shrink replay): it is interrupted when that parent dies."""

from __future__ import annotations

import ctypes
import signal

_PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies
_SIG_DFL = 0  # signal(2): the default disposition


def interrupt_when_orphaned() -> None:
    """In the child, before it starts (``preexec_fn``): SIGINT when its parent dies (a
    campaign stopped by its driver takes its workers down without a word; a killed
    shrink leaves its replay), so that the run winds its cluster down and stores its
    history rather than going on alone. SIGINT goes back to its default first: a parent
    started in the background (`nohup ... &`, a shell without job control) has it
    ignored, and the run would inherit that and never hear of the death."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.signal(signal.SIGINT, _SIG_DFL)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT)
