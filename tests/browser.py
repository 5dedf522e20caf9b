"""Open a page in headless Chromium over the DevTools protocol and report what it did.

Collects console errors, uncaught exceptions, log entries (CSP violations land there) and every network
request the page made; evaluates expressions in the page; takes full-page screenshots. Only the
``websocket-client`` package is needed besides the ``chromium`` binary.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


@dataclass
class PageVisit:
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    values: dict[str, Any] = field(default_factory=dict)


class Chromium:
    """One headless browser with one page; use as a context manager."""

    def __init__(self, executable: str) -> None:
        self._profile = tempfile.mkdtemp(prefix="advisor-chromium-")
        self._process = subprocess.Popen(
            [executable, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--disable-extensions", "--disable-background-networking", "--remote-debugging-port=0",
             f"--user-data-dir={self._profile}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,  # its helpers die with it
        )
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self._process.poll() is not None:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:  # noqa: S310 (local)
            page = next(t for t in json.load(response) if t["type"] == "page")
        self._socket = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable")

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if getattr(self, "_socket", None) is not None:
            self._socket.close()
        try:  # the browser's helper processes too: a renderer still writing the profile would stop its removal
            os.killpg(self._process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._process.wait(timeout=10)
        shutil.rmtree(self._profile, ignore_errors=True)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        self._socket.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv())
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._events.append(message)

    def visit(self, url: str, width: int, height: int, expressions: dict[str, str]) -> PageVisit:
        """Load ``url`` at a viewport size, wait for the load event, evaluate ``expressions``; collect what happened."""
        self._events.clear()
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", url=url)
        deadline = time.monotonic() + 30
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not finish loading")
            self._events.append(json.loads(self._socket.recv()))
        visit = PageVisit()
        for name, expression in expressions.items():
            result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
            visit.values[name] = result.get("result", {}).get("value")
        for event in self._events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                visit.errors.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                visit.errors.append("exception: " + params["exceptionDetails"].get("text", ""))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                visit.errors.append(f"log ({params['entry']['source']}): {params['entry']['text']}")
            elif method == "Network.requestWillBeSent":
                visit.requests.append(params["request"]["url"])
        return visit

    def screenshot(self, path: Path) -> None:
        """A full-page PNG of the current page."""
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
