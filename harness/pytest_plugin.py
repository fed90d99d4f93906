"""pytest plugin: fixtures to write fault tests against a live cluster in
plain pytest. Installed with the package (entry point ``pytest11``), so any project
that installs mirrorchaos has them:

* ``mq_cluster`` — a running cluster (`harness.runtime.Cluster`), every link through
  toxiproxy; the process runtime unless the ``mq_cluster`` marker or the
  ``mirrorchaos_runtime`` ini option says ``docker``. Removed at the end of the test.
* ``toxiproxy`` — the cluster's `faults.client.ToxiproxyClient`.
* ``nemesis`` — ``nemesis(kind, seed=0, queue=None)`` builds a nemesis of
  `faults.nemesis` (``process``, ``partition``, ``links``, ``policy``,
  ``queue-admin`` or ``combined``) bound to the cluster; its faults are written to the
  test's history, ``master``/``mirror`` targets name ``queue``'s master and a mirror
  at the time of the op, and whatever it left in force is healed at teardown.
* ``history`` — a `HistoryWriter` (``history.record(process, op, type, **fields)``,
  the format of docs/history-format.md) on ``history.jsonl`` in the test's tmp dir.
  At teardown it is checked by the checker with the nodes' events: the test fails
  when the verdict is invalid. ``history.check()`` checks now and returns the
  results document, to assert on its counts.

Marker: ``@pytest.mark.mq_cluster(nodes=3, runtime="process",
partition_handling="pause_minority", tick=1.0, node_args=(), seed=0)``; ini options
``mirrorchaos_runtime``, ``mirrorchaos_nodes``, ``mirrorchaos_partition_handling``.
Heavy imports wait until a fixture is used, so the plugin costs nothing elsewhere.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest

if TYPE_CHECKING:
    from faults.client import ToxiproxyClient
    from harness.history import HistoryWriter
    from harness.history.model import Event
    from harness.run.faults import Locate, RecordedNemesis
    from harness.runtime import Cluster

MARKER = "mq_cluster"
NEMESIS_KINDS = ("process", "partition", "links", "policy", "queue-admin", "combined")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("mirrorchaos_runtime", "runtime of the mq_cluster fixture: process or docker",
                  default="process")
    parser.addini("mirrorchaos_nodes", "nodes in the mq_cluster fixture's cluster", default="3")
    parser.addini("mirrorchaos_partition_handling",
                  "partition handling of the mq_cluster fixture's nodes",
                  default="pause_minority")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(nodes=3, runtime='process', partition_handling='pause_minority', "
        "tick=1.0, node_args=(), seed=0): the cluster the mq_cluster fixture starts")


@dataclass(frozen=True)
class ClusterSettings:
    nodes: int
    runtime: str
    partition_handling: str
    tick: float = 1.0
    node_args: tuple[str, ...] = ()
    seed: int = 0


def cluster_settings(request: pytest.FixtureRequest) -> ClusterSettings:
    ini = request.config.getini
    options: dict[str, Any] = {"nodes": int(ini("mirrorchaos_nodes")),
                               "runtime": str(ini("mirrorchaos_runtime")),
                               "partition_handling": str(ini("mirrorchaos_partition_handling"))}
    marker = request.node.get_closest_marker(MARKER)
    if marker is not None:
        if marker.args:
            raise pytest.UsageError(f"@pytest.mark.{MARKER} takes keyword arguments only")
        unknown = set(marker.kwargs) - set(ClusterSettings.__dataclass_fields__)
        if unknown:
            raise pytest.UsageError(f"@pytest.mark.{MARKER}: unknown {sorted(unknown)}")
        options.update(marker.kwargs)
    options["node_args"] = tuple(options.get("node_args", ()))
    return ClusterSettings(**options)


@pytest.fixture
def mq_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Cluster]:
    from harness.run.runtimes import make_runtime
    from harness.runtime import ClusterSpec

    settings = cluster_settings(request)
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40]
    spec = ClusterSpec.of(settings.nodes, run_id=f"pytest-{slug}-{secrets.token_hex(3)}",
                          node_args=("--partition-handling", settings.partition_handling,
                                     *settings.node_args),
                          tick=settings.tick, seed=settings.seed,
                          base_dir=tmp_path / "cluster")
    cluster = make_runtime(settings.runtime).start(spec)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def toxiproxy(mq_cluster: Cluster) -> ToxiproxyClient:
    return mq_cluster.toxiproxy


class TestHistory:
    """The test's history: ``record`` appends an event; ``check`` runs the checker."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, writer: HistoryWriter, cluster: Cluster, folder: Path) -> None:
        self.writer = writer
        self.cluster = cluster
        self.folder = folder
        self.results: dict[str, Any] | None = None

    @property
    def path(self) -> Path:
        return self.writer.path

    def record(self, process: str, op: str, type: str, **fields: Any) -> Event:
        return self.writer.append(process, op, type, **fields)

    def check(self) -> dict[str, Any]:
        """Close the history, collect the nodes' events beside it, check, write
        ``results.json`` and return it. Later calls return the same document."""
        if self.results is None:
            from harness.checker import check_path

            self.writer.close()
            self.cluster.collect(self.folder)
            self.results = check_path(self.folder)
            (self.folder / "results.json").write_text(json.dumps(self.results, indent=2),
                                                      encoding="utf-8")
        return self.results


