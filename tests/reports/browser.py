"""Open a page in headless Chromium over the DevTools protocol and report what a person
would notice: script errors and console errors, network requests, rendered plots, where
some elements were drawn, and a screenshot.

Console messages only come through the protocol (``--screenshot`` and ``--dump-dom``
do not report them), so the browser is started with ``--remote-debugging-port=0`` and
driven over its websocket with aiohttp.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
import psutil

BINARIES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    return next((path for name in BINARIES if (path := shutil.which(name))), None)


class Box(NamedTuple):
    """Where an element was drawn, in pixels, and its text."""

    text: str
    left: float
    top: float
    right: float
    bottom: float


@dataclass
class PageVisit:
    errors: list[str] = field(default_factory=list)  # exceptions and console errors
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    plots: int = 0  # plotly graphs that drew their SVG
    boxes: list[Box] = field(default_factory=list)  # of the elements measured
    screenshot: bytes = b""  # PNG of the element asked for


def visit(page: Path, *, element: str, binary: str, measure: str = "",
          timeout: float = 60.0) -> PageVisit:
    """Load ``page``, wait for it to settle, screenshot the element with id ``element``
    and measure the elements the CSS selector ``measure`` finds."""
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        browser = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--remote-debugging-port=0", f"--user-data-dir={profile}",
             "--window-size=1280,1600", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            url = _devtools_url(browser)
            return asyncio.run(asyncio.wait_for(_visit(url, page, element, measure),
                                                timeout))
        finally:
            _kill_with_children(browser)


def _kill_with_children(browser: subprocess.Popen[str]) -> None:
    """Chromium's helpers (renderer, crash handler) write to the profile too: all of
    them must be gone before the profile directory is removed."""
    try:
        family = [psutil.Process(browser.pid), *psutil.Process(browser.pid).children(True)]
    except psutil.NoSuchProcess:
        family = []
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    browser.wait()
    psutil.wait_procs(family, timeout=10)


def _devtools_url(browser: subprocess.Popen[str]) -> str:
    assert browser.stderr is not None
    seen = []
    for line in browser.stderr:
        if line.startswith("DevTools listening on "):
            return line.split(" on ", 1)[1].strip()
        seen.append(line)
    raise RuntimeError("chromium exited before opening DevTools:\n" + "".join(seen[-20:]))


class _Session:
    """One attached page: commands with replies, events queued as they come."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.ids = itertools.count(1)
        self.session_id: str | None = None
        self.events: list[dict[str, Any]] = []

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self.ids)
        message: dict[str, Any] = {"id": number, "method": method, "params": params}
        if self.session_id is not None:
            message["sessionId"] = self.session_id
        await self.ws.send_str(json.dumps(message))
        while True:
            reply = await self._receive()
            if reply.get("id") == number:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    async def wait_for(self, method: str) -> dict[str, Any]:
        while True:
            found = next((e for e in self.events if e["method"] == method), None)
            if found is not None:
                return found
            await self._receive()

    async def _receive(self) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(await self.ws.receive_str())
        if "method" in message:
            self.events.append(message)
        return message


async def _visit(url: str, page: Path, element: str, measure: str) -> PageVisit:
    async with aiohttp.ClientSession() as http, http.ws_connect(url, max_msg_size=0) as ws:
        s = _Session(ws)
        target = await s.send("Target.createTarget", url="about:blank")
        attached = await s.send("Target.attachToTarget", targetId=target["targetId"],
                                flatten=True)
        s.session_id = attached["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            await s.send(f"{domain}.enable")
        await s.send("Page.navigate", url=page.resolve().as_uri())
        await s.wait_for("Page.loadEventFired")
        plots = await _settled_plots(s)
        box = await s.send("Runtime.evaluate", returnByValue=True, expression=(
            f"(() => {{ const r = document.getElementById({json.dumps(element)})"
            ".getBoundingClientRect(); return {x: r.left + scrollX, y: r.top + scrollY, "
            "width: r.width, height: r.height}; })()"))
        shot = await s.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                            clip={**box["result"]["value"], "scale": 1})
        boxes = await s.send("Runtime.evaluate", returnByValue=True, expression=(
            f"[...document.querySelectorAll({json.dumps(measure)})].map(e => {{ "
            "const r = e.getBoundingClientRect(); "
            "return [e.textContent, r.left, r.top, r.right, r.bottom]; })"
            if measure else "[]"))
        return PageVisit(_errors(s.events), _requests(s.events), plots,
                         [Box(*box) for box in boxes["result"]["value"]],
                         base64.b64decode(shot["data"]))


async def _settled_plots(s: _Session) -> int:
    """Plotly draws after load; wait until the count of drawn graphs stops changing."""
    previous = -1
    for _ in range(50):
        reply = await s.send("Runtime.evaluate", returnByValue=True, expression=(
            "document.querySelectorAll('.js-plotly-plot .main-svg').length"))
        count = int(reply["result"]["value"])
        if count == previous and count > 0:
            return count
        previous = count
        await asyncio.sleep(0.1)
    return max(previous, 0)


def _errors(events: list[dict[str, Any]]) -> list[str]:
    found = []
    for event in events:
        params = event.get("params", {})
        if event["method"] == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            found.append(f"exception: {text}")
        elif event["method"] == "Runtime.consoleAPICalled" and params["type"] in (
                "error", "assert"):
            args = " ".join(str(a.get("value", a.get("description", ""))) for a in
                            params.get("args", []))
            found.append(f"console.{params['type']}: {args}")
        elif event["method"] == "Log.entryAdded" and params["entry"]["level"] == "error":
            found.append(f"log: {params['entry']['text']}")
    return found


def _requests(events: list[dict[str, Any]]) -> list[str]:
    return [e["params"]["request"]["url"] for e in events
            if e["method"] == "Network.requestWillBeSent"]
