"""The node image's tag is known before anything is built: a hash of the project's files
(their bytes, not their times), the base and the dependencies' versions."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness.runtime import image


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the project's pyproject.toml and packages, as the image's source."""
    shutil.copy(image.PROJECT_ROOT / "pyproject.toml", tmp_path)
    for package in ("cluster", "faults", "harness", "reports"):
        shutil.copytree(image.PROJECT_ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(image, "PROJECT_ROOT", tmp_path)
    return tmp_path


def test_the_tag_follows_the_sources_the_base_and_the_dependencies(project: Path) -> None:
    pins = image._dependency_pins()
    assert any(pin.startswith("pika==") for pin in pins)
    tag = image._node_tag("base:1", pins)
    assert tag.startswith(f"{image.NODE_REPOSITORY}:")
    source = project / "harness" / "commands.py"
    original = source.read_bytes()
    source.write_bytes(original + b"\n# changed\n")
    assert image._node_tag("base:1", pins) != tag
    source.write_bytes(original)
    os.utime(source, (0, 0))  # the same bytes at another time
    assert image._node_tag("base:1", pins) == tag
    (project / "faults" / "new_module.py").write_text("")
    assert image._node_tag("base:1", pins) != tag
    (project / "faults" / "new_module.py").unlink()
    assert image._node_tag("base:2", pins) != tag
    other_pika = ["pika==0.0.1" if pin.startswith("pika==") else pin for pin in pins]
    assert image._node_tag("base:1", other_pika) != tag
    (project / "README.md").write_text("not in the wheel's code")
    assert image._node_tag("base:1", pins) == tag
