"""`mirrorchaos run` end to end on local processes, through the real command line:
the store layout, the verdicts and exit codes, and a record kept when the harness
fails. Plus the parts of a run that need no cluster."""

from __future__ import annotations

import asyncio
import io
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest
from rich.console import Console

from faults.nemesis import NoopNemesis, Op
from harness.checker import check
from harness.history import HistoryWriter, read_history
from harness.run import RunOptions, RunStatus, effective_scenario, queue_members
from harness.run import status as run_status
from harness.run.faults import ActiveFaults, RecordedNemesis, _cut_off
from harness.run.live import LiveDisplay
from harness.scenarios import SCENARIOS, Scenario
from harness.workload import Recorder
from tests.ha_cases import wait_for

RESULT_KEYS = {"scenario", "seed", "runtime", "valid", "counts", "violations", "caveats",
               "latency_ms", "faults"}
COUNT_KEYS = {"attempted", "confirmed", "nacked", "indeterminate", "delivered", "lost",
              "unexpected", "duplicated", "redelivered", "recovered", "caveat_lost"}


def mirrorchaos(*args: str, timeout: float = 100) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "reports.cli", *args], capture_output=True,
                          text=True, timeout=timeout, check=False)


def events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in
            (run_dir / "history.jsonl").read_text().splitlines()[1:]]


