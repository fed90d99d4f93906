"""The run's nemesis as the history sees it: ops aimed at ``master``/``mirror`` (and
degrade ``links`` ``master-out``) are resolved when invoked, and every fault is written
as ``fault-start``/``fault-end`` lines (docs/history-format.md) around the nemesis's own
work."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from faults.nemesis import HEAL, Nemesis, Op
from faults.topology import Topology
from harness.history import HistoryWriter
from harness.scenarios.nemesis import (
    MASTER_OUT,
    MASTER_TO_YOUNGEST,
    POLICY_NODES,
    SETTLED_STATE,
    SYMBOLIC,
    TO_YOUNGEST,
)

# nemesis op -> the fault kind the checker knows it by (a degrade is named by its toxic)
_KINDS = {"kill": "kill", "power-loss": "power-loss", "stop": "stop", "pause": "pause",
          "restart": "restart",
          "rolling-restart": "restart", "partition": "partition", "set-policy": "policy",
          "clear-policy": "policy", "sync-queue": "sync", "forget": "forget"}
# ops that undo earlier faults rather than start one
_ENDING = {"resume": {"pause"}, "start": {"kill", "power-loss", "stop", "forget"}}
# ops whose fault is over when the op returns (the node is back, the sync is complete)
_SELF_ENDING = {"restart", "rolling-restart", "sync-queue"}

class Locate(Protocol):
    """``master``/``mirror``/``youngest`` of ``queue`` (default the workload's first)
    -> the node it names now."""

    def __call__(self, which: str, queue: str | None = None) -> str: ...


@dataclass
class ActiveFaults:
    """What is in force now, for the live display: fault id -> a one-line label."""

    active: dict[str, str] = field(default_factory=dict)
    started: int = 0
    heal_failures: int = 0


class RecordedNemesis:
    def __init__(self, inner: Nemesis, writer: HistoryWriter, locate: Locate,
                 topology: Topology, nodes: list[str], status: ActiveFaults) -> None:
        self.inner = inner
        self.writer = writer
        self.locate = locate
        self.topology = topology
        self.nodes = nodes
        self.status = status
        self.fs = inner.fs
        self._ids = itertools.count(1)
        self._open: dict[str, tuple[str, list[str]]] = {}  # fault id -> kind, targets

    def setup(self) -> None:
        self.inner.setup()

    def teardown(self) -> None:
        self.inner.teardown()

    def invoke(self, op: Op) -> Op:
        if op.f == HEAL:
            return self._heal(op)
        if op.f == SETTLED_STATE:  # an observation that records itself: no fault lines
            return self.inner.invoke(op)
        op = self._resolve(op)
        if op.f in _ENDING:
            return self._end_some(op)
        kind = self._kind(op)
        fault_id = f"{kind}-{next(self._ids)}"
        # The invoke line carries what is being applied too (a policy's definition).
        self._write("fault-start", "invoke", kind, fault_id, self._targets(op, op.value),
                    **self._detail(op, op))
        done = self.inner.invoke(op)
        targets = self._targets(op, done.value)
        self._write("fault-start", done.type, kind, fault_id, targets, done.error,
                    **self._detail(op, done))
        if done.type == "fail":
            return done
        self.status.started += 1
        if op.f in _SELF_ENDING:
            self._write("fault-end", "ok" if done.type == "ok" else "fail", kind, fault_id,
                        targets, done.error)
        else:
            self._open[fault_id] = (kind, targets)
            self.status.active[fault_id] = f"{kind} {','.join(targets) or '-'}"
        return done

    # -- what an op is about ---------------------------------------------------------

    def _resolve(self, op: Op) -> Op:
        """``master``/``mirror`` in ``nodes`` (alone or in a list), ``node``, ``from``
        and ``to`` become the node they name now, as do ``master``/``mirror``/``youngest``
        in a set-policy's ``ha-params`` list (of the step's ``queue``, by default the
        first); degrade
        ``links`` ``master-out``, the node links from the master now (what carries its
        replication to the mirrors); ``master-to-youngest`` the one link from the master
        to its youngest mirror; ``to-youngest`` every node link into that mirror."""
        if not isinstance(op.value, dict):
            return op
        value = dict(op.value)
        for key in ("node", "from", "to"):
            if value.get(key) in SYMBOLIC:
                value[key] = self.locate(value[key])
        nodes = value.get("nodes")
        if isinstance(nodes, list) or nodes in SYMBOLIC:
            value["nodes"] = [self.locate(n) if n in SYMBOLIC else n
                              for n in (nodes if isinstance(nodes, list) else [nodes])]
        definition = value.get("definition")
        if op.f == "set-policy" and isinstance(definition, dict) and isinstance(
                definition.get("ha-params"), list):
            of = value.pop("queue", None)
            value["definition"] = {**definition, "ha-params": [
                self.locate(n, of) if n in POLICY_NODES else n
                for n in definition["ha-params"]]}
        if op.f == "degrade" and value.get("links") == MASTER_OUT:
            master = self.locate("master")
            value["links"] = [self.topology.node_link(master, node).name
                              for node in self.nodes if node != master]
        elif op.f == "degrade" and value.get("links") == MASTER_TO_YOUNGEST:
            master = self.locate("master")
            value["links"] = [self.topology.node_link(master, self.locate("youngest")).name]
        elif op.f == "degrade" and value.get("links") == TO_YOUNGEST:
            youngest = self.locate("youngest")
            value["links"] = [self.topology.node_link(node, youngest).name
                              for node in self.nodes if node != youngest]
        return replace(op, value=value)

    def _kind(self, op: Op) -> str:
        if op.f == "degrade":
            return str((op.value or {}).get("toxic", "degrade"))
        return _KINDS[op.f]

    def _targets(self, op: Op, value: Any) -> list[str]:
        if op.f in ("set-policy", "clear-policy"):
            return []
        if op.f == "rolling-restart":
            return list(self.nodes)
        if op.f == "forget":
            node = value.get("node") if isinstance(value, dict) else None
            return [node] if node in self.nodes else []
        if op.f == "partition":
            grudge = value.get("grudge") if isinstance(value, dict) else None
            return _cut_off(grudge, self.nodes) if grudge else []
        if op.f == "degrade":
            links = value.get("links") if isinstance(value, dict) else None
            if not isinstance(links, list):
                return []
            return sorted({node for name in links for node in self._link_nodes(name)})
        nodes = value.get("nodes") if isinstance(value, dict) else None
        return [n for n in nodes if n in self.nodes] if isinstance(nodes, list) else []

    def _link_nodes(self, name: str) -> list[str]:
        link = self.topology.link(name)
        return [n for n in (link.source, link.target) if n in self.nodes]

    def _detail(self, op: Op, done: Op) -> dict[str, Any]:
        value = done.value if isinstance(done.value, dict) else {}
        if op.f == "partition":
            return {k: value[k] for k in ("grudge", "mode") if k in value}
        if op.f == "set-policy":
            return {"definition": value.get("definition"), "pattern": value.get("pattern")}
        if op.f == "clear-policy":
            return {"definition": {}}
        if op.f == "degrade":
            return {k: value[k] for k in ("links", "stream", "attributes") if k in value}
        if op.f == "sync-queue":
            return {k: value[k] for k in ("queue", "cancelled") if k in value}
        if op.f == "forget":
            return {"forgotten_by": value.get("forgotten_by")}
        return {}

    # -- ends ------------------------------------------------------------------------

    def _heal(self, op: Op) -> Op:
        for fault_id, (kind, targets) in self._open.items():
            self._write("fault-end", "invoke", kind, fault_id, targets)
        done = self.inner.invoke(op)
        ended = "ok" if done.type == "ok" else "fail"
        for fault_id, (kind, targets) in self._open.items():
            self._write("fault-end", ended, kind, fault_id, targets, done.error)
        if ended == "fail":
            self.status.heal_failures += 1
        self._open.clear()
        self.status.active.clear()
        return done

    def _end_some(self, op: Op) -> Op:
        """``resume``/``start`` end the open faults on the nodes they bring back."""
        done = self.inner.invoke(op)
        back = set(self._targets(op, done.value)) if done.type != "fail" else set()
        for fault_id, (kind, targets) in list(self._open.items()):
            if kind in _ENDING[op.f] and set(targets) <= back:
                self._write("fault-end", "ok", kind, fault_id, targets)
                del self._open[fault_id]
                self.status.active.pop(fault_id, None)
        return done

    def _write(self, op: str, type: str, kind: str, fault_id: str, targets: list[str],
               error: str | None = None, **detail: Any) -> None:
        fields: dict[str, Any] = {"fault": kind, "fault_id": fault_id, "targets": targets,
                                  **{k: v for k, v in detail.items() if v is not None}}
        if error:
            fields["error"] = error
        self.writer.append("nemesis", op, type, **fields)


def _cut_off(grudge: Mapping[str, list[str]], nodes: list[str]) -> list[str]:
    """The nodes that hear at most half the cluster (themselves included): those a
    partition cuts off; failing that, every node that stops hearing someone."""
    half = len(nodes) / 2
    cut = [n for n in nodes if len(nodes) - len(grudge.get(n, [])) <= half]
    return sorted(cut or grudge)
