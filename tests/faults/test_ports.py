"""Ports for the servers a run starts: outside the ephemeral range, free, never twice."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from faults import ports


@pytest.fixture(autouse=True)
def own_reservations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A reservations directory of this test's own: a port another test worker (or a
    campaign) holds would otherwise be skipped where the test expects it handed out."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_ports_come_from_below_the_ephemeral_range_and_bind() -> None:
    handed = {ports.free_port() for _ in range(50)}
    assert len(handed) == 50
    assert all(ports.LOWEST <= port < ports.ephemeral_low() for port in handed)
    for port in handed:
        assert ports.binds("127.0.0.1", port)


class Scripted:
    """Stands in for the random stream so the test knows which ports are tried."""

    def __init__(self, choices: list[int]) -> None:
        self.choices = choices

    def randrange(self, low: int, high: int) -> int:
        return self.choices.pop(0)


def test_a_port_in_use_or_already_handed_out_is_skipped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        given = ports.free_port()
        spare = next(p for p in range(ports.LOWEST, ports.ephemeral_low())
                     if p not in ports._handed_out and ports.binds("127.0.0.1", p))
        monkeypatch.setattr(ports, "_random", Scripted([taken, given, spare]))
        assert ports.free_port() == spare


def test_a_port_another_process_handed_out_is_skipped(
    monkeypatch: pytest.MonkeyPatch, own_reservations: Path,
) -> None:
    """Two campaigns side by side: a port the other process handed out, though nothing
    is bound to it yet, is not handed out here while that process lives."""
    other = subprocess.Popen(
        [sys.executable, "-c", "import sys; from faults import ports; "
         "print(ports.free_port(), flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "TMPDIR": str(own_reservations)})
    try:
        assert other.stdout is not None
        theirs = int(other.stdout.readline())
        spare = next(p for p in range(ports.LOWEST, ports.ephemeral_low())
                     if p != theirs and p not in ports._handed_out
                     and ports.binds("127.0.0.1", p))
        monkeypatch.setattr(ports, "_random", Scripted([theirs, spare]))
        assert ports.free_port() == spare
    finally:
        other.communicate("")
    # The other process is gone: its lock too. (Asked of the lock itself: through
    # free_port, a test worker binding that port meanwhile would fail this.)
    assert ports._reserve(theirs)


def test_no_free_port_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    given = ports.free_port()
    monkeypatch.setattr(ports, "_random", Scripted([given] * ports.TRIES))
    with pytest.raises(OSError, match=r"no free port on 127\.0\.0\.1 between 20000 and"):
        ports.free_port()


@pytest.mark.parametrize(("text", "low"), [("40000\t60999\n", 40000), ("", 32768),
                                           ("garbage", 32768)])
def test_the_ephemeral_range_is_read_from_the_kernel(tmp_path: Path, text: str,
                                                     low: int) -> None:
    path = tmp_path / "ip_local_port_range"
    path.write_text(text)
    assert ports.ephemeral_low(path) == low
    assert ports.ephemeral_low(tmp_path / "missing") == 32768
