"""Finding a toxiproxy: TOXIPROXY_URL first, then toxiproxy-server on PATH (started
with toxiproxy's own flags), then the project's server; a handle stops only what it
started."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import psutil
import pytest

from faults.client import (
    ToxiproxyClient,
    ToxiproxyStartError,
    ToxiproxyUnavailable,
    find_toxiproxy,
)
from faults.toxiproxy import VERSION
from tests.faults.toxiproxy_support import ServerThread

# Stands in for the Go binary: records its arguments, then serves the project's server
# with the host, port and seed it was given (toxiproxy-server's -host/-port/-seed).
FAKE_BINARY = f"""#!{sys.executable}
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
Path(__file__).with_name("argv.json").write_text(json.dumps(args))
flags = dict(zip(args[::2], args[1::2]))
os.execv(sys.executable, [sys.executable, "-m", "faults.toxiproxy",
         "--host", flags["-host"], "--port", flags["-port"], "--seed", flags["-seed"]])
"""


def install(directory: Path, script: str) -> Path:
    directory.mkdir(exist_ok=True)
    binary = directory / "toxiproxy-server"
    binary.write_text(script)
    binary.chmod(0o755)
    return binary


def test_toxiproxy_url_wins_and_is_left_running(threaded: ServerThread, tmp_path: Path) -> None:
    install(tmp_path / "bin", FAKE_BINARY)
    environ = {"TOXIPROXY_URL": threaded.server.url, "PATH": str(tmp_path / "bin")}
    handle = find_toxiproxy(1, environ=environ)
    assert (handle.source, handle.url, handle.process) == ("env", threaded.server.url, None)
    handle.stop()
    assert handle.client().version() == VERSION
    assert not (tmp_path / "bin" / "argv.json").exists()  # the binary was never run


def test_a_toxiproxy_url_that_does_not_answer_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ToxiproxyUnavailable) as caught:
        find_toxiproxy(1, environ={"TOXIPROXY_URL": "http://127.0.0.1:1"})
    assert caught.value.call == "TOXIPROXY_URL=http://127.0.0.1:1"


def test_a_toxiproxy_server_on_path_is_started_with_its_flags(tmp_path: Path) -> None:
    install(tmp_path / "bin", FAKE_BINARY)
    with find_toxiproxy(42, environ={"PATH": str(tmp_path / "bin")}) as handle:
        assert handle.source == "path" and handle.process is not None
        args = json.loads((tmp_path / "bin" / "argv.json").read_text())
        flags = dict(zip(args[::2], args[1::2], strict=True))
        assert flags["-host"] == "127.0.0.1" and flags["-seed"] == "42"
        assert handle.url == f"http://127.0.0.1:{flags['-port']}"
        assert handle.client().version() == VERSION
        pid = handle.process.pid
    assert not psutil.pid_exists(pid)


def test_without_either_our_own_server_is_started_and_stopped(tmp_path: Path) -> None:
    handle = find_toxiproxy(7, environ={"PATH": str(tmp_path)})
    try:
        assert handle.source == "builtin" and handle.process is not None
        client = ToxiproxyClient(handle.url)
        assert client.version() == VERSION
        assert handle.log_path is not None and "seed=7" in handle.log_path.read_text()
    finally:
        handle.stop()
    assert handle.process.poll() is not None
    assert not handle.log_path.exists()  # a log we chose is ours to remove


def test_a_server_that_dies_at_start_is_reported_with_its_output(tmp_path: Path) -> None:
    install(tmp_path / "bin", "#!/bin/sh\necho 'bind: permission denied'\nexit 3\n")
    with pytest.raises(ToxiproxyStartError, match=r"(?s)code 3.*permission denied"):
        find_toxiproxy(1, environ={"PATH": str(tmp_path / "bin")})
