"""The broker node's container image, built offline (SPEC §1).

Base image: a Debian root file system made by ``mmdebstrap`` from the host's own apt
sources and loaded with ``docker import``; where a registry exists, any base with
python3 and venv (e.g. ``python:3.11-slim``) can be named instead. Node image: the
project and its dependencies as wheels built on the host, installed with pip from
those files only, so the build needs no network. Both are tagged by a hash of what
went into them and are never rebuilt while an image with that tag exists.

A first build takes minutes, so each step is told to a ``progress`` callback as it
starts and as it ends, with its duration and the size of what it made (and
mmdebstrap's stages as it reaches them); a cached image is told as found.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
from docker.client import DockerClient

SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "ca-certificates", "procps", "iproute2")
BASE_REPOSITORY = "mirrorchaos-base"
NODE_REPOSITORY = "mirrorchaos-node"
PROJECT_ROOT = Path(__file__).resolve().parent.parent

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


def _run(step: str, command: list[str],
         echo: Callable[[str], None] | None = None) -> None:
    """Run ``command``; ``echo`` is told each line it prints as it comes (mmdebstrap's
    stages, minutes of them), and a failure ends with the last lines."""
    tail: deque[str] = deque(maxlen=20)
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL, text=True) as process:
        assert process.stdout is not None
        for line in process.stdout:
            tail.append(line.rstrip())
            if echo is not None and line.strip():
                echo(f"{step}: {line.strip()}")
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
    """The mmdebstrap base image, built once per suite and package list."""
    recipe = f"{SUITE} {' '.join(BASE_PACKAGES)}".encode()
    tag = f"{BASE_REPOSITORY}:{hashlib.sha256(recipe).hexdigest()[:16]}"
    if _exists(client, tag):
        progress(f"found cached image {tag}")
        return tag
    if shutil.which("mmdebstrap") is None:
        raise ImageBuildError(
            "mmdebstrap is not installed: `apt-get install mmdebstrap`, or pass a base "
            "image that has python3 and python3-venv (e.g. python:3.11-slim)"
        )
    with tempfile.TemporaryDirectory(prefix="mirrorchaos-rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs.tar"
        step = _Step(progress, f"building the base root file system with mmdebstrap "
                               f"(Debian {SUITE}, {' '.join(BASE_PACKAGES)}; a minute or more)")
        _run("mmdebstrap", ["mmdebstrap", "--variant=apt",
                            f"--include={','.join(BASE_PACKAGES)}", SUITE, str(rootfs)],
             echo=progress)
        step.done(f"root fs tarball {_megabytes(rootfs.stat().st_size)}")
        step = _Step(progress, f"docker import of the root file system as {tag}")
        repository, _, version = tag.partition(":")
        with rootfs.open("rb") as source:
            client.api.import_image(src=source, repository=repository, tag=version)
    if not _exists(client, tag):
        raise ImageBuildError(f"docker import of the root file system did not create {tag}")
    step.done(f"image {_image_size(client, tag)}")
    return tag


def _build_wheels(directory: Path) -> None:
    _run("building wheels", [sys.executable, "-m", "pip", "wheel", "--quiet",
                             str(PROJECT_ROOT), "--wheel-dir", str(directory)])


def _context_hash(directory: Path, base: str) -> str:
    """Hash what the wheels contain, not their zip bytes: a freshly built wheel of
    unchanged sources differs in its timestamps and must not force a rebuild."""
    digest = hashlib.sha256(f"{base}\n{NODE_DOCKERFILE}".encode())
    for wheel in sorted(directory.iterdir()):
        digest.update(wheel.name.encode())
        with zipfile.ZipFile(wheel) as archive:
            for member in sorted(archive.namelist()):
                digest.update(member.encode())
                digest.update(hashlib.sha256(archive.read(member)).digest())
    return digest.hexdigest()[:16]


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
    lock = PROJECT_ROOT / "build" / "mirrorchaos-image.lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another process's build of the node image ({lock})")
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
    with tempfile.TemporaryDirectory(prefix="mirrorchaos-wheels-") as scratch:
        wheels = Path(scratch)
        # Every time, cached image or not: the image's tag is the hash of the wheels.
        step = _Step(progress, "building wheels of the project and its dependencies")
        _build_wheels(wheels)
        made = list(wheels.iterdir())
        step.done(f"{len(made)} wheels, {_megabytes(sum(w.stat().st_size for w in made))}")
        tag = f"{NODE_REPOSITORY}:{_context_hash(wheels, base)}"
        if _exists(client, tag):
            progress(f"found cached image {tag}")
            return NodeImage(tag, base)
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
