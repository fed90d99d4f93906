"""What `mirrorchaos bench` runs once its arguments are parsed (harness/commands.py): every
URL measured by every chosen stage, the figures of the first URL the reference for
the others' ratios, the report printed as JSON."""

from __future__ import annotations

import asyncio
import json
import platform
import sys
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

from harness.bench.client import CLIENT_NAME, BrokerError
from harness.bench.stages import (
    DEFAULT_STAGES,
    STAGES,
    BenchContext,
    Figure,
    Stage,
    TargetResult,
    Workload,
)
from harness.bench.stats import ratios
from harness.bench.url import AmqpUrl


def _client_info() -> dict[str, str]:
    return {
        "name": CLIENT_NAME,
        "library": f"pamqp {metadata.version('pamqp')} over asyncio",
        "python": platform.python_version(),
    }


async def run_bench(
    urls: Sequence[AmqpUrl],
    workload: Workload,
    stages: Sequence[Stage] = (STAGES["throughput"], STAGES["latency"]),
    log: Callable[[str], None] = lambda line: None,
    masters: Sequence[AmqpUrl | None] = (),
    kill_commands: Sequence[str | None] = (),
) -> dict[str, Any]:
    """Measure every URL with every stage; the report that `bench` prints as JSON.
    masters and kill_commands, when given, pair with urls by position."""
    results = [
        TargetResult(
            url,
            master_url=masters[i] if i < len(masters) else None,
            kill_command=kill_commands[i] if i < len(kill_commands) else None,
        )
        for i, url in enumerate(urls)
    ]
    ctx = BenchContext(workload, results, log)
    for stage in stages:
        for target in results:
            target.details[stage.name] = await stage.measure(target, ctx)
    figures: dict[str, Figure] = {}
    for stage in stages:
        figures.update(stage.figures(workload))
    report_results: list[dict[str, Any]] = []
    for i, target in enumerate(results):
        entry: dict[str, Any] = {
            "url": target.url.display,
            "master_url": None if target.master_url is None else target.master_url.display,
            "server": target.server,
            "figures": target.figures,
            "details": target.details,
        }
        if i:
            entry["ratio_vs_first"] = ratios(results[0].figures, target.figures)
        report_results.append(entry)
    return {
        "client": _client_info(),
        "workload": workload.as_json(),
        "stages": [stage.name for stage in stages],
        "figures": {name: {"unit": f.unit, "better": f.better} for name, f in figures.items()},
        "results": report_results,
    }


def run(
    urls: Sequence[AmqpUrl],
    workload: Workload,
    json_out: str | None,
    stages: Sequence[str] = DEFAULT_STAGES,
    masters: Sequence[AmqpUrl | None] = (),
    kill_commands: Sequence[str | None] = (),
) -> int:
    """Entry point of `mirrorchaos bench`: JSON on stdout, progress and errors on stderr."""

    def log(line: str) -> None:
        print(f"bench: {line}", file=sys.stderr, flush=True)

    # Registry order, whatever order they were asked for in.
    chosen = [stage for name, stage in STAGES.items() if name in stages]
    try:
        report = asyncio.run(
            run_bench(urls, workload, chosen, log, masters=masters, kill_commands=kill_commands)
        )
    except BrokerError as err:
        print(f"mirrorchaos bench: {err}", file=sys.stderr)
        return 1
    text = json.dumps(report, indent=2)
    print(text)
    if json_out is not None:
        try:
            with open(json_out, "w", encoding="utf-8") as out:
                out.write(text + "\n")
        except OSError as err:
            print(f"mirrorchaos bench: cannot write {json_out}: {err.strerror}", file=sys.stderr)
            return 1
    return 0
