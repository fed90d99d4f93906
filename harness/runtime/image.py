"""The broker node's container image, built offline.

Base image: a Debian root file system made by ``mmdebstrap`` from the host's own apt
sources and loaded with ``docker import``; where a registry exists, any base with
python3 and venv (e.g. ``python:3.11-slim``) can be named instead. Node image: the
project and its dependencies as wheels built on the host, installed with pip from
those files only, so the build needs no network. Both are tagged by a hash of what
goes into them, known before anything is built (the node image's: the project's files
and the versions of its dependencies installed here), and are never built again while
an image with that tag exists: a cached image costs no build, not even of the wheels.

Each build works in a temporary directory of its own (`ledger.make_dir`) with its
commands in a session of their own: an interrupted build ends them and removes the
directory, and what a killed harness's build left is removed by the next harness.

A first build takes minutes, so each step is told to a ``progress`` callback as it
starts and as it ends, with its duration and the size of what it made (and
mmdebstrap's stages as it reaches them); a cached image is told as found.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import importlib.metadata
import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.client import DockerClient
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from . import ledger

SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "procps", "iproute2")
BASE_REPOSITORY = "mirrorchaos-base"
# RabbitMQ 3.10 (Debian bookworm's, on its Erlang 25) for the ``rabbitmq`` target:
# the root file system is the whole image, its nodes' files come in as bind mounts.
RABBITMQ_PACKAGES = ("rabbitmq-server",)
RABBITMQ_REPOSITORY = "mirrorchaos-rabbitmq"
NODE_REPOSITORY = "mirrorchaos-node"
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# pip builds the project's wheel in PROJECT_ROOT/build; builds take turns on this lock.
BUILD_LOCK = PROJECT_ROOT / "build" / "mirrorchaos-image.lock"

NODE_DOCKERFILE = """\
ARG BASE
FROM ${BASE}
COPY wheels /wheels
RUN python3 -m venv /opt/mirrorchaos \\
 && /opt/mirrorchaos/bin/pip install --no-index --find-links /wheels mirrorchaos \\
 && rm -rf /wheels
