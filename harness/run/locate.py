"""Where a run's queues are on its started cluster, as the nodes report it now: which
nodes run, each queue's master and mirrors (else as configured), the node a symbolic
fault target names, and the order to drain a queue from."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from faults.management import Management, ManagementError
from faults.process import ProcessState
from harness.runtime import Cluster
from harness.scenarios import Scenario


class QueueLocator:
    def __init__(self, scenario: Scenario, members: dict[str, list[str]],
                 cluster: Cluster) -> None:
        """``members``: each queue's configured master then mirrors (`queue_members`)."""
        self.scenario = scenario
        self.members = members
        self.cluster = cluster
        self.management = {n: cluster.management(n) for n in scenario.node_names}

    def running(self) -> list[str]:
        control = self.cluster.process_control()
        return [n for n in self.scenario.node_names
                if control.state(n) is ProcessState.RUNNING]

    def endpoints(self) -> dict[str, Management]:
        """The management API of each running node."""
        return {n: self.management[n] for n in self.running()}

    def master(self, queue: str) -> str:
        """The queue's master as a running node reports it, else its configured home."""
        return self.reported_master(queue) or self.members[queue][0]

    def reported_master(self, queue: str) -> str | None:
        """The queue's master as the first running node that answers reports it."""
        info = self._reported(queue)
        return None if info is None else str(info["node"])

    def _reported_mirrors(self, queue: str) -> list[str]:
        """The queue's mirrors in join order, as the first running node that answers
        reports them."""
        info = self._reported(queue)
        mirrors = info.get("slave_nodes") if info is not None else None
        if not isinstance(mirrors, list):
            return []
        return [str(n) for n in mirrors if n in self.scenario.node_names]

    def _reported(self, queue: str) -> dict[str, Any] | None:
        """``GET /api/queues/%2F/{queue}`` from the first running node that answers
        naming a master."""
        for node in self.running():
            try:
                info = self.management[node].call(
                    "GET", f"/api/queues/%2F/{quote(queue, safe='')}")
            except ManagementError:
                continue
            if isinstance(info, dict) and info.get("node") in self.scenario.node_names:
                return info
        return None

    def locate(self, which: str, queue: str | None = None) -> str:
        """``master``, ``mirror`` (the eldest: the first the queue reports in join
        order, next after the master on its GM ring, the one a failure promotes) or
        ``youngest`` (the mirror that joined last) of ``queue``, by default the first;
        in configured order when no node reports the queue's mirrors."""
        queue = queue or self.scenario.workload.queues[0]
        master = self.master(queue)
        if which == "master":
            return master
        mirrors = ([n for n in self._reported_mirrors(queue) if n != master]
                   or [n for n in self.members[queue] if n != master]
                   or [n for n in self.scenario.node_names if n != master])
        return mirrors[-1] if which == "youngest" else mirrors[0]

    def drain_nodes(self, queue: str) -> list[str]:
        """The nodes to drain ``queue`` from, best first: its master, then the others
        running."""
        master = self.master(queue)
        return [master, *[n for n in self.running() if n != master]]
