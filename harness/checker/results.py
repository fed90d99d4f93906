"""The ``results.json`` document of a checked run."""

from __future__ import annotations

from typing import Any

from harness.checker.result import Result
from harness.history.model import Header

RESULTS_FORMAT = "mirrorchaos-results"
RESULTS_VERSION = 1

# counts results.json always has, zero when no checker produced them
_COUNTS = ("attempted", "confirmed", "nacked", "failed", "indeterminate", "delivered",
           "acked", "lost", "caveat_lost", "unexpected", "duplicated", "redelivered",
           "recovered", "reordered")


def results_json(result: Result, header: Header) -> dict[str, Any]:
    """Times in the document are seconds since the run started (the header's time)."""
    t0 = header.time
    counts = {name: result.counts.get(name, 0) for name in _COUNTS}
    counts.update(result.counts)
    doc: dict[str, Any] = {
        "format": RESULTS_FORMAT, "version": RESULTS_VERSION, "run_id": header.run_id,
        "scenario": header.scenario, "seed": header.seed,
        "runtime": header.config.get("runtime"),
        # histories from before the rabbitmq target ran our own nodes
        "target": header.config.get("target", "mirrorchaos"), "valid": result.valid,
        "counts": counts,
        "violations": [a.to_json(t0) for a in result.violations],
        "caveats": [a.to_json(t0) for a in result.caveats],
    }
    data = dict(result.data)
    for key in ("latency_ms", "throughput", "availability", "faults"):
        doc[key] = data.pop(key, None)
    doc["checkers"] = [{"name": p.checker, "valid": p.valid, "error": p.error,
                        "violations": sum(len(a.messages) for a in p.violations),
                        "caveats": sum(len(a.messages) for a in p.caveats)}
                       for p in result.parts]
    if result.error:
        doc["error"] = result.error
    doc.update(data)
    return doc
