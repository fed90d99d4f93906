"""One run of a scenario: start the cluster through a runtime, set the
policy, declare the queues, run the workload through warm-up, fault phase (the nemesis
schedule, ending in its guaranteed heal) and recovery, optionally drain by promotion
(sync, kill the master, drain from the promoted mirror, restart), drain every queue,
record what every node reports of its queues, collect the nodes' logs and events, and
check the history.

The history is opened before anything starts and flushed line by line, so a run that
fails half-way still leaves it, and a ``results.json`` saying what was found (at best
``unknown``) and why the harness stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast
from urllib.parse import quote

import aio_pika

from faults.management import Management, ManagementError
from faults.nemesis import (
    Compose,
    ManagementView,
    Op,
    Record,
    UnhealedError,
    combined_nemesis,
    run_schedule,
)
from faults.nemesis.view import wait_seen
from faults.process import ProcessState
from faults.seeds import derive, fresh_seed
from harness.checker import check_command
from harness.history import HistoryWriter
from harness.run.cluster_state import SettledState, record_cluster_state
from harness.run.faults import ActiveFaults, RecordedNemesis
from harness.run.store import new_run_dir, write_json
from harness.runtime import Cluster, ClusterSpec, Runtime
from harness.scenarios import POLICY_NAME, Scenario, decoy_policies, plan_steps, queue_pattern
from harness.workload import Recorder, Workload, content, drain
from harness.workload.clients import Address, amqp_url

EXIT_HARNESS_FAILURE = 255
SETTLE_SECONDS = 1.0  # consumers keep going this long after the last publish
# Bounds of the drain by promotion's waits: a surviving node naming a new master, and
# the killed node seen running again by the others.
PROMOTION_SECONDS = 30.0
REJOIN_SECONDS = 30.0
# The drain by promotion keeps each connection open this long after its last ack: a
# message delivered again after an ack whose connection stayed up is resurrected, while
# an ack on a connection that closed at once may have been lost with it.
ACK_GRACE_SECONDS = 2.5
DRAIN_REPORT_SECONDS = 5.0  # how often a drain tells how far it got
JOIN_ORDER_SECONDS = 30.0  # for a new queue's mirrors to be listed (rabbitmq target)


class HarnessError(RuntimeError):
    """The harness could not do its part (exit 255); the run's record says how far it got."""


@dataclass(frozen=True)
class RunOptions:
    runtime: str | None = None  # None: the scenario's
    target: str | None = None  # None: the scenario's
    seed: int | None = None  # None: the scenario's, else drawn
    time_limit: float | None = None  # seconds of workload before the drain
    nodes: int | None = None
    store: Path = Path("store")


@dataclass
class RunStatus:
    """What the live display shows; written by the run, read by the display."""

    scenario: str
    seed: int
    run_dir: Path
    phase: str = "starting"
    phase_started: float = field(default_factory=time.monotonic)
    phase_seconds: float | None = None
    # The phase's latest step (e.g. the node image's build), shown under the phase.
    step: str | None = None
    step_started: float = field(default_factory=time.monotonic)
    faults: ActiveFaults = field(default_factory=ActiveFaults)
    recorder: Recorder | None = None
    on_enter: Callable[[str, float | None], None] | None = None  # told of each phase
    on_step: Callable[[str], None] | None = None  # told of each step

    def enter(self, phase: str, seconds: float | None = None) -> None:
        self.phase, self.phase_started, self.phase_seconds = phase, time.monotonic(), seconds
        self.step = None
        if self.on_enter is not None:
            self.on_enter(phase, seconds)

    def report(self, step: str) -> None:
        """A step of the current phase: the cluster's start passes it as its `Progress`."""
        self.step, self.step_started = step, time.monotonic()
        if self.on_step is not None:
            self.on_step(step)


@contextlib.asynccontextmanager
async def reporting_drained(status: RunStatus, recorder: Recorder) -> AsyncIterator[None]:
    """While the block runs, tell ``status`` every few seconds how many messages it has
    drained: a drain takes one basic.get per message, tens of seconds for thousands."""
    before = recorder.figures.delivered

    async def tell() -> None:
        while True:
            await asyncio.sleep(DRAIN_REPORT_SECONDS)
            status.report(f"messages drained so far: {recorder.figures.delivered - before}")

    teller = asyncio.create_task(tell())
    try:
        yield
    finally:
        teller.cancel()


