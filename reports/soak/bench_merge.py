"""Benchmark of the campaign merge (Spark merge time per run merged):
synthetic stored runs — histories built with `HistoryBuilder`, checked by the real
checker, one in eight invalid — merged by `merge_campaign`, timed per run count.

    python -m reports.soak.bench_merge --runs 8 32 128 [--messages 200] [--master local[2]]

Prints one JSON line per run count. A benchmark, never a timed test.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from reports.soak.merge import merge_campaign
from reports.soak.spark import spark_session
from reports.soak.synthetic import write_synthetic_run


def make_campaign(directory: Path, runs: int, messages: int) -> None:
    for index in range(runs):
        write_synthetic_run(directory, index, 10_000 + index,
                            "invalid" if index % 8 == 7 else "valid", messages=messages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.soak.bench_merge",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--messages", type=int, default=200,
                        help="confirmed publishes per synthetic run (default %(default)s)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2,
                        help="merges per run count; the fastest is reported (default "
                        "%(default)s)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="mirrorchaos-bench-merge-"))
    try:
        started = time.perf_counter()
        spark = spark_session(args.master, app="mirrorchaos-bench-merge")
        print(json.dumps({"spark_start_s": round(time.perf_counter() - started, 2),
                          "master": args.master}), flush=True)
        warm = root / "warm-up"
        make_campaign(warm, 2, args.messages)
        merge_campaign(spark, warm)  # the JVM's first jobs are slow: not measured
        for runs in args.runs:
            directory = root / f"runs-{runs}"
            begun = time.perf_counter()
            make_campaign(directory, runs, args.messages)
            made = time.perf_counter() - begun
            lines = sum(len(p.read_bytes().splitlines())
                        for p in directory.glob("runs/*/*/*/history.jsonl"))
            times = []
            for _ in range(args.repeat):
                begun = time.perf_counter()
                report = merge_campaign(spark, directory)
                times.append(time.perf_counter() - begun)
            assert len(report.runs) == runs
            best = min(times)
            print(json.dumps({"runs": runs, "messages_per_run": args.messages,
                              "history_lines": lines,
                              "merge_s": round(best, 2),
                              "per_run_ms": round(best / runs * 1000, 1),
                              "all_merges_s": [round(t, 2) for t in times],
                              "synthesis_s": round(made, 2)}), flush=True)
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
