"""Headless Chromium driven over the DevTools protocol: enough to click through a page in a test.

Debian's /usr/bin/chromium is started with --remote-debugging-port=0; the port it chose is read
from its stderr, a page target is opened over HTTP and driven through its WebSocket with the
`websockets` package (Playwright's browser download is not possible here).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect


class CDPError(RuntimeError):
    pass


class Browser:
    def __init__(self, chromium: Path, profile: Path, size: tuple[int, int] = (1100, 1400)) -> None:
        self.process = subprocess.Popen(
            [str(chromium), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
             f"--window-size={size[0]},{size[1]}", f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        assert self.process.stderr is not None
        deadline = time.monotonic() + 60
        port = None
        while port is None and time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                raise CDPError("chromium exited before it listened")
            match = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            port = int(match.group(1)) if match else None
        if port is None:
            self.close()
            raise CDPError("chromium did not print its DevTools address")
        self.port = port
        self._pages = contextlib.ExitStack()

    def new_page(self) -> Page:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(request, timeout=30) as response:
            target = json.loads(response.read())
        ws = self._pages.enter_context(connect(target["webSocketDebuggerUrl"], max_size=None, open_timeout=30))
        return Page(ws)

    def close(self) -> None:
        if hasattr(self, "_pages"):
            self._pages.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        self.send("Page.enable")
        self.send("Runtime.enable")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise CDPError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))
            self.events.append(message)

    def goto(self, url: str) -> float:
        """Load url and wait for its load event; returns the seconds it took."""
        started = time.perf_counter()
        self.events.clear()
        self.send("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired")
        return time.perf_counter() - started

    def wait_event(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            try:
                self.events.append(json.loads(self.ws.recv(timeout=max(0.05, deadline - time.monotonic()))))
            except TimeoutError:
                break
        raise CDPError(f"no {method} within {timeout} s")

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression (awaited if it is a promise)."""
        result = self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise CDPError(f"{expression[:80]}: {result['exceptionDetails'].get('text')} "
                           f"{result['exceptionDetails'].get('exception', {}).get('description', '')}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        """Poll a JavaScript expression until it is truthy; returns its value."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.05)
        raise CDPError(f"still false after {timeout} s: {expression}")

    def click(self, selector: str) -> None:
        self.eval(f"document.querySelector({json.dumps(selector)}).click()")

    def type_into(self, selector: str, text: str) -> None:
        self.eval(f"(() => {{ const e = document.querySelector({json.dumps(selector)}); e.value = {json.dumps(text)};"
                  " e.dispatchEvent(new Event('input', {bubbles: true})); })()")

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        self.ws.close()