@dataclass
class RunOutcome:
    run_dir: Path
    exit_code: int
    results: dict[str, Any] | None
    error: str | None = None
    interrupted: bool = False  # by SIGINT or SIGTERM: whoever runs more should stop


def effective_scenario(scenario: Scenario, options: RunOptions) -> Scenario:
    """The scenario with the command line's overrides; ``time_limit`` sets how long the
    workload runs before the drain, taken from the fault phase first."""
    changes: dict[str, Any] = {}
    if options.nodes is not None:
        changes["nodes"] = options.nodes
    if options.runtime is not None:
        changes["runtime"] = options.runtime
    if options.target is not None:
        changes["target"] = options.target
    phases = scenario.phases
    if options.time_limit is not None:
        rest = phases.warmup + phases.recovery
        if options.time_limit > rest:
            phases = dataclasses.replace(phases, faults=options.time_limit - rest)
        else:
            share = options.time_limit / (rest + phases.faults)
            phases = dataclasses.replace(phases, warmup=phases.warmup * share,
                                         faults=phases.faults * share,
                                         recovery=phases.recovery * share)
        changes["phases"] = phases
    return dataclasses.replace(scenario, **changes)


def root_seed(scenario: Scenario, options: RunOptions) -> int:
    if options.seed is not None:
        return options.seed
    return scenario.seed if scenario.seed is not None else fresh_seed()


def queue_members(scenario: Scenario) -> dict[str, list[str]]:
    """Each queue's master (its home node, round robin) then mirrors in join order, as
    the policy places them: the other nodes in cluster order (docs/cluster-design.md).
    What the history's header says the harness set up, and where the checker's replay
    of promotions starts."""
    nodes = scenario.node_names
    policy = scenario.policy
    mode = policy.get("ha-mode")
    out: dict[str, list[str]] = {}
    for i, queue in enumerate(scenario.workload.queues):
        home = nodes[i % len(nodes)]
        members = [home, *(n for n in nodes if n != home)]
        if mode == "exactly":
            members = members[:int(policy["ha-params"])]
        elif mode == "nodes":
            members = [n for n in members if n in policy["ha-params"]]
        elif mode != "all":
            members = [home]
        out[queue] = members or [home]
    return out


def history_config(scenario: Scenario, members: dict[str, list[str]]) -> dict[str, Any]:
    w = scenario.workload
    return {
        "nodes": scenario.node_names, "partition_handling": scenario.partition_handling,
        "persistent": w.persistent, "runtime": scenario.runtime, "target": scenario.target,
        "queues": {q: {"members": m, "durable": w.durable, "policy": dict(scenario.policy)}
                   for q, m in members.items()},
        "workload": dataclasses.asdict(w), "nemesis": dataclasses.asdict(scenario.nemesis),
        "phases": dataclasses.asdict(scenario.phases),
    }


# The runtimes each broker can run in: RabbitMQ only in containers (its nodes find
# each other by host name, which only a network of their own gives them).
TARGET_RUNTIMES = {"mirrorchaos": ("process", "docker"), "rabbitmq": ("docker",)}


