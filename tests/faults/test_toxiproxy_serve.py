"""``serve()`` as the CLI runs it: a process that answers the API and stops on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from faults.ports import free_port
from faults.toxiproxy import VERSION

REPO = Path(__file__).resolve().parents[2]


def test_serve_until_sigterm() -> None:
    port = free_port()
    code = f"from faults.toxiproxy import serve; serve('127.0.0.1', {port}, 5)"
    with subprocess.Popen(
        [sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True
    ) as process:
        try:
            assert process.stdout is not None
            banner = process.stdout.readline()
            assert f"http://127.0.0.1:{port}" in banner and "seed=5" in banner, banner
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/version", timeout=5) as response:
                assert json.load(response) == {"version": VERSION}
            body = json.dumps({"name": "p", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:1"})
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/proxies", data=body.encode(), method="POST"
            )
            with urllib.request.urlopen(request, timeout=5) as response:
                assert response.status == 201
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == 0
        finally:
            process.kill()
