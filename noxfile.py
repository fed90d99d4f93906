"""CI and developer sessions. `./dev` is the front door that installs nox itself."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "typecheck", "tests"]

SOURCES = ["cluster", "faults", "harness", "reports", "tests", "noxfile.py"]


@nox.session
def tests(session: nox.Session) -> None:
    """The default test suite on four workers: most tests wait on sockets and
    processes, so four overlap well even on two cores, and on a machine busy with other
    work they keep their share of it. The long parts are left out by their
    markers and have sessions of their own: `slow`, `docker-tests`, `spark-tests`,
    `campaign-tests`, `soak-cluster`."""
    session.install("-e", ".[test]")
    session.run("pytest", *(session.posargs or ["-q", "-n", "4"]))


@nox.session(name="docker-tests")
def docker_tests(session: nox.Session) -> None:
    """Tests on Docker containers and the node image, which the first of them builds
    offline (an mmdebstrap root file system: minutes on a fresh machine)."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "docker", *(session.posargs or ["-q"]))


@nox.session(name="spark-tests")
def spark_tests(session: nox.Session) -> None:
    """The tests that start a Spark session (needs Java 17): the merge, a campaign and
    a shrink's replays on local[2]."""
    session.install("-e", ".[test,soak]")
    session.run("pytest", "-m", "spark", *(session.posargs or ["-q"]))


@nox.session(name="campaign-tests")
def campaign_tests(session: nox.Session) -> None:
    """Whole scenario runs on local processes: a planted bug caught where the correct
    broker passes, drains by promotion, a kill of a mirrored master, a failing run
    shrunk."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "campaign", *(session.posargs or ["-q", "-n", "2"]))


# The property tests: the default run draws a share of their examples (tests/examples.py).
PROPERTY_TESTS = ["tests/gm/test_ring_stateful.py", "tests/store/test_stateful.py",
                  "tests/core/test_queue_model.py", "tests/checker/test_property.py",
                  "tests/meta/test_meta_replica.py", "tests/ha/test_ha_simulated.py",
                  "tests/node/test_robustness.py"]


@nox.session
def thorough(session: nox.Session) -> None:
    """The property tests with every example they name, not the default run's share."""
    session.install("-e", ".[test]")
    session.run("pytest", *(session.posargs or ["-q", "-n", "2", *PROPERTY_TESTS]),
                env={"MIRRORCHAOS_EXAMPLES": "all"})


@nox.session
def slow(session: nox.Session) -> None:
    """The slow set: every built-in scenario at twice its time limit, long campaigns
    (an hour or more on two cores)."""
    session.install("-e", ".[test,soak]")
    session.run("pytest", "-m", "slow", *(session.posargs or ["-q"]))


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", *SOURCES)


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[test,soak]", "mypy>=1.10")
    session.run("mypy")


@nox.session
def demo(session: nox.Session) -> None:
    """The main job: a fault campaign on a three-node cluster in containers (local
    processes where no Docker engine answers), ending with its report."""
    session.install("-e", ".")
    runtime = "docker" if _docker_answers() else "process"
    if runtime == "process":
        session.log("no Docker engine answers: running the campaign on local processes")
    # A verdict either way is the demo doing its job (1: the broker broke a promise, and
    # the report says which); unknown (2) or a harness failure (255) is not.
    session.run("mirrorchaos", "run", "confirms-survive-kill", "--runtime", runtime,
                "--time-limit", "30", *session.posargs, success_codes=[0, 1])


def _docker_answers() -> bool:
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


# The scenarios `./dev -s rabbitmq` runs on both brokers.
RABBITMQ_SCENARIOS = ("smoke", "confirms-survive-kill", "consume-survives-kill",
                      "promote-on-failure-when-synced", "partition-isolate-master",
                      "partition-halves")


