"""How many client errors (refused logins, malformed frames, channel errors) one client
host may put in the event log.

Each host gets ``burst`` lines per window of ``window`` seconds, the window starting at
its first error. Errors beyond that are only counted; once the window is over the count
is reported in one line, so a client that opens thousands of bad connections costs the
log a few lines per window, never a line per connection. Pure: the time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

BURST = 20
WINDOW = 10.0


@dataclass
class _Window:
    started: float
    logged: int = 0
    suppressed: int = 0


class ErrorLogLimit:
    def __init__(self, burst: int = BURST, window: float = WINDOW) -> None:
        self.burst = burst
        self.window = window
        self._hosts: dict[str, _Window] = {}

    def admit(self, host: str, now: float) -> bool:
        """Whether this error of ``host`` goes to the log; counted if not."""
        current = self._hosts.get(host)
        if current is None or now - current.started >= self.window:
            current = self._hosts[host] = _Window(now)
        if current.logged < self.burst:
            current.logged += 1
            return True
        current.suppressed += 1
        return False

    def ended(self, now: float) -> list[tuple[str, int]]:
        """Hosts whose window is over with errors left out of the log, and how many;
        every ended window is forgotten."""
        over = [host for host, w in self._hosts.items() if now - w.started >= self.window]
        suppressed = [(host, self._hosts[host].suppressed) for host in over
                      if self._hosts[host].suppressed]
        for host in over:
            del self._hosts[host]
        return suppressed
