"""CI and developer sessions. `./dev` is the front door that installs nox itself."""

from __future__ import annotations

import subprocess

import nox

nox.options.reuse_existing_virtualenvs = True
nox.options.sessions = ["lint", "typecheck", "tests"]

SOURCES = ["cluster", "faults", "harness", "reports", "tests", "noxfile.py"]


@nox.session
def tests(session: nox.Session) -> None:
    """The default test suite (slow campaigns are kept out by the `slow` marker)."""
    session.install("-e", ".[test]")
    session.run("pytest", *(session.posargs or ["-q"]))


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.6")
    session.run("ruff", "check", *SOURCES)


@nox.session
def typecheck(session: nox.Session) -> None:
    session.install("-e", ".[test]", "mypy>=1.10")
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
