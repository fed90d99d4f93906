"""The harness's subcommands that have no package of their own: ``bench``, ``demo``,
``check`` and ``toxiproxy``. The `mirrorchaos` command line that puts them beside the
others is `reports.cli`."""

from __future__ import annotations

import argparse
from typing import TypeVar

from faults.toxiproxy import serve as serve_toxiproxy
from faults.toxiproxy.server import add_serve_arguments
from harness import bench, demo
from harness.arguments import non_negative_int, positive_float, positive_int
from harness.checker import check_command

SubParsers = argparse._SubParsersAction
_T = TypeVar("_T")


def _amqp_url(text: str) -> bench.AmqpUrl:
    try:
        return bench.parse_amqp_url(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_bench(sub: SubParsers) -> None:
    defaults = bench.Workload()
    p = sub.add_parser(
        "bench",
        help="measure AMQP brokers with the same client and workload; prints JSON",
        description="Publish-with-confirms throughput and confirm latency for each "
        "--amqp-url in turn, with ratios of every URL's figures to the first URL's.",
    )
    p.add_argument(
        "--amqp-url",
        dest="urls",
        action="append",
        type=_amqp_url,
        required=True,
        metavar="URL",
        help="broker to measure (repeatable; the first is the "
        "reference), e.g. amqp://guest:guest@127.0.0.1:5672/",
    )
    p.add_argument(
        "--messages",
        type=positive_int,
        default=defaults.messages,
        help="messages per measured run (default %(default)s)",
    )
    p.add_argument(
        "--size",
        type=non_negative_int,
        default=defaults.size,
        metavar="BYTES",
        help="message body size (default %(default)s)",
    )
    p.add_argument(
        "--delivery",
        choices=("persistent", "transient", "both"),
        default="both",
        help="delivery mode(s) to measure (default %(default)s)",
    )
    p.add_argument(
        "--window",
        type=positive_int,
        default=defaults.window,
        help="unconfirmed messages in flight for throughput (default %(default)s)",
    )
    p.add_argument(
        "--rate",
        type=positive_float,
        default=None,
        metavar="MSGS_PER_S",
        help="publish rate for confirm latency (default: half the lowest "
        "throughput measured across the URLs)",
    )
    p.add_argument(
        "--queue",
        default=defaults.queue,
        metavar="NAME",
        help="durable queue to declare, use and delete (default %(default)s)",
    )
    p.add_argument(
        "--warmup",
        type=non_negative_int,
        default=defaults.warmup,
        help="unmeasured messages before each measurement (default %(default)s)",
    )
    p.add_argument(
        "--repeat",
        type=positive_int,
        default=defaults.repeat,
        help="throughput runs per delivery mode; the median is reported (default %(default)s)",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=defaults.timeout,
        metavar="SECONDS",
        help="connect timeout and longest wait for a "
        "confirm before giving up (default %(default)s)",
    )
    p.add_argument(
        "--stage",
        dest="stages",
        action="append",
        choices=tuple(bench.STAGES),
        metavar="STAGE",
        help="what to measure (repeatable; run in the order "
        f"{', '.join(bench.STAGES)}; default {' and '.join(bench.DEFAULT_STAGES)}). "
        "failover SIGKILLs the master with --kill-command while publishing at --rate "
        "(else half the throughput) through --amqp-url, which must not be the master",
    )
    p.add_argument(
        "--master-url",
        dest="masters",
        action="append",
        type=_amqp_url,
        default=[],
        metavar="URL",
        help="declare the queue through this node, so it holds the master, and publish "
        "through --amqp-url; once for every URL, or once per --amqp-url in the same order",
    )
    p.add_argument(
        "--kill-command",
        dest="kill_commands",
        action="append",
        default=[],
        metavar="CMD",
        help="shell command that SIGKILLs the master's node, e.g. 'kill -9 PID' (for "
        "--stage failover; once, or once per --amqp-url in the same order)",
    )
    p.add_argument(
        "--failover-before",
        type=positive_float,
        default=defaults.failover_before,
        metavar="SECONDS",
        help="steady publishing before the kill (default %(default)s)",
    )
    p.add_argument(
        "--failover-after",
        type=positive_float,
        default=defaults.failover_after,
        metavar="SECONDS",
        help="steady publishing after the kill (default %(default)s)",
    )
    p.add_argument("--json-out", metavar="FILE", help="also write the JSON report to FILE")
    p.set_defaults(handler=_run_bench, parser=p)


def _run_bench(args: argparse.Namespace) -> int:
    deliveries: tuple[bench.Delivery, ...] = (
        bench.DELIVERIES if args.delivery == "both" else (args.delivery,)
    )
    workload = bench.Workload(
        messages=args.messages,
        size=args.size,
        window=args.window,
        rate=args.rate,
        deliveries=deliveries,
        queue=args.queue,
        warmup=args.warmup,
        repeat=args.repeat,
        timeout=args.timeout,
        failover_before=args.failover_before,
        failover_after=args.failover_after,
    )
    stages = tuple(args.stages or bench.DEFAULT_STAGES)
    parser: argparse.ArgumentParser = args.parser
    masters = _per_url(parser, "--master-url", args.masters, len(args.urls))
    kills = _per_url(parser, "--kill-command", args.kill_commands, len(args.urls))
    if "latency" in stages and "throughput" not in stages and args.rate is None:
        parser.error("--stage latency without --stage throughput needs --rate")
    if "failover" in stages:
        for url, master, kill in zip(args.urls, masters, kills, strict=True):
            if master is None or kill is None:
                parser.error("--stage failover needs --master-url and --kill-command")
            if master == url:
                parser.error(
                    f"--stage failover publishes through {url.display}, the master that "
                    "is killed: give a URL of another node of the cluster"
                )
        if args.rate is None and "throughput" not in stages:
            parser.error("--stage failover without --stage throughput needs --rate")
    return bench.run(args.urls, workload, args.json_out, stages, masters, kills)


def _per_url(
    parser: argparse.ArgumentParser, option: str, values: list[_T], urls: int
) -> list[_T | None]:
    """Values that pair with the --amqp-url list: none, one for all, or one each."""
    if not values:
        return [None] * urls
    if len(values) == 1:
        return [values[0]] * urls
    if len(values) != urls:
        parser.error(f"{option} must be given once or once per --amqp-url ({urls})")
    return list(values)


def add_demo(sub: SubParsers) -> None:
    defaults = demo.DemoOptions()
    p = sub.add_parser(
        "demo",
        help="start one node of ours and run a confirming publisher and acking consumer",
        description="Start one `cluster.node` on free loopback ports, publish unique "
        "persistent messages with confirms, consume them with manual acks, print a summary "
        "and stop the node. Exits 0 when every confirmed message was delivered exactly once.",
    )
    p.add_argument(
        "--messages",
        type=positive_int,
        default=defaults.messages,
        help="messages to publish (default %(default)s)",
    )
    p.add_argument(
        "--window",
        type=positive_int,
        default=defaults.window,
        help="unconfirmed publishes in flight (default %(default)s)",
    )
    p.add_argument(
        "--prefetch",
        type=positive_int,
        default=defaults.prefetch,
        help="consumer prefetch count (default %(default)s)",
    )
    p.add_argument(
        "--start-timeout",
        type=positive_float,
        default=defaults.start_timeout,
        metavar="SECONDS",
        help="longest wait for the node to accept an AMQP handshake (default %(default)s)",
    )
    p.add_argument(
        "--keep-data",
        action="store_true",
        help="keep the node's data directory and log even when the demo succeeds",
    )
    p.set_defaults(handler=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    options = demo.DemoOptions(
        messages=args.messages,
        window=args.window,
        prefetch=args.prefetch,
        start_timeout=args.start_timeout,
        keep_data=args.keep_data,
    )
    return demo.run(options)


def add_toxiproxy(sub: SubParsers) -> None:
    p = sub.add_parser(
        "toxiproxy",
        help="the project's toxiproxy-compatible server",
        description="Run the toxiproxy HTTP API v2 and its proxies; every random choice "
        "(jitter, toxicity) comes from --seed so a run replays.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    serve = actions.add_parser("serve", help="serve the API until SIGINT or SIGTERM")
    add_serve_arguments(serve)
    serve.set_defaults(handler=_run_toxiproxy)


def _run_toxiproxy(args: argparse.Namespace) -> int:
    serve_toxiproxy(args.host, args.port, args.seed)
    return 0


def add_check(sub: SubParsers) -> None:
    p = sub.add_parser(
        "check",
        help="re-check a stored history; exit 0 valid, 1 invalid, 2 unknown, 254 bad input",
        description="Check a run directory (history.jsonl plus nodes/*.events.jsonl) or a "
        "history file, write results.json beside it and print the verdict and counts.",
    )
    p.add_argument("path", metavar="DIR", help="run directory or history.jsonl")
    p.set_defaults(handler=lambda args: check_command(args.path))
