"""Socket reads into one buffer the node keeps, for its client and peer connections.

asyncio's plain `asyncio.Protocol` reads each time into a new 256 KiB bytes object and
shrinks it to what arrived. glibc serves a request that size with mmap, shrinks it with
mremap and frees it with munmap once its mmap threshold has fallen below 256 KiB, which
happens to some processes and not others: such a node made three extra system calls and
page faults on every read (docs/cluster-design.md, "The node shell"). `BufferedReader`
reads into one bytearray instead, and hands its protocol a copy of the bytes that
arrived.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

READ_SIZE = 256 * 1024  # as much as asyncio reads at once by default

# One for every connection: the event loop reads a socket, then calls buffer_updated,
# which copies the bytes out, before it reads the next.
_BUFFER = memoryview(bytearray(READ_SIZE))


class BufferedReader(asyncio.BufferedProtocol):
    """A protocol that reads into the shared buffer and receives bytes as
    `asyncio.Protocol.data_received` does; each subclass defines ``data_received``."""

    data_received: Callable[[bytes], None]

    def get_buffer(self, sizehint: int) -> memoryview:
        return _BUFFER

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(bytes(_BUFFER[:nbytes]))