ENV PATH=/opt/mirrorchaos/bin:$PATH PYTHONUNBUFFERED=1
"""


class ImageBuildError(RuntimeError):
    """An image could not be built; the message says which step failed and why."""


@dataclass(frozen=True)
class NodeImage:
    tag: str
    base: str


class _Step:
    """One step of a build, told as it starts and, with what it made, as it ends."""

    def __init__(self, progress: Callable[[str], None], doing: str) -> None:
        self.progress, self.doing, self.started = progress, doing, time.monotonic()
        progress(f"{doing} ...")

    def done(self, made: str) -> None:
        self.progress(f"{self.doing}: done in {time.monotonic() - self.started:.0f} s "
                      f"({made})")


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


@contextlib.contextmanager
def _scratch(purpose: str) -> Iterator[Path]:
    """A build's temporary directory, owned by this process (`ledger.make_dir`) so that
    the next harness removes it if this one is killed; removed on the way out with
    whatever still works or is mounted in it (`ledger.remove_dir`)."""
    directory = ledger.make_dir(f"mirrorchaos-{purpose}-")
    try:
        yield directory
    finally:
        ledger.remove_dir(directory)


def _run(step: str, command: list[str], scratch: Path,
         echo: Callable[[str], None] | None = None) -> None:
    """Run ``command`` with its temporary files in ``scratch``, the build's directory;
    ``echo`` is told each line it prints as it comes (mmdebstrap's stages, minutes of
    them), and a failure ends with the last lines.

    The command runs in a session of its own, which ends whole (mmdebstrap's apt and
    dpkg, pip's build backends) when the harness is interrupted; after a SIGKILL of the
    harness, the next one finds the session by the file in ``scratch`` its leader names
    (`ledger.remove_dir`). Not PR_SET_PDEATHSIG: that signal reaches the direct child
    only, comes when the starting thread (not process) ends, and needs a preexec_fn,
    which can deadlock a harness that has threads."""
    tail: deque[str] = deque(maxlen=20)
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, text=True, start_new_session=True,
                               env={**os.environ, "TMPDIR": str(scratch)})
    assert process.stdout is not None
    try:
        with process.stdout:
            for line in process.stdout:
                tail.append(line.rstrip())
                if echo is not None and line.strip():
                    echo(f"{step}: {line.strip()}")
    except BaseException:
        ledger.end_session(process.pid)
        raise
    finally:
        process.wait()
    if process.returncode != 0:
        raise ImageBuildError(f"{step} failed (exit {process.returncode}): "
                              f"{' '.join(command)}\n" + "\n".join(tail))


def _exists(client: DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def _image_size(client: DockerClient, tag: str) -> str:
    return _megabytes(int(client.images.get(tag).attrs["Size"]))


def base_image(client: DockerClient, *, progress: Callable[[str], None]) -> str:
    """The mmdebstrap base image of the node image, built once per suite and package list."""
    return rootfs_image(client, BASE_PACKAGES, BASE_REPOSITORY, "base", progress=progress)


def rabbitmq_image(client: DockerClient, *, progress: Callable[[str], None]) -> str:
    """Debian's RabbitMQ in an mmdebstrap root file system, built once (taking turns
    with the node image's builds, as those do)."""
    with _one_build_at_a_time(progress):
        return rootfs_image(client, RABBITMQ_PACKAGES, RABBITMQ_REPOSITORY, "RabbitMQ",
                            progress=progress)


def rootfs_image(client: DockerClient, packages: tuple[str, ...], repository: str, what: str,
                 *, progress: Callable[[str], None]) -> str:
    """A Debian root file system with ``packages`` (``what`` names it to the user), made
    by mmdebstrap and imported, tagged by a hash of the suite and the package list."""
    recipe = f"{SUITE} {' '.join(packages)}".encode()
    tag = f"{repository}:{hashlib.sha256(recipe).hexdigest()[:16]}"
    if _exists(client, tag):
        progress(f"found cached image {tag}")
        return tag
    if shutil.which("mmdebstrap") is None:
        raise ImageBuildError(
            "mmdebstrap is not installed: `apt-get install mmdebstrap`, or pass a base "
            "image that has python3 and python3-venv (e.g. python:3.11-slim)"
        )
    with _scratch("rootfs") as scratch:
        rootfs = scratch / "rootfs.tar"
        step = _Step(progress, f"building the {what} root file system with mmdebstrap "
                               f"(Debian {SUITE}, {' '.join(packages)}; a minute or more)")
        _run("mmdebstrap", ["mmdebstrap", "--variant=apt",
                            f"--include={','.join(packages)}", SUITE, str(rootfs)],
             scratch, echo=progress)
        step.done(f"root fs tarball {_megabytes(rootfs.stat().st_size)}")
        step = _Step(progress, f"docker import of the root file system as {tag}")
        repo, _, version = tag.partition(":")
        with rootfs.open("rb") as source:
            client.api.import_image(src=source, repository=repo, tag=version)
    if not _exists(client, tag):
        raise ImageBuildError(f"docker import of the root file system did not create {tag}")
    step.done(f"image {_image_size(client, tag)}")
    return tag


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _dependency_pins() -> list[str]:
    """``name==version`` for each distribution the project needs (pyproject.toml's
    dependencies, theirs in turn), at the version installed here: the node runs what
    the harness runs, and the image's tag can say so before anything is built."""
    pins: dict[str, str] = {}
    done: set[tuple[str, str]] = set()
    # Each requirement with the extra of the distribution that wants it ("" for none).
    wanted = [(Requirement(text), "") for text in _pyproject()["project"]["dependencies"]]
    while wanted:
        requirement, extra = wanted.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        try:
            found = importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            raise ImageBuildError(
                f"{requirement}, which the node image needs, is not installed in "
                f"{sys.prefix}: install the project there (pip install -e .)") from None
        if not requirement.specifier.contains(found.version, prereleases=True):
            raise ImageBuildError(
                f"the node image needs {requirement}, but {sys.prefix} has "
                f"{found.version}: install the project there again (pip install -e .)")
        name = canonicalize_name(requirement.name)
        pins[name] = f"{name}=={found.version}"
        for asked in ("", *requirement.extras):
            if (name, asked) not in done:
                done.add((name, asked))
                wanted += [(Requirement(text), asked) for text in found.requires or ()]
    return sorted(pins.values())


def _project_files() -> list[Path]:
    """pyproject.toml and every file of the packages it names: what the project's wheel
    is built from."""
    patterns = _pyproject()["tool"]["setuptools"]["packages"]["find"]["include"]
    packages = [path for path in PROJECT_ROOT.iterdir() if path.is_dir()
                and any(fnmatch.fnmatch(path.name, pattern) for pattern in patterns)]
    return [PROJECT_ROOT / "pyproject.toml",
            *sorted(path for package in packages for path in package.rglob("*")
                    if path.is_file() and "__pycache__" not in path.parts)]


def _node_tag(base: str, pins: list[str]) -> str:
    """A hash of what goes into the node image: the base, the Dockerfile, the pinned
    dependencies and the project's files (their bytes, not their times: the same
    sources checked out again find the same image)."""
    digest = hashlib.sha256("\n".join([base, NODE_DOCKERFILE, *pins]).encode())
    for path in _project_files():
        digest.update(f"{path.relative_to(PROJECT_ROOT)}\0".encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return f"{NODE_REPOSITORY}:{digest.hexdigest()[:16]}"


def _build_wheels(scratch: Path, pins: list[str]) -> Path:
    """The project's wheel and one for each pinned dependency, in ``scratch/wheels``."""
    wheels = scratch / "wheels"
    _run("building wheels", [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                             str(PROJECT_ROOT), *pins, "--wheel-dir", str(wheels)], scratch)
    return wheels


def _context_tar(directory: Path) -> io.BytesIO:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        dockerfile = NODE_DOCKERFILE.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
        tar.add(directory, arcname="wheels")
    buffer.seek(0)
    return buffer


@contextlib.contextmanager
def _one_build_at_a_time(progress: Callable[[str], None]) -> Iterator[None]:
    """Builds of this project's image take turns across processes (campaigns side by
    side, test workers): pip builds the wheel in the project's build/ directory, which
    two builds at once tear apart; the second then finds the first one's image. A wait
    is told: the other build may take minutes."""
    BUILD_LOCK.parent.mkdir(exist_ok=True)
    with BUILD_LOCK.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another process's build of the node image ({BUILD_LOCK})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def node_image(client: DockerClient, base: str | None = None, *,
               progress: Callable[[str], None]) -> NodeImage:
    """The node image for the project as it is on disk now; ``base`` defaults to the
    mmdebstrap image."""
    with _one_build_at_a_time(progress):
        return _node_image(client, base, progress)


def _node_image(client: DockerClient, base: str | None,
                progress: Callable[[str], None]) -> NodeImage:
    base = base or base_image(client, progress=progress)
    pins = _dependency_pins()
    tag = _node_tag(base, pins)
    if _exists(client, tag):
        progress(f"found cached image {tag}")
        return NodeImage(tag, base)
    with _scratch("wheels") as scratch:
        step = _Step(progress, "building wheels of the project and its dependencies")
        wheels = _build_wheels(scratch, pins)
        made = list(wheels.iterdir())
        step.done(f"{len(made)} wheels, {_megabytes(sum(w.stat().st_size for w in made))}")
        step = _Step(progress, f"building node image {tag} from {base}")
        try:
            client.images.build(fileobj=_context_tar(wheels), custom_context=True, tag=tag,
                                buildargs={"BASE": base}, rm=True, forcerm=True)
        except docker.errors.BuildError as error:
            log = "".join(str(chunk.get("stream", chunk.get("error", "")))
                          for chunk in error.build_log)
            raise ImageBuildError(f"building {tag} from {base} failed: {error.msg}\n"
                                  f"{log[-2000:]}") from error
    step.done(f"image {_image_size(client, tag)}")
    return NodeImage(tag, base)


def connect() -> DockerClient:
    """A client for the local Docker engine, or a clear error when none answers."""
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as error:
        raise ImageBuildError(f"no Docker engine answers: {error}") from error
    return client
