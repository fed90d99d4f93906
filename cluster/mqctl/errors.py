"""How an mqctl command fails: `CtlError`, and rabbitmqctl's exit codes."""

from __future__ import annotations

EX_OK = 0
EX_USAGE = 64
EX_DATAERR = 65
EX_UNAVAILABLE = 69
EX_SOFTWARE = 70


class CtlError(Exception):
    """A failed command: the message for ``Error: ...`` and rabbitmqctl's exit code.
    ``status`` is the HTTP status when the node answered."""

    def __init__(self, message: str, exit_code: int, status: int | None = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.status = status
