"""The broker node's container image, built offline (SPEC §1).

Base image: a Debian root file system made by ``mmdebstrap`` from the host's own apt
sources and loaded with ``docker import``; where a registry exists, any base with
python3 and venv (e.g. ``python:3.11-slim``) can be named instead. Node image: the
project and its dependencies as wheels built on the host, installed with pip from
those files only, so the build needs no network. Both are tagged by a hash of what
went into them and are never rebuilt while an image with that tag exists.
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
import zipfile
from collections.abc import Iterator
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


def _run(step: str, command: list[str], cwd: Path | None = None) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
        raise ImageBuildError(f"{step} failed (exit {done.returncode}): {' '.join(command)}\n"
                              f"{tail}")


def _exists(client: DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def base_image(client: DockerClient) -> str:
    """The mmdebstrap base image, built once per suite and package list."""
    recipe = f"{SUITE} {' '.join(BASE_PACKAGES)}".encode()
    tag = f"{BASE_REPOSITORY}:{hashlib.sha256(recipe).hexdigest()[:16]}"
    if _exists(client, tag):
        return tag
    if shutil.which("mmdebstrap") is None:
        raise ImageBuildError(
            "mmdebstrap is not installed: `apt-get install mmdebstrap`, or pass a base "
            "image that has python3 and python3-venv (e.g. python:3.11-slim)"
        )
    with tempfile.TemporaryDirectory(prefix="mirrorchaos-rootfs-") as scratch:
        rootfs = Path(scratch) / "rootfs.tar"
        _run("mmdebstrap", ["mmdebstrap", "--variant=apt",
                            f"--include={','.join(BASE_PACKAGES)}", SUITE, str(rootfs)])
        repository, _, version = tag.partition(":")
        with rootfs.open("rb") as source:
            client.api.import_image(src=source, repository=repository, tag=version)
    if not _exists(client, tag):
        raise ImageBuildError(f"docker import of the root file system did not create {tag}")
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
def _one_build_at_a_time() -> Iterator[None]:
    """Builds of this project's image take turns across processes (campaigns side by
    side, test workers): pip builds the wheel in the project's build/ directory, which
    two builds at once tear apart; the second then finds the first one's image."""
    lock = PROJECT_ROOT / "build" / "mirrorchaos-image.lock"
    lock.parent.mkdir(exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def node_image(client: DockerClient, base: str | None = None) -> NodeImage:
    """The node image for the project as it is on disk now; ``base`` defaults to the
    mmdebstrap image."""
    with _one_build_at_a_time():
        return _node_image(client, base)


def _node_image(client: DockerClient, base: str | None) -> NodeImage:
    base = base or base_image(client)
    with tempfile.TemporaryDirectory(prefix="mirrorchaos-wheels-") as scratch:
        wheels = Path(scratch)
        _build_wheels(wheels)
        tag = f"{NODE_REPOSITORY}:{_context_hash(wheels, base)}"
        if _exists(client, tag):
            return NodeImage(tag, base)
        try:
            client.images.build(fileobj=_context_tar(wheels), custom_context=True, tag=tag,
                                buildargs={"BASE": base}, rm=True, forcerm=True)
        except docker.errors.BuildError as error:
            log = "".join(str(chunk.get("stream", chunk.get("error", "")))
                          for chunk in error.build_log)
            raise ImageBuildError(f"building {tag} from {base} failed: {error.msg}\n"
                                  f"{log[-2000:]}") from error
    return NodeImage(tag, base)


def connect() -> DockerClient:
    """A client for the local Docker engine, or a clear error when none answers."""
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as error:
        raise ImageBuildError(f"no Docker engine answers: {error}") from error
    return client