def test_smoke_on_processes_is_valid_and_stored(tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = mirrorchaos("run", "smoke", "--runtime", "process", "--seed", "42",
                       "--time-limit", "3", "--store", str(store))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "seed 42" in done.stderr and "verdict: valid" in done.stdout
    # Without a terminal, a line per phase and under it one per step, with the phase's
    # elapsed seconds.
    lines = done.stderr.splitlines()
    steps = lines[lines.index("  phase starting cluster") + 1:lines.index("  phase setting up")]
    told = [re.fullmatch(r" +\d+\.\ds  (.+)", line) for line in steps]
    assert all(told), steps
    assert [m.group(1) for m in told if m][-2:] == [
        "nodes n1, n2, n3 answering", "cluster formed: every node sees n1, n2, n3"]
    run_dir = (store / "latest").resolve()
    assert run_dir.parent == store / "smoke" and run_dir.name.endswith("-seed42")
    # the last lines name the stored run and its reports by their whole paths
    assert done.stdout.splitlines()[-2:] == [f"  {run_dir / 'report.html'}",
                                             f"  {run_dir / 'junit.xml'}"]
    results = json.loads((run_dir / "results.json").read_text())
    assert results.keys() >= RESULT_KEYS and results["counts"].keys() >= COUNT_KEYS
    assert results["valid"] is True and results["seed"] == 42
    counts = results["counts"]
    assert counts["confirmed"] > 100 and counts["delivered"] == counts["attempted"]
    assert counts["lost"] == counts["unexpected"] == counts["duplicated"] == 0
    assert results["latency_ms"]["confirm_p99"] > 0
    config = json.loads((run_dir / "config.json").read_text())
    assert config["seed"] == 42 and config["scenario"]["name"] == "smoke"
    assert config["seeds"]["nemesis"] != config["seeds"]["toxiproxy"]
    for node in ("n1", "n2", "n3"):
        assert (run_dir / "nodes" / f"{node}.log").exists()
        assert (run_dir / "nodes" / f"{node}.events.jsonl").stat().st_size > 0
    lines = events(run_dir)
    assert {e["op"] for e in lines} >= {"connect", "publish", "confirm", "deliver", "ack",
                                        "drain", "disconnect"}
    assert {"p1", "p2", "c1", "c2"} <= {e["process"] for e in lines}
    # re-checking the stored run gives the same verdict
    assert mirrorchaos("check", str(run_dir)).returncode == 0


# ignore: under pause_minority the survivor of a two-node cluster pauses as well.
KILL_TOML = ('base = "confirms-survive-kill"\nnodes = 2\npartition_handling = "ignore"\n'
             "[workload]\npersistent = false\nrate = 100\n"
             "[nemesis]\nhold = 2.0\nquiet = 10.0\n"
             "[phases]\nwarmup = 1.0\nfaults = 3.0\nrecovery = 1.0\n")


def run_kill(tmp_path: Path) -> tuple[int, Path, str]:
    scenario = tmp_path / "kill.toml"
    scenario.write_text(KILL_TOML)
    store = tmp_path / "store"
    done = mirrorchaos("run", str(scenario), "--seed", "7", "--store", str(store))
    return done.returncode, (store / "latest").resolve(), done.stdout + done.stderr


def assert_killed_once(lines: list[dict[str, Any]]) -> None:
    kills = [(e["op"], e["type"], e["targets"]) for e in lines if e.get("fault") == "kill"]
    assert kills == [("fault-start", "invoke", ["n1"]), ("fault-start", "ok", ["n1"]),
                     ("fault-end", "invoke", ["n1"]), ("fault-end", "ok", ["n1"])]
    # the publishers saw their connections drop and came back
    assert any(e["op"] == "disconnect" and e["type"] == "info" for e in lines)
    assert sum(e["op"] == "connect" and e["type"] == "ok" and e["process"] == "p1"
               for e in lines) >= 2


@pytest.mark.campaign
def test_a_kill_of_a_mirrored_master_keeps_every_confirmed_message(tmp_path: Path) -> None:
    """SIGKILL of the master under ha-mode all: transient messages survive on n2."""
    code, run_dir, output = run_kill(tmp_path)
    assert code == 0, output
    results = json.loads((run_dir / "results.json").read_text())
    assert results["counts"]["lost"] == 0 and results["counts"]["confirmed"] > 100
    assert read_history(run_dir / "history.jsonl").header.queue("q1").members == ("n1", "n2")
    assert_killed_once(events(run_dir))


def test_a_cluster_that_never_starts_leaves_history_and_unknown_results(
        tmp_path: Path) -> None:
    scenario = tmp_path / "broken.toml"
    scenario.write_text('base = "smoke"\nnodes = 1\nnode_args = ["--no-such-flag"]\n')
    store = tmp_path / "store"
    done = mirrorchaos("run", str(scenario), "--seed", "3", "--store", str(store))
    assert done.returncode == 255, done.stdout + done.stderr
    run_dir = (store / "latest").resolve()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["valid"] == "unknown" and "ClusterStartError" in results["harness_error"]
    assert read_history(run_dir / "history.jsonl").header.seed == 3
    assert "harness failure" in done.stdout


def test_sigterm_stops_a_run_removing_its_cluster_and_keeping_its_history(
        tmp_path: Path) -> None:
    """As a cancelled CI job or a `kill` does: no node or proxy outlives the run."""
    store = tmp_path / "store"
    run = subprocess.Popen([sys.executable, "-m", "reports.cli", "run", "smoke", "--seed", "4",
                            "--time-limit", "60", "--store", str(store)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def started() -> list[psutil.Process]:
            return [p for p in psutil.Process(run.pid).children(recursive=True)
                    if "cluster.node" in " ".join(p.cmdline())]
        wait_for(lambda: len(started()) == 3, "the run's three nodes", timeout=60)
        helpers = psutil.Process(run.pid).children(recursive=True)
        run.send_signal(signal.SIGTERM)
        assert run.wait(60) != 0
    finally:
        run.kill()
    assert not any(p.is_running() for p in helpers), "a node or proxy outlived the run"
    run_dir = (store / "latest").resolve()
    assert read_history(run_dir / "history.jsonl").header.seed == 4
    assert "interrupted" in json.loads((run_dir / "results.json").read_text())["harness_error"]


def test_bad_scenarios_exit_254_naming_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[workload]\nrate = 0\n")
    done = mirrorchaos("run", str(bad), "--store", str(tmp_path / "store"))
    assert done.returncode == 254
    said = done.stderr.replace("\n", "")  # the terminal report wraps a long path
    assert str(bad) in said and "'workload.rate'" in said
    assert not (tmp_path / "store").exists()
    assert mirrorchaos("run", "no-such-scenario").returncode == 254


def test_scenarios_lists_every_built_in_with_its_description() -> None:
    done = mirrorchaos("scenarios")
    assert done.returncode == 0
    listed = dict(line.split(None, 1) for line in done.stdout.splitlines())
    assert listed.keys() == SCENARIOS.keys()
    assert listed["smoke"].strip() == SCENARIOS["smoke"].description


# -- the parts that need no cluster -------------------------------------------------------

def test_queue_members_follow_the_policy() -> None:
    base = Scenario("t", "t", nodes=3)
    assert queue_members(base) == {"q1": ["n1", "n2", "n3"]}
    two = Scenario("t", "t", nodes=3, policy={"ha-mode": "exactly", "ha-params": 2},
                   workload=SCENARIOS["smoke"].workload.__class__(queues=("a", "b")))
    # mirrors join in cluster order, as the broker adds them: b's eldest mirror is n1
    assert queue_members(two) == {"a": ["n1", "n2"], "b": ["n2", "n1"]}
    every = Scenario("t", "t", nodes=3, policy={"ha-mode": "all"},
                     workload=two.workload)
    assert queue_members(every) == {"a": ["n1", "n2", "n3"], "b": ["n2", "n1", "n3"]}
    assert queue_members(Scenario("t", "t", policy={})) == {"q1": ["n1"]}


def test_time_limit_shortens_the_fault_phase_first() -> None:
    smoke = SCENARIOS["smoke"]
    ten = effective_scenario(smoke, RunOptions(time_limit=10.0, nodes=5))
    assert ten.nodes == 5 and ten.runtime_seconds == 10.0
    assert ten.phases.warmup == smoke.phases.warmup
    tiny = effective_scenario(smoke, RunOptions(time_limit=1.0))
    assert abs(tiny.runtime_seconds - 1.0) < 1e-9


def test_recorded_faults_are_history_the_checker_reads(tmp_path: Path) -> None:
    config = {"nodes": ["n1", "n2", "n3"], "partition_handling": "pause_minority"}
    path = tmp_path / "history.jsonl"
    status = ActiveFaults()
    with HistoryWriter(path, run_id="r", scenario="t", seed=1, config=config) as writer:
        nemesis = RecordedNemesis(NoopNemesis(), writer, lambda which, queue=None: "n2", None,  # type: ignore[arg-type]
                                  ["n1", "n2", "n3"], status)
        nemesis.invoke(Op("pause", {"nodes": "master"}))
        assert status.active == {"pause-1": "pause n2"}
        nemesis.invoke(Op("resume", {"nodes": ["n2"]}))
        assert status.active == {}
        nemesis.invoke(Op("kill", {"nodes": ["n1", "n3"]}))
        nemesis.invoke(Op("set-policy", {"name": "ha", "pattern": "^q",
                                         "definition": {"ha-mode": "exactly", "ha-params": 2}}))
        nemesis.invoke(Op("heal"))
        writer.append("harness", "drain", "ok")
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    starts = [(e["fault_id"], e["targets"]) for e in lines
              if e["op"] == "fault-start" and e["type"] == "ok"]
    assert starts == [("pause-1", ["n2"]), ("kill-2", ["n1", "n3"]), ("policy-3", [])]
    # a policy change names its definition from the invoke on, as the history requires
    assert [e["definition"] for e in lines if e.get("fault") == "policy"
            and e["op"] == "fault-start"] == [{"ha-mode": "exactly", "ha-params": 2}] * 2
    ends = [e["fault_id"] for e in lines if e["op"] == "fault-end" and e["type"] == "ok"]
    assert ends == ["pause-1", "kill-2", "policy-3"]
    result = check(read_history(path))
    assert [f["id"] for f in result.data["faults"]] == ["pause-1", "kill-2", "policy-3"]


def test_a_forget_is_one_fault_on_the_node_then_meant_that_a_start_ends(
        tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    config = {"nodes": ["n1", "n2", "n3"], "partition_handling": "pause_minority"}
    status = ActiveFaults()
    with HistoryWriter(path, run_id="r", scenario="t", seed=1, config=config) as writer:
        nemesis = RecordedNemesis(NoopNemesis(), writer, lambda which, queue=None: "n2",
                                  None,  # type: ignore[arg-type]
                                  ["n1", "n2", "n3"], status)
        nemesis.invoke(Op("forget", {"node": "master"}))
        assert status.active == {"forget-1": "forget n2"}
        nemesis.invoke(Op("start", {"nodes": ["n2"]}))
        assert status.active == {}
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    assert [(e["op"], e["type"], e["fault"], e["targets"]) for e in lines] == [
        ("fault-start", "invoke", "forget", ["n2"]), ("fault-start", "ok", "forget", ["n2"]),
        ("fault-end", "ok", "forget", ["n2"])]


def test_a_policy_naming_nodes_symbolically_is_recorded_with_the_nodes_then_meant(
        tmp_path: Path) -> None:
    """``ha-params`` ``["mirror", "youngest"]``: the nodes they name when invoked, of
    the first queue or of the step's ``queue``."""
    named = {"master@None": "n1", "mirror@None": "n2", "youngest@None": "n3",
             "mirror@q2": "n3", "youngest@q2": "n1"}
    path = tmp_path / "history.jsonl"
    config = {"nodes": ["n1", "n2", "n3"], "partition_handling": "pause_minority"}
    with HistoryWriter(path, run_id="r", scenario="t", seed=1, config=config) as writer:
        nemesis = RecordedNemesis(NoopNemesis(), writer,
                                  lambda which, queue=None: named[f"{which}@{queue}"],
                                  None,  # type: ignore[arg-type]
                                  ["n1", "n2", "n3"], ActiveFaults())
        nemesis.invoke(Op("set-policy", {"name": "ha", "pattern": "^q", "definition": {
            "ha-mode": "nodes", "ha-params": ["mirror", "youngest", "n1"]}}))
        nemesis.invoke(Op("set-policy", {"name": "ha", "pattern": "^q", "queue": "q2",
                                         "definition": {"ha-mode": "nodes",
                                                        "ha-params": ["mirror", "youngest"]}}))
    starts = [e for e in map(json.loads, path.read_text().splitlines()[1:])
              if e["op"] == "fault-start" and e["type"] == "ok"]
    assert [s["definition"]["ha-params"] for s in starts] == [["n2", "n3", "n1"], ["n3", "n1"]]


def test_a_partition_targets_the_nodes_it_cuts_off() -> None:
    nodes = ["n1", "n2", "n3", "n4", "n5"]
    isolate = {"n1": ["n2", "n3", "n4", "n5"], **{n: ["n1"] for n in nodes[1:]}}
    assert _cut_off(isolate, nodes) == ["n1"]
    halves = {"n1": ["n3", "n4", "n5"], "n2": ["n3", "n4", "n5"],
              **{n: ["n1", "n2"] for n in nodes[2:]}}
    assert _cut_off(halves, nodes) == ["n1", "n2"]
    assert _cut_off({"n2": ["n1"]}, nodes) == ["n2"]  # one-way: nobody is cut off


def test_live_display_shows_phase_faults_and_anomalies(tmp_path: Path) -> None:
    config = {"nodes": ["n1"], "partition_handling": "ignore"}
    with HistoryWriter(tmp_path / "h.jsonl", run_id="r", scenario="t", seed=1,
                       config=config) as writer:
        recorder = Recorder(writer)
        recorder.record("p1", "publish", "invoke", msg="p1-1", queue="q")
        recorder.record("p1", "confirm", "ok", msg="p1-1", queue="q")
        for _ in range(2):  # a second delivery without the redelivered flag
            recorder.record("c1", "deliver", "ok", msg="p1-1", queue="q", redelivered=False)
        recorder.record("c1", "deliver", "ok", msg="zz-9", queue="q", redelivered=False)
    status = RunStatus("t", 99, tmp_path, recorder=recorder)
    status.enter("faults", 20.0)
    status.faults.active["kill-1"] = "kill n1"
    out = io.StringIO()
    console = Console(file=out, width=140, force_terminal=False)
    display = LiveDisplay(console)
    display.attach(status)
    display.close()
    text = out.getvalue()
    assert "phase: faults" in text and "/ 20s" in text and "kill n1" in text
    assert recorder.figures.unflagged_duplicates == 1 and recorder.figures.unexpected == 1
    assert recorder.figures.confirmed == 1 and recorder.figures.delivered == 3


def test_live_display_shows_the_step_under_its_phase_until_the_next_phase(
        tmp_path: Path) -> None:
    with HistoryWriter(tmp_path / "h.jsonl", run_id="r", scenario="t", seed=1,
                       config={"nodes": ["n1"], "partition_handling": "ignore"}) as writer:
        status = RunStatus("t", 99, tmp_path, recorder=Recorder(writer))
    status.enter("starting cluster")
    status.report("building node image mirrorchaos-node:abc from mirrorchaos-base:def ...")
    console = Console(width=60, force_terminal=False)
    display = LiveDisplay(console)
    display.attach(status)
    display.close()

    def shown() -> list[str]:
        with console.capture() as capture:
            console.print(display.render())
        return [line.strip() for line in capture.get().splitlines()]

    lines = shown()
    assert lines[0].startswith("t seed 99  phase: starting cluster")
    # one line, cut to the terminal's width
    assert re.fullmatch(r"\d+\.\ds building node image mirrorchaos-node:abc from mi.*…",
                        lines[1]), lines
    status.enter("setting up")
    after = shown()
    assert after[0].startswith("t seed 99  phase: setting up") and len(after) == len(lines) - 1
    assert not [line for line in after if "building" in line]


async def test_a_drain_tells_how_many_messages_it_took_so_far(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_status, "DRAIN_REPORT_SECONDS", 0.01)
    with HistoryWriter(tmp_path / "h.jsonl", run_id="r", scenario="t", seed=1,
                       config={"nodes": ["n1"], "partition_handling": "ignore"}) as writer:
        recorder = Recorder(writer)
        for i in (1, 2, 3):
            recorder.record("p1", "publish", "invoke", msg=f"p1-{i}", queue="q")
        recorder.record("c1", "deliver", "ok", msg="p1-1", queue="q",  # before the drain
                        redelivered=False)
        status = RunStatus("t", 1, tmp_path, recorder=recorder)
        told: list[str] = []
        status.on_step = told.append
        async with run_status.reporting_drained(status, recorder):
            for i in (2, 3):
                recorder.record("drain", "get", "ok", msg=f"p1-{i}", queue="q", mode="ack",
                                redelivered=False)
            while not told:
                await asyncio.sleep(0.01)
        told_at_end = len(told)
        await asyncio.sleep(0.05)
    assert told[0] == "messages drained so far: 2"
    assert len(told) == told_at_end  # nothing more once the drain is over
