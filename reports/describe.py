"""Words and figures that every report shows the same way, read from results.json."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from reports.load import RunReport

# counts in the order a reader wants them: what the workload did, then what went wrong
MESSAGE_COUNTS = ("attempted", "confirmed", "nacked", "failed", "indeterminate", "delivered",
                  "acked")
ANOMALY_COUNTS = ("lost", "caveat_lost", "unexpected", "duplicated", "duplicated_unflagged",
                  "redelivered", "recovered", "recovered_nacked", "reordered",
                  "reordered_allowed", "undrained")
LATENCY_FIGURES = (("p50", "confirm_p50"), ("p90", "confirm_p90"), ("p99", "confirm_p99"),
                   ("p99.9", "confirm_p999"), ("mean", "confirm_mean"), ("max", "confirm_max"))


# results.json availability kinds, and what they mean (harness/checker/throughput.py)
AVAILABILITY_KINDS = ("publish", "consume")
AVAILABILITY_DEFINITION = ("availability: publish = share of the workload's seconds with a "
                           "confirm; consume = share of the seconds with a consumer "
                           "attached in which a message was delivered")
# results.json "failover" (harness/checker/failover.py)
FAILOVER_DEFINITION = ("pause: the longest between two confirms of any publisher while "
                       "the fault was in force; began: seconds from the fault's start; one "
                       "publisher's: the longest one publisher saw (one on the failed node "
                       "also reconnects); n/a: no confirm before the fault or after it")


def availability_shares(results: Mapping[str, Any]) -> list[tuple[str, float]]:
    """(kind, fraction) for each kind of operation the run's workload had."""
    availability = results.get("availability") or {}
    return [(kind, float(share["fraction"])) for kind in AVAILABILITY_KINDS
            if (share := availability.get(kind)) and share.get("fraction") is not None]


def verdict_word(valid: object) -> str:
    if valid is True:
        return "VALID"
    if valid is False:
        return "INVALID"
    return "UNKNOWN"


def counts_in_order(counts: Mapping[str, int]) -> list[tuple[str, int]]:
    """Known counts first, in reading order, then whatever else a checker added."""
    known = [*MESSAGE_COUNTS, *ANOMALY_COUNTS]
    ordered = [(name, counts[name]) for name in known if name in counts]
    ordered.extend(sorted((k, v) for k, v in counts.items() if k not in known))
    return ordered


def anomalies(results: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every anomaly entry with its standing: ``violation`` or ``caveat: <rule>``."""
    for anomaly in results.get("violations") or []:
        yield "violation", anomaly
    for anomaly in results.get("caveats") or []:
        yield f"caveat: {anomaly.get('caveat')}", anomaly


def fault_label(fault: Mapping[str, Any]) -> str:
    """e.g. ``kill f1 → n1, n2``."""
    targets = ", ".join(fault.get("targets") or [])
    return f"{fault['kind']} {fault['id']}" + (f" → {targets}" if targets else "")


def fault_span(fault: Mapping[str, Any]) -> str:
    """When it was in force, e.g. ``2.100-4.000 s`` or ``from 5.000 s, never healed``."""
    start = f"{fault['start']:.3f}"
    if fault.get("heal_failed"):
        return f"from {start} s, heal not verified"
    if fault.get("end") is None:
        return f"from {start} s, never healed"
    return f"{start}-{fault['end']:.3f} s"


def fault_notes(fault: Mapping[str, Any]) -> str:
    """Whatever the nemesis recorded beyond kind, targets and times."""
    skip = {"id", "kind", "targets", "start", "end", "heal_failed"}
    notes = [f"{k}={v}" for k, v in fault.items() if k not in skip]
    if fault.get("applied") is False:
        notes = ["not applied", *(n for n in notes if not n.startswith("applied="))]
    return ", ".join(notes)


def number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


def messages_count(count: int) -> str:
    return f"{count} message" + ("" if count == 1 else "s")


def id_list(messages: list[str], limit: int) -> str:
    shown = ", ".join(messages[:limit])
    more = len(messages) - limit
    return f"{shown} … and {more} more" if more > 0 else shown


def run_length(report: RunReport) -> float:
    """Seconds from the run's start to the last thing any report plots."""
    results = report.results
    throughput = results.get("throughput") or {}
    buckets = len(throughput.get("confirms") or []) * float(throughput.get("bucket_s") or 0)
    times = [buckets, *(e.time for e in report.node_events)]
    for fault in results.get("faults") or []:
        times.append(fault["start"])
        if fault.get("end") is not None:
            times.append(fault["end"])
    return max(times)


def fault_end(fault: Mapping[str, Any], length: float) -> float:
    """Where a fault's window stops on a plot: its heal, or the end of the run."""
    end = fault.get("end")
    return length if end is None or fault.get("heal_failed") else float(end)
