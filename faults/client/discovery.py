"""Finding a toxiproxy to use, in this order: ``TOXIPROXY_URL``; else a
``toxiproxy-server`` on PATH, started here; else the project's own server, started
here as a subprocess. The handle stops only what it started."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal

from ..ports import free_port
from .api import ToxiproxyClient
from .errors import ToxiproxyError, ToxiproxyUnavailable

Source = Literal["env", "path", "builtin"]

ENV_URL = "TOXIPROXY_URL"
BINARY = "toxiproxy-server"
_BANNER = re.compile(r"toxiproxy \S+ on (http://\S+) seed=")

# From the server's output so far, the URL to try (None: not known yet).
_UrlFinder = Callable[[str], str | None]


class ToxiproxyStartError(RuntimeError):
    """A toxiproxy we started exited or never answered; the message ends with its output."""


@dataclass
class ToxiproxyHandle:
    url: str
    source: Source
    process: subprocess.Popen[bytes] | None = None  # set only when we started it
    log_path: Path | None = None
    _own_log: bool = field(default=False, repr=False)

    def client(self, timeout: float = 5.0) -> ToxiproxyClient:
        return ToxiproxyClient(self.url, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server if this handle started it; a server found through
        ``TOXIPROXY_URL`` belongs to someone else and is left alone."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._own_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> ToxiproxyHandle:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def find_toxiproxy(seed: int, *, environ: Mapping[str, str] | None = None,
                   host: str = "127.0.0.1", startup_timeout: float = 15.0,
                   log_path: Path | None = None) -> ToxiproxyHandle:
    """A toxiproxy whose random choices come from ``seed`` when we start it (a server
    named by ``TOXIPROXY_URL`` runs with whatever seed it was given)."""
    environ = os.environ if environ is None else environ
    url = environ.get(ENV_URL)
    if url:
        try:
            ToxiproxyClient(url).version()
        except ToxiproxyError as exc:
            raise ToxiproxyUnavailable(f"{ENV_URL}={url}", f"does not answer: {exc}") from exc
        return ToxiproxyHandle(url, "env")
    binary = shutil.which(BINARY, path=environ.get("PATH", os.defpath))
    if binary is not None:
        port = free_port(host)
        command = [binary, "-host", host, "-port", str(port), "-seed", str(seed)]
        return _start(command, "path", startup_timeout, log_path,
                      lambda _: f"http://{_url_host(host)}:{port}")
    # Port 0: the server picks a free port and prints the URL in its banner.
    command = [sys.executable, "-m", "faults.toxiproxy", "--host", host,
               "--port", "0", "--seed", str(seed)]
    return _start(command, "builtin", startup_timeout, log_path, _banner_url)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _banner_url(output: str) -> str | None:
    match = _BANNER.search(output)
    return match.group(1) if match else None


def _start(command: list[str], source: Source, timeout: float, log_path: Path | None,
           url_from: _UrlFinder) -> ToxiproxyHandle:
    own_log = log_path is None
    if log_path is None:
        fd, name = tempfile.mkstemp(prefix="toxiproxy-", suffix=".log")
        os.close(fd)
        log_path = Path(name)
    with log_path.open("ab") as log:
        # A session of its own: a Ctrl-C on the terminal must not stop the proxy before
        # the harness has healed through it.
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    handle = ToxiproxyHandle("", source, process, log_path, own_log)
    try:
        handle.url = _wait_ready(handle, command, timeout, url_from)
    except BaseException:
        handle.stop()
        raise
    return handle


def _wait_ready(handle: ToxiproxyHandle, command: list[str], timeout: float,
                url_from: _UrlFinder) -> str:
    assert handle.process is not None and handle.log_path is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exited = handle.process.poll() is not None  # before reading: all output is in
        output = handle.log_path.read_text("utf-8", "replace")
        if exited:
            raise ToxiproxyStartError(
                f"{' '.join(command)} exited with code {handle.process.returncode}; "
                f"output:\n{output[-4000:]}")
        url = url_from(output)
        if url is not None:
            with contextlib.suppress(ToxiproxyError):
                ToxiproxyClient(url, timeout=1.0).version()
                return url
        time.sleep(0.05)
    raise ToxiproxyStartError(
        f"{' '.join(command)} did not answer within {timeout:g}s; output:\n"
        f"{handle.log_path.read_text('utf-8', 'replace')[-4000:]}")
