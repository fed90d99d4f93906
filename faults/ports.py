"""Ports for the servers a run starts: nodes, toxiproxy, published container ports.

A port that ``bind(("", 0))`` hands out comes from the kernel's ephemeral range, the
range every outgoing connection also takes its local port from. Between choosing
such a port and the server binding it, some connection (a node dialling its peers,
a client) can take it, and the server dies with "address already in use". So these
ports come from below the ephemeral range, where only explicit binds land; each is
checked free when handed out and never handed out twice: not by one process, nor by
two at once (campaigns side by side, `mirrorchaos power --jobs N`), as each holds a lock
on a file named after every port it handed out until it exits. Proxies still listen on
port 0: their ports are ephemeral and so never collide with these.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import threading
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 20000  # below this sit well-known services (and the user's own)
TRIES = 200


_handed_out: set[int] = set()
_held: list[int] = []  # the locked files' descriptors
_lock = threading.Lock()
_random = random.SystemRandom()  # not the run's seeded streams: processes pick apart


def ephemeral_low(path: Path = EPHEMERAL_RANGE) -> int:
    """The lowest port of the ephemeral range (Linux's default when unreadable)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def binds(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` that nothing is bound to, outside the ephemeral range."""
    high = ephemeral_low()
    low = LOWEST if high - LOWEST >= 1000 else 1024
    with _lock:
        for _ in range(TRIES):
            port = _random.randrange(low, high)
            if port not in _handed_out and binds(host, port) and _reserve(port):
                _handed_out.add(port)
                return port
    raise OSError(f"no free port on {host} between {low} and {high - 1} after {TRIES} tries")


def reservations_dir() -> Path:
    """One empty file per port ever handed out, shared by every run on the machine; a
    process holds a lock on the file of each port it handed out for as long as it
    lives (the kernel drops the lock when it exits)."""
    return Path(tempfile.gettempdir()) / "mirrorchaos-ports"


def _reserve(port: int) -> bool:
    """Lock ``port``'s file for this process's lifetime; False if another holds it."""
    directory = reservations_dir()
    directory.mkdir(exist_ok=True)
    fd = os.open(directory / str(port), os.O_CREAT | os.O_RDWR, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held.append(fd)
    return True