def make_runtime(name: str, *, target: str = "mirrorchaos", loses_power: bool = False) -> Runtime:
    """``loses_power``: the scenario can lose unsynced writes, so local nodes keep their
    data on lazyfs where FUSE works."""
    # cast: the runtimes' ``__enter__`` is typed as their base class, not as `Cluster`.
    if name not in TARGET_RUNTIMES[target]:
        raise HarnessError(f"the {target} target runs in {' or '.join(TARGET_RUNTIMES[target])}, "
                           f"not {name}")
    if target == "rabbitmq":
        from harness.runtime.rabbitmq import RabbitMQRuntime
        return cast(Runtime, RabbitMQRuntime())
    if name == "process":
        from harness.runtime.process import ProcessRuntime
        return cast(Runtime, ProcessRuntime(lazyfs=None if loses_power else False))
    try:
        from harness.runtime.docker import DockerRuntime  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise HarnessError(f"the docker runtime is not available here: {exc}") from None
    return cast(Runtime, DockerRuntime())


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
        self.management: dict[str, Management] = {}
        self.problems: list[str] = []  # failures the run carried on after

    # -- the whole run ---------------------------------------------------------------

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
        return dataclasses.replace(self._check(error), interrupted=interrupted)

    def _run(self, recorder: Recorder, seeds: dict[str, int]) -> None:
        s = self.scenario
        self.status.enter("starting cluster")
        node_args = ("--partition-handling", s.partition_handling, *s.node_args)
        spec = ClusterSpec(nodes=tuple(s.node_names), run_id=self.run_id,
                           node_args=node_args, tick=s.tick, seed=seeds["toxiproxy"],
                           progress=self.status.report)
        self.cluster = cluster = self.runtime.start(spec)
        self.status.enter("setting up")
        self._set_policy(cluster)
        clients = [c for ids in s.workload.client_ids().values() for c in ids]
        for client in clients:  # every client link exists before the nemesis plans
            for node in s.node_names:
                cluster.client_address(client, node)
        steps = plan_steps(s, seeds["nemesis"], [link.name for link in
                                                 cluster.topology.node_links],
                           [link.name for link in cluster.topology.client_links])
        management = self.management = {n: cluster.management(n) for n in s.node_names}
        faults = combined_nemesis(seeds["nemesis"], control=cluster.process_control(),
                                  view=ManagementView(management), client=cluster.toxiproxy,
                                  topology=cluster.topology, management=management)
        inner = Compose([faults, SettledState(recorder, management, self._running,
                                              queues=s.workload.queues)])
        nemesis = RecordedNemesis(inner, recorder.writer, self._locate, cluster.topology,
                                  s.node_names, self.status.faults)
        asyncio.run(self._phases(cluster, recorder, nemesis, steps))

    async def _phases(self, cluster: Cluster, recorder: Recorder, nemesis: RecordedNemesis,
                      steps: list[Any]) -> None:
        s, phases = self.scenario, self.scenario.phases
        homes = {q: m[0] for q, m in self.members.items()}
        await self._declare(cluster, homes)
        if s.target == "rabbitmq":
            await asyncio.to_thread(self._record_join_order, recorder)

        async def client_address(client_id: str, node: str) -> tuple[str, int]:
            return cluster.client_address(client_id, node)  # made during setup: no I/O

        workload = Workload(s.workload, recorder, s.node_names, homes, client_address)
        workload.start()
        try:
            self.status.enter("warm-up", phases.warmup)
            await asyncio.sleep(phases.warmup)
            self.status.enter("faults", phases.faults)
            nemesis.setup()
            await asyncio.to_thread(self._schedule, nemesis, steps)
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
        await asyncio.to_thread(self._record_cluster_state, recorder, "quiet")
        if phases.promotion_drain:
            self.status.enter("drain by promotion")
            async with reporting_drained(self.status, recorder):
                await self._promotion_drain(recorder, nemesis, direct)
        self.status.enter("drain", phases.drain_timeout)
        candidates = {q: await asyncio.to_thread(self._drain_nodes, q)
                      for q in s.workload.queues}
        # A queue left undrained is recorded as such: the checker's verdict is unknown.
        async with reporting_drained(self.status, recorder):
            await drain(s.workload, recorder, candidates, direct, phases.drain_timeout)
        await asyncio.to_thread(self._record_cluster_state, recorder, "end")

    async def _promotion_drain(self, recorder: Recorder, nemesis: RecordedNemesis,
                               address: Address) -> None:
        """Sync every mirrored queue (recorded as ``sync`` faults that end when the
        sync is seen complete), record what each node reports, SIGKILL the master, drain
        every queue from the promoted mirror, and start the killed node again. A mirror
        whose contents diverged from its master's shows up in this drain. Every wait is
        bounded; what fails is recorded and the run goes on to the final drain."""
        mirrored = [q for q, members in self.members.items() if len(members) > 1]
        if not mirrored:
            self.problems.append("promotion_drain: no workload queue is mirrored")
            return
        for queue in mirrored:
            master = await asyncio.to_thread(self._master, queue)
            await asyncio.to_thread(nemesis.invoke,
                                    Op("sync-queue", {"queue": queue, "node": master}))
        await asyncio.to_thread(self._record_cluster_state, recorder, "before-drain")
        victim = await asyncio.to_thread(self._master, mirrored[0])
        orphaned = [q for q in mirrored if await asyncio.to_thread(self._master, q) == victim]
        killed = await asyncio.to_thread(nemesis.invoke, Op("kill", {"nodes": [victim]}))
        if killed.type == "fail":
            self.problems.append(f"promotion_drain: the kill of {victim} failed: "
                                 f"{killed.error}")
            return
        for queue in orphaned:
            if not await asyncio.to_thread(self._await_new_master, queue, victim):
                self.problems.append(f"promotion_drain: no surviving node named a new "
                                     f"master of {queue} within {PROMOTION_SECONDS:g}s")
        candidates = {q: await asyncio.to_thread(self._drain_nodes, q)
                      for q in self.scenario.workload.queues}
        await drain(self.scenario.workload, recorder, candidates, address,
                    self.scenario.phases.drain_timeout, linger=ACK_GRACE_SECONDS)
        started = await asyncio.to_thread(nemesis.invoke, Op("start", {"nodes": [victim]}))
        if started.type != "ok":
            self.problems.append(f"promotion_drain: {victim} did not start again: "
                                 f"{started.error}")
            return
        missing = await asyncio.to_thread(wait_seen, ManagementView(self.management), victim,
                                          self._running(), REJOIN_SECONDS)
        if missing:
            self.problems.append(f"promotion_drain: {victim} started again but {missing} "
                                 f"did not see it running within {REJOIN_SECONDS:g}s")

    def _await_new_master(self, queue: str, old: str) -> bool:
        """Wait until a running node names a master of ``queue`` other than ``old``."""
        deadline = time.monotonic() + PROMOTION_SECONDS
        while time.monotonic() < deadline:
            if self._reported_master(queue) not in (None, old):
                return True
            time.sleep(0.1)
        return False

    def _record_cluster_state(self, recorder: Recorder, phase: str) -> None:
        record_cluster_state(recorder, phase, {n: self.management[n] for n in self._running()})

    def _schedule(self, nemesis: RecordedNemesis, steps: list[Any]) -> list[Record]:
        """The fault phase. A final heal that fails is in the history (``fault-end
        fail``); the run goes on to drain what it can, and ends as a harness failure."""
        try:
            return run_schedule(nemesis, steps, stop=self.stop)
        except UnhealedError as exc:
            self.problems.append(f"the final heal did not end every fault: {exc}")
            return exc.records

    # -- setup -----------------------------------------------------------------------

    def _set_policy(self, cluster: Cluster) -> None:
        if not self.scenario.policy:
            return
        body = {"pattern": queue_pattern(self.scenario),
                "definition": dict(self.scenario.policy), "priority": 0, "apply-to": "queues"}
        policies = {POLICY_NAME: body, **decoy_policies(self.scenario)}
        # On every node: until the cluster replicates metadata, each holds its own.
        for node in self.scenario.node_names:
            management = cluster.management(node)
            for name, policy in policies.items():
                management.put_policy("/", name, policy)

    async def _declare(self, cluster: Cluster, homes: dict[str, str]) -> None:
        w = self.scenario.workload
        for queue, node in homes.items():
            host, port = cluster.amqp_address(node)
            connection = await aio_pika.connect(amqp_url(host, port, w.heartbeat), timeout=10)
            async with connection:
                channel = await connection.channel()
                declared = await channel.declare_queue(queue, durable=w.durable)
                if w.exchange is not None:
                    exchange = await channel.declare_exchange(
                        w.exchange, aio_pika.ExchangeType(w.exchange_type), durable=True)
                    await declared.bind(exchange, routing_key=content.binding_key(queue, w))

    def _record_join_order(self, recorder: Recorder) -> None:
        """RabbitMQ starts a new queue's mirrors all at once and they join in the order
        they get there, not in the node order the header assumes: once the master lists
        every mirror (``slave_nodes``, eldest first), that order goes in the history as
        a ``members`` line, before any fault."""
        for queue, members in self.members.items():
            master = members[0]
            deadline = time.monotonic() + JOIN_ORDER_SECONDS
            while True:
                info = self.management[master].call(
                    "GET", f"/api/queues/%2F/{quote(queue, safe='')}")
                mirrors = [str(n) for n in info.get("slave_nodes") or []]
                if info.get("node") == master and sorted(mirrors) == sorted(members[1:]):
                    break
                if time.monotonic() >= deadline:
                    raise HarnessError(
                        f"{queue}: {master} did not list it on {', '.join(members)} within "
                        f"{JOIN_ORDER_SECONDS:g}s (master {info.get('node')}, mirrors {mirrors})")
                time.sleep(0.2)
            recorder.record("harness", "members", "ok", queue=queue, members=[master, *mirrors])

    # -- where queues are ------------------------------------------------------------

    def _running(self) -> list[str]:
        if self.cluster is None:
            return []
        control = self.cluster.process_control()
        return [n for n in self.scenario.node_names
                if control.state(n) is ProcessState.RUNNING]

    def _master(self, queue: str) -> str:
        """The queue's master as a running node reports it, else its configured home."""
        return self._reported_master(queue) or self.members[queue][0]

    def _reported_master(self, queue: str) -> str | None:
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
        for node in self._running():
            try:
                info = self.management[node].call(
                    "GET", f"/api/queues/%2F/{quote(queue, safe='')}")
            except ManagementError:
                continue
            if isinstance(info, dict) and info.get("node") in self.scenario.node_names:
                return info
        return None

    def _locate(self, which: str, queue: str | None = None) -> str:
        """``master``, ``mirror`` (the eldest: the first the queue reports in join
        order, next after the master on its GM ring, the one a failure promotes) or
        ``youngest`` (the mirror that joined last) of ``queue``, by default the first;
        in configured order when no node reports the queue's mirrors."""
        queue = queue or self.scenario.workload.queues[0]
        master = self._master(queue)
        if which == "master":
            return master
        mirrors = ([n for n in self._reported_mirrors(queue) if n != master]
                   or [n for n in self.members[queue] if n != master]
                   or [n for n in self.scenario.node_names if n != master])
        return mirrors[-1] if which == "youngest" else mirrors[0]

    def _drain_nodes(self, queue: str) -> list[str]:
        master = self._master(queue)
        return [master, *[n for n in self._running() if n != master]]

    # -- the end ---------------------------------------------------------------------

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

    def _check(self, error: str | None) -> RunOutcome:
        self.status.enter("checking")
        code = check_command(self.run_dir, out=io.StringIO(), err=io.StringIO())
        results_path = self.run_dir / "results.json"
        results: dict[str, Any] | None = None
        if results_path.exists():
            results = json.loads(results_path.read_text(encoding="utf-8"))
        if error is None:
            return RunOutcome(self.run_dir, code, results)
        # The harness failed: the verdict can be no better than unknown.
        doc = results or {"scenario": self.scenario.name, "seed": self.seed,
                          "runtime": self.scenario.runtime, "target": self.scenario.target}
        if doc.get("valid") is True:
            doc["valid"] = "unknown"
        doc["harness_error"] = error
        write_json(results_path, doc)
        return RunOutcome(self.run_dir, EXIT_HARNESS_FAILURE, doc, error)


def run_scenario(scenario: Scenario, options: RunOptions,
                 on_start: Callable[[RunStatus], None] = lambda _: None) -> RunOutcome:
    scenario = effective_scenario(scenario, options)
    seed = root_seed(scenario, options)
    runtime = make_runtime(scenario.runtime, target=scenario.target,
                           loses_power=scenario.loses_power)
    run_dir = new_run_dir(options.store, scenario.name, seed)
    return ScenarioRun(scenario, seed, run_dir, runtime).execute(on_start)

