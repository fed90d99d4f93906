"""Throughput through a toxic-free proxy against a direct connection, side by side.

    python -m faults.toxiproxy.bench [--megabytes 128] [--rounds 5]

The proxy server and the sink each run in their own process, as they would in a
campaign; the client alternates direct and proxied transfers of the same size and
the medians are printed as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import socket
import statistics
import struct
import time
import urllib.request
from multiprocessing.connection import Connection

from .server import ToxiproxyServer

_BLOCK = 256 * 1024
_HEADER = struct.Struct("!Q")


def _sink(control: Connection) -> None:
    """Per connection: read a size, then that many bytes, then acknowledge. No
    half-close is used: toxiproxy turns one into a full close."""
    buffer = bytearray(_BLOCK)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        control.send(listener.getsockname()[1])
        while True:
            conn, _ = listener.accept()
            with conn:
                header = conn.recv(_HEADER.size, socket.MSG_WAITALL)
                (remaining,) = _HEADER.unpack(header)
                while remaining:
                    got = conn.recv_into(buffer, min(len(buffer), remaining))
                    if not got:
                        break
                    remaining -= got
                conn.sendall(b"!")


def _proxy_server(control: Connection) -> None:
    async def main() -> None:
        async with ToxiproxyServer("127.0.0.1", 0, seed=0) as server:
            control.send(server.url)
            # Serve until the parent says stop.
            await asyncio.get_running_loop().run_in_executor(None, control.recv)

    asyncio.run(main())


def _transfer(port: int, size: int) -> float:
    """Bytes per second for one transfer of ``size`` bytes to the sink via ``port``."""
    block = memoryview(bytes(_BLOCK))
    with socket.create_connection(("127.0.0.1", port)) as sock:
        start = time.perf_counter()
        sock.sendall(_HEADER.pack(size))
        remaining = size
        while remaining:
            count = min(len(block), remaining)
            sock.sendall(block[:count])
            remaining -= count
        if sock.recv(1) != b"!":
            raise RuntimeError("the sink did not acknowledge the transfer")
        return size / (time.perf_counter() - start)


def _create_proxy(api_url: str, upstream_port: int) -> int:
    body = json.dumps(
        {"name": "bench", "listen": "127.0.0.1:0", "upstream": f"127.0.0.1:{upstream_port}"}
    ).encode()
    request = urllib.request.Request(api_url + "/proxies", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        listen = json.load(response)["listen"]
    return int(listen.rsplit(":", 1)[1])


def run(megabytes: int, rounds: int) -> dict[str, object]:
    context = multiprocessing.get_context("spawn")
    sink_control, sink_end = context.Pipe()
    proxy_control, proxy_end = context.Pipe()
    sink = context.Process(target=_sink, args=(sink_end,), daemon=True)
    proxy = context.Process(target=_proxy_server, args=(proxy_end,), daemon=True)
    sink.start()
    proxy.start()
    try:
        sink_port = sink_control.recv()
        proxy_port = _create_proxy(proxy_control.recv(), sink_port)
        size = megabytes << 20
        direct: list[float] = []
        proxied: list[float] = []
        _transfer(proxy_port, _BLOCK)  # warm-up: first connection, imports, allocations
        for _ in range(rounds):
            direct.append(_transfer(sink_port, size))
            proxied.append(_transfer(proxy_port, size))
    finally:
        proxy_control.send("stop")
        proxy.join(timeout=10)
        sink.terminate()
        sink.join(timeout=10)
    direct_rate, proxied_rate = statistics.median(direct), statistics.median(proxied)
    return {
        "bytes_per_transfer": size,
        "rounds": rounds,
        "direct_bytes_per_s": round(direct_rate),
        "proxied_bytes_per_s": round(proxied_rate),
        "proxied_over_direct": round(proxied_rate / direct_rate, 4),
        "direct_runs": [round(rate) for rate in direct],
        "proxied_runs": [round(rate) for rate in proxied],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=128, help="MiB per transfer")
    parser.add_argument("--rounds", type=int, default=5, help="transfers per path")
    args = parser.parse_args()
    print(json.dumps(run(args.megabytes, args.rounds), indent=2))


if __name__ == "__main__":
    main()