@pytest.fixture
def history(request: pytest.FixtureRequest, mq_cluster: Cluster,
            tmp_path: Path) -> Iterator[TestHistory]:
    from harness.history import HistoryWriter

    settings = cluster_settings(request)
    folder = tmp_path / "run"
    folder.mkdir()
    config = {"nodes": list(mq_cluster.nodes), "partition_handling": settings.partition_handling,
              "persistent": True, "runtime": settings.runtime}
    writer = HistoryWriter(folder / "history.jsonl", run_id=mq_cluster.spec.run_id,
                           scenario=f"pytest:{request.node.nodeid}", seed=settings.seed,
                           config=config)
    recorded = TestHistory(writer, mq_cluster, folder)
    yield recorded
    results = recorded.check()
    if results["valid"] is False:
        found = "; ".join(f"{a['kind']}: {a['count']} ({', '.join(a['messages'][:5])})"
                          for a in results["violations"])
        pytest.fail(f"the checker found the history invalid: {found}; see {folder}",
                    pytrace=False)


NemesisFactory = Callable[..., "RecordedNemesis"]


@pytest.fixture
def nemesis(mq_cluster: Cluster, history: TestHistory) -> Iterator[NemesisFactory]:
    from harness.run.faults import ActiveFaults, RecordedNemesis

    built: list[RecordedNemesis] = []

    def make(kind: str = "combined", *, seed: int = 0,
             queue: str | None = None) -> RecordedNemesis:
        inner = _build_nemesis(kind, mq_cluster, seed)
        recorded = RecordedNemesis(inner, history.writer, _locator(mq_cluster, queue),
                                   mq_cluster.topology, list(mq_cluster.nodes), ActiveFaults())
        recorded.setup()
        built.append(recorded)
        return recorded

    yield make
    from faults.nemesis import HEAL, Op

    for recorded in reversed(built):  # ends every fault, in the history too
        recorded.invoke(Op(HEAL))
        recorded.teardown()


def _build_nemesis(kind: str, cluster: Cluster, seed: int) -> Any:
    from faults.management import Management
    from faults.nemesis import (
        LinkNemesis,
        ManagementView,
        PartitionNemesis,
        PolicyNemesis,
        ProcessNemesis,
        QueueAdminNemesis,
        combined_nemesis,
    )
    from faults.seeds import stream

    management = {n: Management(cluster.mgmt_url(n)) for n in cluster.nodes}
    rng = stream(seed, "nemesis", kind)
    if kind == "process":
        return ProcessNemesis(cluster.process_control(), rng, view=ManagementView(management))
    if kind == "partition":
        return PartitionNemesis(cluster.toxiproxy, cluster.topology, rng)
    if kind == "links":
        return LinkNemesis(cluster.toxiproxy, cluster.topology)
    if kind == "policy":
        return PolicyNemesis(management, rng)
    if kind == "queue-admin":
        return QueueAdminNemesis(management, rng)
    if kind == "combined":
        return combined_nemesis(seed, control=cluster.process_control(),
                                view=ManagementView(management), client=cluster.toxiproxy,
                                topology=cluster.topology, management=management)
    raise ValueError(f"unknown nemesis {kind!r}; one of {', '.join(NEMESIS_KINDS)}")


def _locator(cluster: Cluster, default: str | None) -> Locate:
    """``master``/``mirror`` -> the node that is the queue's (by default ``default``'s)
    master or a mirror now, as a running node's management API reports it."""
    from faults.management import Management, ManagementError

    def locate(which: str, queue: str | None = None) -> str:
        queue = queue or default
        if queue is None:
            raise ValueError(f"a {which!r} target needs nemesis(..., queue=NAME)")
        for node in cluster.nodes:
            try:
                info = Management(cluster.mgmt_url(node)).call(
                    "GET", f"/api/queues/%2F/{quote(queue, safe='')}")
            except (ManagementError, OSError):
                continue
            if isinstance(info, dict) and info.get("node") in cluster.nodes:
                master = str(info["node"])
                if which == "master":
                    return master
                mirrors = [str(n) for n in info.get("slave_nodes") or []]
                mirrors = [n for n in mirrors if n != master] or [
                    n for n in cluster.nodes if n != master]
                return mirrors[0]
        raise LookupError(f"no running node reports queue {queue!r}")

    return locate