@nox.session
def rabbitmq(session: nox.Session) -> None:
    """Real RabbitMQ 3.10 as a second target (needs Docker; its image is built offline
    on first use): the rabbitmq tests, then `mirrorchaos compare` of RABBITMQ_SCENARIOS
    on our broker and on RabbitMQ with one seed, in containers, ending with the table
    side by side. Fails when a run has no verdict or our broker's is not valid;
    RabbitMQ's verdicts are findings, listed with their reasons. Arguments after `--`
    go to `mirrorchaos compare` (e.g. `--seed 2`)."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "rabbitmq", "-q", "tests/runtime/test_rabbitmq_runtime.py")
    store = Path(session.create_tmp()) / "store"
    session.run("mirrorchaos", "compare", *RABBITMQ_SCENARIOS, "--seed", "1",
                "--runtime", "docker", "--store", str(store), *session.posargs)
    doc = json.loads((store / "compare/latest/compare.json").read_text(encoding="utf-8"))
    ours = [f"{row['scenario']}: {row['runs']['mirrorchaos']['verdict']}"
            for row in doc["rows"] if row["runs"]["mirrorchaos"]["valid"] is not True]
    if ours:
        session.error("our broker is not valid in: " + "; ".join(ours))


@nox.session
def bench(session: nox.Session) -> None:
    """`mirrorchaos bench` against the URLs given after `--`."""
    session.install("-e", ".")
    session.run("mirrorchaos", "bench", *session.posargs)


@nox.session
def chaos(session: nox.Session) -> None:
    """The CI campaign (`mirrorchaos power`'s scenarios and seeds) on the correct broker,
    on local node processes: every run must be valid. Not a default session (minutes,
    real clusters)."""
    session.install("-e", ".")
    session.run("mirrorchaos", "power", "--no-bugs", "--jobs", "3",
                "--store", session.create_tmp() + "/store", *session.posargs)


@nox.session
def power(session: nox.Session) -> None:
    """The CI campaign against the correct broker and every planted bug
    (docs/planted-bugs.md): the detection matrix; fails when a bug is missed on a seed or
    the correct broker is not valid. Arguments after `--` go to `mirrorchaos power`."""
    session.install("-e", ".")
    session.run("mirrorchaos", "power", "--store", "store", *session.posargs)


# The soak session's campaign: 8 runs of `mixed` and one of a scenario whose nodes drop
# the redelivered flag on purpose, which must come out invalid and listed to replay.
SOAK_BROKEN = "examples/broken-redelivery.toml"
SOAK_CAMPAIGN = ("--scenario", "mixed:8", "--scenario", f"{SOAK_BROKEN}:1", "--duration", "30",
                 "--spark-master", "local[2]", "--runtime", "process")


@nox.session
def soak(session: nox.Session) -> None:
    """A small Spark soak on local[2] (needs Java 17): 8 runs of `mixed` and one on
    deliberately broken nodes (`examples/broken-redelivery.toml`), merged into one
    campaign report. The session checks the report: every run finished with a verdict,
    and the broken run is invalid and listed failing with its seed and replay command;
    then it runs that command, which must give invalid with the same violation kinds.
    Invalid `mixed` runs are findings the report lists with their replay commands.
    Arguments after `--` replace the campaign (exit 0 or 1 passes; nothing is checked)."""
    session.install("-e", ".[soak]")
    if session.posargs:
        session.run("mirrorchaos", "soak", *session.posargs, success_codes=[0, 1])
        return
    session.run("mirrorchaos", "soak", *SOAK_CAMPAIGN, "--store", "store",
                success_codes=[1])
    report = json.loads(Path("store/soak/latest/report.json").read_text(encoding="utf-8"))
    unfinished = [f"seed {r['seed']}: {r['status']}, {r['verdict']}" for r in report["runs"]
                  if r["status"] != "done" or r["verdict"] == "unknown"]
    if unfinished:
        session.error("runs without a verdict: " + "; ".join(unfinished))
    broken = [r for r in report["failing"] if r["scenario"] == Path(SOAK_BROKEN).stem]
    if len(broken) != 1 or broken[0]["verdict"] != "invalid" or (
            f"--seed {broken[0]['seed']} " not in broken[0]["replay"]):
        session.error(f"the broken run is not listed failing as invalid: {report['failing']}")
    run = broken[0]
    session.log(f"broken run seed {run['seed']} listed failing; replaying it: {run['replay']}")
    session.run(*shlex.split(run["replay"]), success_codes=[1])
    replayed = _violation_kinds(Path("store/latest/results.json"))
    original = _violation_kinds(Path(run["run_dir"]) / "results.json")
    if replayed != original:
        session.error(f"the replay found {replayed}, the campaign's run {original}")
    session.log(f"the replay is invalid too, with the same violations: {sorted(replayed)}")


# The soak-cluster session's campaign: short runs of `smoke` (no faults: each must be
# valid), enough that both workers take several.
SOAK_CLUSTER_RUNS = 16
SOAK_CLUSTER_CAMPAIGN = ("--scenario", f"smoke:{SOAK_CLUSTER_RUNS}", "--duration", "10",
                         "--seed", "2024")


@nox.session(name="soak-cluster")
def soak_cluster(session: nox.Session) -> None:
    """Soaks on a Spark standalone cluster started from the installed PySpark (needs
    Java 17): a master and two workers of one core each, every worker with directories
    of its own and none shared with the driver's store (`reports/soak/standalone.py`).
    16 runs of `smoke`; the session checks that every run has a verdict, that the runs
    went to both workers, and that the stopped cluster left nothing running. Then the
    cluster tests (marker `soak_cluster`): a worker, or an executor, killed mid-campaign
    loses no run. About ten minutes on two cores. Arguments after `--` go to that
    pytest."""
    session.install("-e", ".[test,soak]")
    tmp = Path(session.create_tmp())
    root, store = tmp / "standalone", tmp / "store"
    shutil.rmtree(root, ignore_errors=True)  # a previous session's logs and directories
    # the module stops the cluster whatever happens, and fails if anything is left
    session.run("python", "-m", "reports.soak.standalone", "--root", str(root), "--",
                "mirrorchaos", "soak", "--spark-master", "{master}", *SOAK_CLUSTER_CAMPAIGN,
                "--store", str(store))
    report = json.loads((store / "soak/latest/report.json").read_text(encoding="utf-8"))
    runs = report["runs"]
    unfinished = [f"seed {r['seed']}: {r['status']}, {r['verdict']}" for r in runs
                  if r["status"] != "done" or r["verdict"] == "unknown"]
    if len(runs) < SOAK_CLUSTER_RUNS or unfinished:
        session.error(f"{len(runs)} runs of {SOAK_CLUSTER_RUNS}; without a verdict: "
                      + "; ".join(unfinished))
    per_worker = Counter(r["worker"] for r in runs)
    if len(per_worker) < 2:
        session.error(f"the runs did not spread over both workers: {dict(per_worker)}")
    session.log(f"{len(runs)} runs, {report['verdicts']}, per worker {dict(per_worker)}")
    session.run("pytest", "-m", "soak_cluster", *(session.posargs or ["-q", "tests/soak"]))


def _violation_kinds(results: Path) -> set[str]:
    doc = json.loads(results.read_text(encoding="utf-8"))
    return {v["kind"] for v in doc["violations"]}
