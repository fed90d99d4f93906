"""``python -m faults.toxiproxy``: the server on its own, as the runtimes start it (a
local process, or the toxiproxy container), without the harness's command line above
it. ``mirrorchaos toxiproxy serve`` takes the same arguments."""

from __future__ import annotations

import argparse

from .server import add_serve_arguments, serve


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m faults.toxiproxy",
                                     description="Serve the toxiproxy HTTP API v2.")
    add_serve_arguments(parser)
    args = parser.parse_args()
    serve(args.host, args.port, args.seed)


main()
