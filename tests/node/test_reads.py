"""`BufferedReader`: connections that share the node's read buffer each get their own
bytes, whole and in order, over real sockets."""

from __future__ import annotations

import asyncio
import random

from cluster.reads import READ_SIZE, BufferedReader


class Collect(BufferedReader):
    def __init__(self, got: list[bytes]) -> None:
        self.got = got

    def data_received(self, data: bytes) -> None:
        self.got.append(data)


async def _exchange(sizes: list[int]) -> tuple[list[bytes], list[list[bytes]]]:
    loop = asyncio.get_running_loop()
    received: list[list[bytes]] = []

    def protocol() -> Collect:
        received.append([])
        return Collect(received[-1])

    server = await loop.create_server(protocol, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    rng = random.Random(7)
    sent = [rng.randbytes(size) for size in sizes]
    writers = [(await asyncio.open_connection("127.0.0.1", port))[1] for _ in sent]
    # Interleaved: every connection's bytes go through the one buffer by turns.
    for offset in range(0, max(sizes), 40_000):
        for writer, data in zip(writers, sent, strict=True):
            writer.write(data[offset:offset + 40_000])
        await asyncio.gather(*(writer.drain() for writer in writers))
    for writer in writers:
        writer.close()
        await writer.wait_closed()
    deadline = loop.time() + 10
    while sum(len(b"".join(got)) for got in received) < sum(sizes) and loop.time() < deadline:
        await asyncio.sleep(0.01)
    server.close()
    await server.wait_closed()
    return sent, received


def test_each_connection_gets_its_own_bytes_whole() -> None:
    sizes = [3 * READ_SIZE + 17, 1, 123_457]
    sent, received = asyncio.run(_exchange(sizes))
    assert sorted(b"".join(got) for got in received) == sorted(sent)


def test_a_read_is_a_copy_not_a_view_of_the_buffer() -> None:
    """What a protocol kept from one read must not change with the next read."""
    sent, received = asyncio.run(_exchange([2 * READ_SIZE]))
    assert all(type(piece) is bytes for got in received for piece in got)
    assert b"".join(received[0]) == sent[0]
