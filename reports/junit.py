"""``junit.xml`` for CI: one test case per checker of the run. A checker that
found violations fails with every anomaly it owns; one whose verdict is unknown (it
crashed, or the history is incomplete) is an error; caveats go to the passing case's
output, since they are expected by the design."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from reports.describe import anomalies, fault_label, fault_span, id_list, messages_count
from reports.load import RunReport, load

JUNIT_FILE = "junit.xml"
# which checker of harness/checker reports each anomaly kind (its results.json "kind")
CHECKER_OF_KIND = {"lost": "lost", "unexpected": "unexpected", "duplicate": "duplicated",
                   "reordered": "ordering"}


def write_junit(run: RunReport | str | Path, path: str | Path | None = None) -> Path:
    """Write the JUnit document for ``run`` (by default ``junit.xml`` in its run
    directory)."""
    report = run if isinstance(run, RunReport) else load(run)
    target = Path(path) if path is not None else report.folder / JUNIT_FILE
    tree = ET.ElementTree(junit_element(report.results))
    ET.indent(tree)
    tree.write(target, encoding="utf-8", xml_declaration=True)
    return target


def junit_element(results: Mapping[str, Any]) -> ET.Element:
    owned: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for standing, anomaly in anomalies(results):
        owner = CHECKER_OF_KIND.get(anomaly["kind"], anomaly["kind"])
        owned.setdefault(owner, []).append((standing, anomaly))
    checkers = results.get("checkers") or []
    suite_name = f"mirrorchaos.{results.get('scenario')}"
    suite = ET.Element("testsuite", name=suite_name, tests=str(len(checkers)),
                       failures=str(sum(1 for c in checkers if c.get("valid") is False)),
                       errors=str(sum(1 for c in checkers if c.get("valid") == "unknown")),
                       skipped="0")
    properties = ET.SubElement(suite, "properties")
    for key in ("run_id", "scenario", "seed", "runtime", "target", "valid"):
        if results.get(key) is not None:
            ET.SubElement(properties, "property", name=key, value=str(results[key]))
    for checker in checkers:
        case = ET.SubElement(suite, "testcase", name=checker["name"], classname=suite_name)
        mine = owned.get(checker["name"], [])
        violations = [a for standing, a in mine if standing == "violation"]
        if checker.get("valid") is False:
            failure = ET.SubElement(case, "failure", type="violation", message=_summary(
                checker, violations))
            failure.text = "\n\n".join(_details(a) for a in violations) or checker.get("error")
        elif checker.get("valid") == "unknown":
            ET.SubElement(case, "error", type="unknown",
                          message=checker.get("error") or "verdict unknown")
        caveats = [(standing, a) for standing, a in mine if standing != "violation"]
        if caveats:
            ET.SubElement(case, "system-out").text = "\n\n".join(
                f"{standing}\n{_details(a)}" for standing, a in caveats)
    root = ET.Element("testsuites", {key: suite.get(key, "0")
                                     for key in ("tests", "failures", "errors")})
    root.set("name", "mirrorchaos")
    root.append(suite)
    return root


def _summary(checker: Mapping[str, Any], violations: list[dict[str, Any]]) -> str:
    ids = [m for a in violations for m in a.get("messages") or []]
    if not ids:
        return f"{checker['name']} failed: {checker.get('error')}"
    return f"{messages_count(len(ids))} violated {checker['name']}: {id_list(ids, 10)}"


def _details(anomaly: Mapping[str, Any]) -> str:
    faults = "; ".join(f"{fault_label(f)} {fault_span(f)}" for f in anomaly.get("faults") or [])
    lines = [f"{anomaly['kind']}, {messages_count(len(anomaly.get('messages') or []))}"
             + (f" on queue {anomaly['queue']}" if anomaly.get("queue") else ""),
             f"why: {anomaly.get('explanation', '')}",
             f"faults in force: {faults or 'none'}",
             "messages: " + ", ".join(anomaly.get("messages") or [])]
    return "\n".join(lines)
