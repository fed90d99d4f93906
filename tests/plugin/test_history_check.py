"""The ``history`` fixture fails a test whose recorded history the checker finds
invalid: here a confirmed message the drain never finds (lost). The losing test runs
in a pytest of its own, which loads the plugin from its entry point."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LOSING_TEST = '''
import pytest

@pytest.mark.mq_cluster(nodes=1)
def test_loses_a_confirmed_message(mq_cluster, history):
    history.record("p1", "publish", "invoke", msg="p1-1", queue="q", node="n1")
    history.record("p1", "confirm", "ok", msg="p1-1", queue="q", node="n1")
    history.record("harness", "drain", "invoke", queue="q")
    history.record("g1", "get", "ok", msg=None, queue="q", node="n1")
    history.record("harness", "drain", "ok", queue="q")
'''


def test_an_invalid_history_fails_the_test(tmp_path: Path) -> None:
    (tmp_path / "test_losing.py").write_text(LOSING_TEST)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
         str(tmp_path), "-c", "/dev/null", str(tmp_path / "test_losing.py")],
        capture_output=True, text=True, timeout=90, cwd=tmp_path, check=False)
    out = done.stdout
    assert done.returncode == 1, out
    assert "1 passed, 1 error" in out
    assert "the checker found the history invalid: lost: 1 (p1-1)" in out
