"""A small WebDriver BiDi client, to drive Firefox in the console's browser tests.

Playwright drives only its own patched Firefox builds, which cannot be downloaded here, and Debian has no
geckodriver; but Firefox itself speaks WebDriver BiDi (the W3C protocol) when started with
``--remote-debugging-port``. This module starts Debian's ``firefox-esr`` headless on a fresh profile and
sends BiDi commands over its WebSocket: navigate, evaluate a script (awaiting its promise), and real
keyboard input (``input.performActions``). It holds only what the tests use.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

LISTENING = re.compile(r"WebDriver BiDi listening on (ws://\S+)")
START_TIMEOUT = 60.0
COMMAND_TIMEOUT = 30.0

#: Firefox preferences for a quiet test profile: no first-run pages, no updates, no telemetry, nothing that
#: calls out to the network.
PREFS = {
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.homepage_override.mstone": "ignore",
    "browser.aboutwelcome.enabled": False,
    "app.update.disabledForTesting": True,
    "datareporting.policy.dataSubmissionEnabled": False,
    "toolkit.telemetry.reportingpolicy.firstRun": False,
    "remote.prefs.recommended": True,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "services.settings.server": "http://127.0.0.1:9/",
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
}


def firefox_path() -> str | None:
    for name in ("firefox-esr", "firefox"):
        found = shutil.which(name)
        if found:
            return found
    return None


class BidiError(AssertionError):
    pass


class Firefox:
    """A headless Firefox and one BiDi session on its first tab (``context``)."""

    def __init__(self, ws: ClientConnection, process: subprocess.Popen[str], context: str) -> None:
        self.ws = ws
        self.process = process
        self.context = context
        self._ids = itertools.count(1)

    def command(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        number = next(self._ids)
        self.ws.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=COMMAND_TIMEOUT))
            if message.get("id") != number:
                continue  # an event, or the answer to something else
            if message.get("type") == "error":
                raise BidiError(f"{method}: {message.get('error')}: {message.get('message')}")
            result: dict[str, Any] = message["result"]
            return result

    def navigate(self, url: str) -> None:
        self.command("browsingContext.navigate", {"context": self.context, "url": url, "wait": "complete"})

    def js(self, expression: str) -> Any:
        """The value of ``expression`` in the page (a promise is awaited), as JSON would give it back."""
        answer = self.command(
            "script.evaluate",
            {
                "expression": f"(async () => JSON.stringify(await ({expression})))()",
                "target": {"context": self.context},
                "awaitPromise": True,
                "resultOwnership": "none",
            },
        )
        if answer.get("type") == "exception":
            details = answer.get("exceptionDetails", {})
            raise BidiError(f"{expression}: {details.get('text')}")
        value = answer["result"].get("value")
        return None if value is None else json.loads(value)

    def type(self, text: str) -> None:
        """Type ``text`` with the keyboard into whatever has the focus."""
        keys: list[dict[str, str]] = []
        for ch in text:
            keys += [{"type": "keyDown", "value": ch}, {"type": "keyUp", "value": ch}]
        self.command(
            "input.performActions",
            {"context": self.context, "actions": [{"type": "key", "id": "keyboard", "actions": keys}]},
        )

    def press(self, key: str) -> None:
        """Press one key: a character, or ``"Enter"``, ``"Tab"``."""
        value = {"Enter": "\ue007", "Tab": "\ue004"}.get(key, key)
        self.command(
            "input.performActions",
            {
                "context": self.context,
                "actions": [
                    {
                        "type": "key",
                        "id": "keyboard",
                        "actions": [{"type": "keyDown", "value": value}, {"type": "keyUp", "value": value}],
                    }
                ],
            },
        )

    def screenshot(self, path: Path) -> None:
        import base64

        answer = self.command(
            "browsingContext.captureScreenshot", {"context": self.context, "origin": "document"}
        )
        path.write_bytes(base64.b64decode(answer["data"]))


@contextlib.contextmanager
def launch(executable: str) -> Iterator[Firefox]:
    """Firefox ``executable``, headless on a fresh profile, with a BiDi session; ended and removed after."""
    with tempfile.TemporaryDirectory(prefix="skillwire-firefox-") as profile:
        (Path(profile) / "user.js").write_text(
            "".join(f"user_pref({json.dumps(k)}, {json.dumps(v)});\n" for k, v in PREFS.items())
        )
        process = subprocess.Popen(
            [executable, "--headless", "--no-remote", "--profile", profile, "--remote-debugging-port=0"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def read() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                lines.put(line)
            lines.put(None)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            url = _listening(lines)
            with connect(url + "/session", open_timeout=START_TIMEOUT, max_size=64 * 1024 * 1024) as ws:
                browser = Firefox(ws, process, "")
                browser.command(
                    "session.new", {"capabilities": {"alwaysMatch": {"acceptInsecureCerts": False}}}
                )
                tree = browser.command("browsingContext.getTree", {})
                browser.context = tree["contexts"][0]["context"]
                yield browser
                with contextlib.suppress(Exception):
                    browser.command("browser.close", {})
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(15)
            # the reader sees the end of stderr once Firefox is gone: let it finish before the pipe is closed
            # under it (closing first raised ValueError in the reader thread, seen under load)
            reader.join(15)
            if process.stderr is not None and not reader.is_alive():
                process.stderr.close()


def _listening(lines: queue.Queue[str | None]) -> str:
    seen: list[str] = []
    while True:
        try:
            line = lines.get(timeout=START_TIMEOUT)
        except queue.Empty:
            raise BidiError("Firefox did not start its BiDi server:\n" + "".join(seen[-20:])) from None
        if line is None:
            raise BidiError("Firefox exited before it served BiDi:\n" + "".join(seen[-20:]))
        seen.append(line)
        found = LISTENING.search(line)
        if found:
            return found.group(1)
