"""Two processes building the node image's wheels at once (campaigns side by side, test
workers) take turns: pip builds in the project's build/ directory, and two builds at
once there fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.runtime.image import PROJECT_ROOT

# With the image's other tests (the docker-tests session): two wheel builds, a minute.
pytestmark = pytest.mark.docker

BUILD = """
import sys
from pathlib import Path
from harness.runtime.image import _build_wheels, _dependency_pins, _one_build_at_a_time
scratch = Path(sys.argv[1])
scratch.mkdir()
with _one_build_at_a_time(print):
    _build_wheels(scratch, _dependency_pins())
"""


def test_wheel_builds_in_two_processes_at_once_both_succeed(tmp_path: Path) -> None:
    builds = [subprocess.Popen([sys.executable, "-c", BUILD, str(tmp_path / f"w{i}")],
                               cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outputs = [build.communicate(timeout=300)[0] for build in builds]
    assert [build.returncode for build in builds] == [0, 0], outputs
    for i in range(2):
        wheels = tmp_path / f"w{i}" / "wheels"
        assert [p.name.split("-")[0] for p in wheels.glob("mirrorchaos-*.whl")] \
            == ["mirrorchaos"]
