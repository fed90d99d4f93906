"""`mirrorchaos` command line: parses arguments and dispatches to one module per subcommand.

The program sits at the top layer so that every subcommand, harness's and reports',
can be put on it without a lower layer importing reports: each package gives its
parsers (``add_*``), this module orders them and hands harness what it needs of
reports (the report after a run, the Spark replays of ``shrink``). Run it as the
``mirrorchaos`` script or ``python -m reports.cli``."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Callable, Sequence

from harness.commands import add_bench, add_check, add_demo, add_toxiproxy
from harness.run import add_run, add_scenarios
from harness.runtime import ledger
from harness.runtime.command import add_cluster_command
from harness.runtime.process import stop_recorded
from harness.shrink.command import add_shrink
from harness.shrink.replay import ClosingExecute
from reports.command import add_report_parser, report_run
from reports.compare import add_compare
from reports.power.command import add_power
from reports.soak.command import add_soak

Handler = Callable[[argparse.Namespace], int]


def _spark_replays(master: str, seed: int, runtime: str) -> ClosingExecute:
    from reports.soak.replays import SparkReplays

    return SparkReplays(master, seed, runtime)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mirrorchaos",
        description="Chaos-testing harness for replicated message brokers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_bench(sub)
    add_demo(sub)
    add_check(sub)
    add_report_parser(sub)
    add_toxiproxy(sub)
    add_cluster_command(sub)
    add_run(sub, report=report_run)
    add_scenarios(sub)
    add_compare(sub)
    add_soak(sub)
    add_power(sub)
    add_shrink(sub, on_spark=_spark_replays)
    return parser


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    # SIGTERM (a CI job cancelled, `kill`) stops a run as Ctrl-C does: its cluster and
    # proxies are removed and what it recorded is kept.
    signal.signal(signal.SIGTERM, _interrupt)
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return 2
    # What a killed harness left (node processes, proxies, data and build directories,
    # a build's mmdebstrap) goes as the next one starts. A toxiproxy server, started by
    # a runtime through this command line, is no harness.
    try:
        if args.command != "toxiproxy":
            ledger.reap(stop_recorded)
        return handler(args)
    except KeyboardInterrupt:
        print("mirrorchaos: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
