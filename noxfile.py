"""CI and developer sessions. `./dev` is the front door that installs nox itself."""

from __future__ import annotations

import subprocess

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "typecheck", "tests"]

SOURCES = ["cluster", "faults", "harness", "reports", "tests", "noxfile.py"]


@nox.session
def tests(session: nox.Session) -> None:
    """The default test suite (slow campaigns are kept out by the `slow` marker); the
    soak extra brings PySpark for the Spark merge's tests."""
    session.install("-e", ".[test,soak]")
    session.run("pytest", *(session.posargs or ["-q"]))


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


@nox.session
def bench(session: nox.Session) -> None:
    """`mirrorchaos bench` against the URLs given after `--`."""
    session.install("-e", ".")
    session.run("mirrorchaos", "bench", *session.posargs)


# The CI campaign set: each built-in scenario with the exit code its design predicts on
# the process runtime (0: valid).
CHAOS_CAMPAIGNS = (("smoke", 0), ("confirms-survive-kill", 0), ("consume-survives-kill", 0))


@nox.session
def chaos(session: nox.Session) -> None:
    """Short campaigns for CI on local node processes; each must end with the verdict
    the design predicts. Not a default session (minutes, real clusters)."""
    session.install("-e", ".")
    store = session.create_tmp() + "/store"
    for scenario, expected in CHAOS_CAMPAIGNS:
        session.run("mirrorchaos", "run", scenario, "--runtime", "process", "--time-limit",
                    "20", "--seed", "7", "--store", store, "--no-live",
                    success_codes=[expected])


@nox.session
def soak(session: nox.Session) -> None:
    """A small Spark soak: 8 runs of `mixed` and one on deliberately broken nodes
    (`examples/broken-redelivery.toml`), on local[2], merged into one campaign report
    (needs Java 17); the broken run must be listed failing with its replay command.
    Arguments after `--` replace the defaults. Invalid runs (exit 1) are findings the
    report lists with their replay commands; a run that timed out, crashed or ended
    unknown (2) fails the session."""
    session.install("-e", ".[soak]")
    session.run("mirrorchaos", "soak", *(session.posargs or [
        "--scenario", "mixed:8", "--scenario", "examples/broken-redelivery.toml:1",
        "--duration", "30", "--spark-master", "local[2]", "--runtime", "process"]),
        success_codes=[1] if not session.posargs else [0, 1])
