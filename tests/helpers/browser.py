"""Headless Chromium for tests that look at a page as a person would (skips without it, fails under CI)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM Chromium builds from ``page`` (no network, fresh profile)."""
    cmd = [
        str(chromium()),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--dump-dom",
        page.as_uri(),
    ]
    try:
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("chromium did not finish in time", pytrace=False)
    if result.returncode != 0 or "<html" not in result.stdout:
        pytest.fail(f"chromium could not render: {result.stderr[-500:]}", pytrace=False)
    return result.stdout


def without_own_script(page: str) -> str:
    """``page`` without report.html's one script (browse.py's, allowed by the CSP's hash): what is left must
    hold no ``<script`` at all."""
    from pytest_rageval.report.browse import render_script

    assert page.count(str(render_script())) == 1, "report.html carries its own script exactly once"
    return page.replace(str(render_script()), "")


class Page:
    """One page in headless Chromium, driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
    commands on fd 3, answers on fd 4, each a JSON text ended by a NUL byte): no websocket, no extra package.

    ``with Page(profile, width=1280) as page: page.open(path); page.js("document.title")``.
    """

    def __init__(self, profile: Path, *, width: int = 1280, height: int = 800, javascript: bool = True) -> None:
        import fcntl
        import os

        def high(fd: int) -> int:  # above 4, so that bash's 3< and 4> below never clobber one of them
            moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
            os.close(fd)
            return moved

        child_in, self._to_child = map(high, os.pipe())
        self._from_child, child_out = map(high, os.pipe())
        args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        if not javascript:
            args.insert(0, "--blink-settings=scriptEnabled=false")
        shell = f'exec "$0" "$@" 3<&{child_in} 4>&{child_out} {child_in}<&- {child_out}>&-'
        self._proc = subprocess.Popen(
            ["bash", "-c", shell, str(chromium()), *args],
            pass_fds=(child_in, child_out),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(child_in)
        os.close(child_out)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        try:
            targets = self._call("Target.getTargets")["targetInfos"]
            target = next(t["targetId"] for t in targets if t.get("type") == "page")
            self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self.call("Page.enable")
            self.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            )
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        import os

        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        self._proc.kill()
        self._proc.wait(timeout=30)

    def _read(self) -> dict[str, Any]:
        import json
        import os
        import select

        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_child], [], [], 120)
            chunk = os.read(self._from_child, 1 << 20) if ready else b""
            if not chunk:
                pytest.fail("chromium's DevTools pipe closed or stalled", pytrace=False)
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return cast("dict[str, Any]", json.loads(message))

    def _call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        import json
        import os

        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self._next:
                if "error" in answer:
                    pytest.fail(f"chromium refused {method}: {answer['error']}", pytrace=False)
                return cast("dict[str, Any]", answer.get("result", {}))
            self.events.append(answer)

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """A DevTools command to the page; its result."""
        return self._call(method, params, self._session)

    def open(self, page: Path, fragment: str = "") -> None:
        """Load ``page`` (with ``#fragment``) and wait for its load event."""
        self.events.clear()
        self.call("Page.navigate", {"url": page.as_uri() + (f"#{fragment}" if fragment else "")})
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            self.events.append(self._read())

    def js(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a thrown error fails the test)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            pytest.fail(f"page script failed: {result['exceptionDetails']}", pytrace=False)
        return result["result"].get("value")
