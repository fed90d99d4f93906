"""One run of a scenario, in order: start the cluster through a runtime, set it up,
run the workload through warm-up, fault phase (the nemesis schedule, ending in its
guaranteed heal) and recovery, optionally drain by promotion, drain every queue,
record what every node reports of its queues, collect the nodes' logs and events, and
check the history. Each step's work is in a module of its own; this one says when each
happens and what the run keeps of it.

The history is opened before anything starts and flushed line by line, so a run that
fails half-way still leaves it, and a ``results.json`` saying what was found (at best
``unknown``) and why the harness stopped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from faults.seeds import derive
from harness.history import HistoryWriter
from harness.run.cluster_state import record_cluster_state
from harness.run.config import (
    RunOptions,
    effective_scenario,
    history_config,
    queue_members,
    root_seed,
)
from harness.run.fault_phase import plan_faults, run_faults
from harness.run.faults import RecordedNemesis
from harness.run.locate import QueueLocator
from harness.run.outcome import RunOutcome, check_run
from harness.run.promotion import promotion_drain
from harness.run.runtimes import make_runtime
from harness.run.setup import declare_queues, record_join_order, set_policy
from harness.run.status import RunStatus, reporting_drained
from harness.run.store import new_run_dir, write_json
from harness.runtime import Cluster, ClusterSpec, Runtime
from harness.scenarios import Scenario
from harness.workload import Recorder, Workload, drain

SETTLE_SECONDS = 1.0  # consumers keep going this long after the last publish


class ScenarioRun:
    """One run; `execute` does it all and returns the outcome."""

    def __init__(self, scenario: Scenario, seed: int, run_dir: Path,
                 runtime: Runtime) -> None:
        self.scenario = scenario
        self.seed = seed
        self.run_dir = run_dir
        self.runtime = runtime
        self.run_id = f"{scenario.name}-{run_dir.name}"
        self.members = queue_members(scenario)
        self.status = RunStatus(scenario.name, seed, run_dir)
        self.stop = threading.Event()
        self.cluster: Cluster | None = None
        self.problems: list[str] = []  # failures the run carried on after

    def execute(self, on_start: Callable[[RunStatus], None] = lambda _: None) -> RunOutcome:
        config = history_config(self.scenario, self.members)
        seeds = {"root": self.seed, "nemesis": derive(self.seed, "nemesis"),
                 "toxiproxy": derive(self.seed, "toxiproxy")}
        write_json(self.run_dir / "config.json", {
            "run_id": self.run_id, "scenario": dataclasses.asdict(self.scenario),
            "seed": self.seed, "seeds": seeds, "runtime": self.scenario.runtime,
            "target": self.scenario.target, "started": time.time(), "history": config})
        writer = HistoryWriter(self.run_dir / "history.jsonl", run_id=self.run_id,
                               scenario=self.scenario.name, seed=self.seed, config=config)
        recorder = self.status.recorder = Recorder(writer)
        on_start(self.status)
        error: str | None = None
        interrupted = False
        try:
            self._run(recorder, seeds)
        except KeyboardInterrupt:
            error, interrupted = "interrupted", True
        # Any failure of ours (a stray cancellation too): keep what the run recorded.
        except (Exception, asyncio.CancelledError) as exc:
            error = f"{type(exc).__name__}: {exc}"
        finally:
            writer.close()
            error = self._wind_down(error)
        error = "; ".join([*self.problems, *([error] if error else [])]) or None
        self.status.enter("checking")
        outcome = check_run(self.run_dir, self.scenario, self.seed, error)
        return dataclasses.replace(outcome, interrupted=interrupted)

    def _run(self, recorder: Recorder, seeds: dict[str, int]) -> None:
        s = self.scenario
        self.status.enter("starting cluster")
        node_args = ("--partition-handling", s.partition_handling, *s.node_args)
        spec = ClusterSpec(nodes=tuple(s.node_names), run_id=self.run_id,
                           node_args=node_args, tick=s.tick, seed=seeds["toxiproxy"],
                           progress=self.status.report)
        self.cluster = cluster = self.runtime.start(spec)
        self.status.enter("setting up")
        set_policy(s, cluster)
        where = QueueLocator(s, self.members, cluster)
        nemesis, steps = plan_faults(s, seeds["nemesis"], cluster, recorder, where,
                                     self.status.faults)
        asyncio.run(self._phases(cluster, recorder, where, nemesis, steps))

    async def _phases(self, cluster: Cluster, recorder: Recorder, where: QueueLocator,
                      nemesis: RecordedNemesis, steps: list[Any]) -> None:
        s, phases = self.scenario, self.scenario.phases
        homes = {q: m[0] for q, m in self.members.items()}
        await declare_queues(s.workload, cluster, homes)
        if s.target == "rabbitmq":
            await asyncio.to_thread(record_join_order, recorder, self.members,
                                    where.management)

        async def client_address(client_id: str, node: str) -> tuple[str, int]:
            return cluster.client_address(client_id, node)  # made during setup: no I/O

        workload = Workload(s.workload, recorder, s.node_names, homes, client_address)
        workload.start()
        try:
            self.status.enter("warm-up", phases.warmup)
            await asyncio.sleep(phases.warmup)
            self.status.enter("faults", phases.faults)
            nemesis.setup()
            await asyncio.to_thread(run_faults, nemesis, steps, self.stop, self.problems)
            self.status.enter("recovery", phases.recovery)
            await asyncio.sleep(phases.recovery)
            self.status.enter("stopping clients")
            await workload.stop_publishing()
            await asyncio.sleep(SETTLE_SECONDS)
        finally:
            self.stop.set()  # the schedule, if still running, heals and returns
            await workload.stop()

        async def direct(client_id: str, node: str) -> tuple[str, int]:
            return cluster.amqp_address(node)

        # What the nodes claim before anything is synchronised or drained: a mirror
        # reported synchronised must hold what its master holds.
        await asyncio.to_thread(lambda: record_cluster_state(recorder, "quiet",
                                                             where.endpoints()))
        if phases.promotion_drain:
            self.status.enter("drain by promotion")
            async with reporting_drained(self.status, recorder):
                await promotion_drain(s, where, recorder, nemesis, direct, self.problems)
        self.status.enter("drain", phases.drain_timeout)
        candidates = {q: await asyncio.to_thread(where.drain_nodes, q)
                      for q in s.workload.queues}
        # A queue left undrained is recorded as such: the checker's verdict is unknown.
        async with reporting_drained(self.status, recorder):
            await drain(s.workload, recorder, candidates, direct, phases.drain_timeout)
        await asyncio.to_thread(lambda: record_cluster_state(recorder, "end",
                                                             where.endpoints()))

    def _wind_down(self, error: str | None) -> str | None:
        """Collect the nodes' files and remove the cluster, whatever happened; an error
        here is reported too."""
        self.status.enter("collecting")
        if self.cluster is None:
            return error
        problems = [error] if error else []
        try:
            self.cluster.collect(self.run_dir)
        except Exception as exc:  # the run's record must still be checked
            problems.append(f"collecting node files: {type(exc).__name__}: {exc}")
        try:
            self.cluster.stop()
        except Exception as exc:
            problems.append(f"stopping the cluster: {type(exc).__name__}: {exc}")
        return "; ".join(problems) or None


def run_scenario(scenario: Scenario, options: RunOptions,
                 on_start: Callable[[RunStatus], None] = lambda _: None) -> RunOutcome:
    scenario = effective_scenario(scenario, options)
    seed = root_seed(scenario, options)
    runtime = make_runtime(scenario.runtime, target=scenario.target,
                           loses_power=scenario.loses_power)
    run_dir = new_run_dir(options.store, scenario.name, seed)
    return ScenarioRun(scenario, seed, run_dir, runtime).execute(on_start)
