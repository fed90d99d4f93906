"""The fault phase: its nemesis built on the started cluster (the faults, the
settled-state step, and the record of both as the history sees them), its schedule
planned over the cluster's links, and that schedule run to its final heal."""

from __future__ import annotations

import threading
from typing import Any

from faults.nemesis import (
    Compose,
    ManagementView,
    Record,
    UnhealedError,
    combined_nemesis,
    run_schedule,
)
from harness.run.cluster_state import SettledState
from harness.run.faults import ActiveFaults, RecordedNemesis
from harness.run.locate import QueueLocator
from harness.runtime import Cluster
from harness.scenarios import Scenario, plan_steps
from harness.workload import Recorder


def plan_faults(scenario: Scenario, seed: int, cluster: Cluster, recorder: Recorder,
                where: QueueLocator, active: ActiveFaults) -> tuple[RecordedNemesis, list[Any]]:
    """The run's nemesis and the steps it is to take; ``seed``: the nemesis's."""
    clients = [c for ids in scenario.workload.client_ids().values() for c in ids]
    for client in clients:  # every client link exists before the nemesis plans
        for node in scenario.node_names:
            cluster.client_address(client, node)
    steps = plan_steps(scenario, seed, [link.name for link in cluster.topology.node_links],
                       [link.name for link in cluster.topology.client_links])
    management = where.management
    faults = combined_nemesis(seed, control=cluster.process_control(),
                              view=ManagementView(management), client=cluster.toxiproxy,
                              topology=cluster.topology, management=management)
    inner = Compose([faults, SettledState(recorder, management, where.running,
                                          queues=scenario.workload.queues)])
    nemesis = RecordedNemesis(inner, recorder.writer, where.locate, cluster.topology,
                              scenario.node_names, active)
    return nemesis, steps


def run_faults(nemesis: RecordedNemesis, steps: list[Any], stop: threading.Event,
               problems: list[str]) -> list[Record]:
    """The fault phase, until ``stop`` is set or the steps are done. A final heal that
    fails is in the history (``fault-end fail``) and in ``problems``; the run goes on
    to drain what it can, and ends as a harness failure."""
    try:
        return run_schedule(nemesis, steps, stop=stop)
    except UnhealedError as exc:
        problems.append(f"the final heal did not end every fault: {exc}")
        return exc.records
