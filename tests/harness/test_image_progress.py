"""The node image's build tells each step as it starts and ends, with what it made, and
a cached image as found: against a stand-in engine and a stand-in mmdebstrap, so no
Docker engine, network or minutes are needed."""

from __future__ import annotations

import fcntl
import os
import re
import threading
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import docker.errors
import pytest

from harness.runtime import image

# Writes its last argument (the tarball) and says a stage, as the real one does.
MMDEBSTRAP = """#!/bin/sh
echo "I: downloading packages with apt..." >&2
for last; do :; done
head -c 2000000 /dev/zero > "$last"
exit "${MMDEBSTRAP_EXIT:-0}"
"""
IMAGE_BYTES = 150_000_000


class Engine:
    """The parts of a Docker client the image builder uses; images appear when built."""

    def __init__(self) -> None:
        self.tags: set[str] = set()
        self.images = self
        self.api = self

    def get(self, tag: str) -> Any:
        if tag not in self.tags:
            raise docker.errors.ImageNotFound(tag)
        return SimpleNamespace(attrs={"Size": IMAGE_BYTES})

    def import_image(self, *, src: Any, repository: str, tag: str) -> None:
        self.tags.add(f"{repository}:{tag}")

    def build(self, *, tag: str, **_options: Any) -> None:
        self.tags.add(tag)


def fake_wheels(scratch: Path, _pins: list[str]) -> Path:
    wheels = scratch / "wheels"
    wheels.mkdir()
    for name in ("mirrorchaos-0-py3-none-any.whl", "pika-1-py3-none-any.whl"):
        with zipfile.ZipFile(wheels / name, "w") as wheel:
            wheel.writestr("module.py", name)
    return wheels


@pytest.fixture
def engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Engine:
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "mmdebstrap").write_text(MMDEBSTRAP)
    (tools / "mmdebstrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    monkeypatch.setattr(image, "_build_wheels", fake_wheels)
    # The build lock in a directory of the test's own: a real build elsewhere must not
    # hold this test up.
    monkeypatch.setattr(image, "BUILD_LOCK", tmp_path / "build" / "mirrorchaos-image.lock")
    return Engine()


def test_a_first_build_tells_each_step_as_it_starts_and_ends_with_what_it_made(
        engine: Engine) -> None:
    steps: list[str] = []
    made = image.node_image(engine, progress=steps.append)
    rootfs = "building the base root file system with mmdebstrap (Debian bookworm, "
    imported = f"docker import of the root file system as {made.base}"
    wheels = "building wheels of the project and its dependencies"
    node = f"building node image {made.tag} from {made.base}"
    patterns = [
        re.escape(rootfs) + r".* \.\.\.",
        re.escape("mmdebstrap: I: downloading packages with apt..."),
        re.escape(rootfs) + r".*: done in \d+ s \(root fs tarball 2\.0 MB\)",
        re.escape(f"{imported} ..."),
        re.escape(imported) + r": done in \d+ s \(image 150\.0 MB\)",
        re.escape(f"{wheels} ..."),
        re.escape(wheels) + r": done in \d+ s \(2 wheels, 0\.0 MB\)",
        re.escape(f"{node} ..."),
        re.escape(node) + r": done in \d+ s \(image 150\.0 MB\)",
    ]
    assert len(steps) == len(patterns), steps
    for step, pattern in zip(steps, patterns, strict=True):
        assert re.fullmatch(pattern, step), (step, pattern)


def test_cached_images_are_told_as_found_and_not_built_again(engine: Engine) -> None:
    made = image.node_image(engine, progress=lambda _: None)
    steps: list[str] = []
    assert image.node_image(engine, progress=steps.append) == made
    assert steps == [f"found cached image {made.base}", f"found cached image {made.tag}"], \
        "nothing is built for a cached image, not even the wheels"


def test_a_failed_mmdebstrap_is_an_error_with_its_last_lines(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MMDEBSTRAP_EXIT", "3")
    with pytest.raises(image.ImageBuildError, match=r"(?s)mmdebstrap failed \(exit 3\).*"
                                                    r"I: downloading packages with apt"):
        image.node_image(engine, progress=lambda _: None)


def test_a_build_waiting_for_another_process_says_so(engine: Engine) -> None:
    lock = image.BUILD_LOCK
    lock.parent.mkdir()
    told = threading.Event()
    steps: list[str] = []

    def tell(step: str) -> None:
        steps.append(step)
        told.set()

    def build() -> None:
        with image._one_build_at_a_time(tell):
            steps.append("built")

    with lock.open("a") as other:  # another open file: its lock excludes ours
        fcntl.flock(other, fcntl.LOCK_EX)
        builder = threading.Thread(target=build)
        builder.start()
        assert told.wait(30)
        assert steps == [f"waiting for another process's build of the node image ({lock})"]
        fcntl.flock(other, fcntl.LOCK_UN)
    builder.join(30)
    assert steps[-1] == "built"
