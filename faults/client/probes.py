"""TCP probes: do bytes cross a proxy (or reach an upstream) right now?

A probe connects, sends a payload and watches what the far end does. Which reaction
proves the bytes arrived depends on the protocol behind the address, so there are
two kinds: one for servers that answer, one for servers that hang up on a stranger.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` as toxiproxy writes listen addresses."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def _connect(address: str, timeout: float) -> socket.socket | None:
    try:
        return socket.create_connection(split_address(address), timeout=timeout)
    except OSError:
        return None


@dataclass(frozen=True)
class ReplyProbe:
    """Passes when the far end answers ``payload`` with bytes starting with ``expect``
    (any bytes when ``expect`` is empty): both directions carry data."""

    payload: bytes
    expect: bytes = b""

    def __call__(self, address: str, timeout: float) -> bool:
        sock = _connect(address, timeout)
        if sock is None:
            return False
        deadline = time.monotonic() + timeout
        received = b""
        with sock:
            try:
                sock.sendall(self.payload)
                while len(received) < max(1, len(self.expect)):
                    sock.settimeout(max(0.001, deadline - time.monotonic()))
                    chunk = sock.recv(4096)
                    if not chunk:
                        return False
                    received += chunk
            except OSError:  # timeouts included
                return False
        return received.startswith(self.expect)


@dataclass(frozen=True)
class RefusalProbe:
    """Passes when the far end reacts to ``payload``, which it must refuse, by closing
    or resetting the connection (or by answering). For listeners that never speak
    first and never answer, like a node's cluster port: a black-holed path swallows
    the payload and the connection just stays open."""

    payload: bytes

    def __call__(self, address: str, timeout: float) -> bool:
        sock = _connect(address, timeout)
        if sock is None:
            return False
        with sock:
            try:
                sock.sendall(self.payload)
                sock.recv(1)  # b"" (closed) or bytes: either way the far end reacted
            except ConnectionError:
                return True  # reset: the refusal came back as RST
            except OSError:  # timed out: nothing came back
                return False
        return True


# A probe is called with the address to dial and how long it may take.
Probe = Callable[[str, float], bool]
