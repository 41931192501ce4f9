"""docs/first-hour.md, run as written: every command and every Python block, in the order the guide gives
them, in an empty folder holding a copy of ``examples/greeter`` (so that the ``--reload`` step may edit it).

The guide is a sequence of fenced blocks:

- ``console``: each ``$ `` line is a command, followed by what it prints (placeholders and ``...`` lines as
  :mod:`doc_console` reads them). ``skillwire serve ...``, ``python agent.py`` and ``uvicorn ...`` start a
  server, as a process of its own; the server started before is stopped first (as Ctrl-C would), and the
  lines shown must be the first the new one prints (the banner; without any, the test waits until the port
  takes connections). Every other command runs to its end as a process of its own, must exit 0 and print
  the lines shown. ``pip install -e .`` runs with ``--dry-run --no-deps``, from the checkout: the test must
  not reinstall the package it tests. ``VAR=value`` before a command is in its environment.
- ``text``: lines the running server must have printed, in this order.
- ``python``: run in one namespace, in order (each builds on the ones before); every ``# -> text`` comment
  is the next line it prints. A block whose first line is ``# agent.py`` or ``# main.py`` is also that
  file; ``# at the end of agent.py`` is added to the end of it.

Port 8000 and 8001 stand for free ports, given to the servers the way the guide says every option may be:
``SKILLWIRE_PORT`` (and ``UVICORN_PORT`` for uvicorn). The ``--reload`` server is also held to the guide's
promise: an edit of the greeter's SKILL.md is served without a restart by hand.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import EXAMPLES, PROCESS_TIMEOUT, ROOT, free_port, skip_without_service
from doc_console import Bindings, Command, commands_of

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "first-hour.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
EXPECT = re.compile(r"#\s*->\s*(.*)$")
SERVERS = ("skillwire serve", "uvicorn ", "python agent.py")


def blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


class Server:
    """A server the guide started: its process group (``--reload`` has a child) and everything it printed."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._printed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self._printed:
                self.lines.append(line.rstrip("\n"))
                self._printed.notify_all()

    def wait_for_lines(self, count: int, containing: str = "") -> list[str]:
        """Its first ``count`` lines (those that hold ``containing``), once printed."""

        def enough() -> bool:
            return len([x for x in self.lines if containing in x]) >= count or self.proc.poll() is not None

        with self._printed:
            self._printed.wait_for(enough, PROCESS_TIMEOUT)
            found = [x for x in self.lines if containing in x]
        assert len(found) >= count, "the server printed:\n" + "\n".join(self.lines)
        return found[:count]

    def stop(self) -> None:
        """Ctrl-C, and its end."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(PROCESS_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(PROCESS_TIMEOUT)
        self._reader.join(PROCESS_TIMEOUT)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


class Guide:
    """One run through the guide: its folder, its ports, the server running, the Python namespace."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port, self.other_port = free_port(), free_port()
        self.bindings = Bindings({"8000": str(self.port), "8001": str(self.other_port)})
        self.server: Server | None = None
        self.namespace: dict[str, Any] = {"__name__": "first_hour"}
        self.ran: list[str] = []

    def env(self, assigned: dict[str, str]) -> dict[str, str]:
        src = str(ROOT / "src")
        path = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))
        ports = {"SKILLWIRE_PORT": str(self.port), "UVICORN_PORT": str(self.port)}
        bin_dir = str(Path(sys.executable).parent)  # skillwire, uvicorn and python of the test's environment
        search = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
        return {**os.environ, **ports, "PYTHONPATH": path, "PATH": search, **assigned}

    # -- console ---------------------------------------------------------------------------------------------

    def console(self, command: Command) -> None:
        line = self.bindings.command(command.line)
        self.ran.append(line)
        words = shlex.split(line)
        assigned = {}
        while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
            name, _, value = words.pop(0).partition("=")
            assigned[name] = value
        shown = " ".join(words)
        if shown.startswith("pip install"):
            self.install(words, command)
        elif shown.startswith(SERVERS):
            self.serve(words, assigned, command)
        else:
            self.run(words, assigned, command, line)

    def install(self, words: list[str], command: Command) -> None:
        assert words == ["pip", "install", "-e", "."], words
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "-e", "."],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0 and "connection" in done.stdout.lower() + done.stderr.lower():
            skip_without_service("a package index (to build the checkout)", done.stderr[-300:])
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Would install skillwire" in done.stdout, done.stdout
        assert command.expected == []

    def serve(self, words: list[str], assigned: dict[str, str], command: Command) -> None:
        if self.server is not None:
            self.server.stop()
        argv = [sys.executable, *words[1:]] if words[0] == "python" else words
        self.server = Server(argv, self.folder, self.env(assigned))
        port = int(assigned.get("SKILLWIRE_PORT", self.port))
        if command.expected:
            printed = self.server.wait_for_lines(len(command.expected))
            self.bindings.match(command.expected, printed, " ".join(words))
        else:
            wait_for_port(port, self.server)
        if "--reload" in words:
            self.reload()

    def reload(self) -> None:
        """The guide's promise for --reload: an edit is served without a restart by hand."""
        assert self.server is not None
        manifest = self.folder / "examples" / "greeter" / "greet" / "SKILL.md"
        text = manifest.read_text(encoding="utf-8")
        manifest.write_text(text.replace("description: Greets a person", "description: Greets anyone"))
        self.server.wait_for_lines(2, "task store:")  # served again, by a fresh process
        card = httpx.get(f"http://127.0.0.1:{self.port}/.well-known/agent-card.json", timeout=PROCESS_TIMEOUT)
        assert card.json()["skills"][0]["description"].startswith("Greets anyone")
        manifest.write_text(text, encoding="utf-8")
        self.server.wait_for_lines(3, "task store:")

    def run(self, words: list[str], assigned: dict[str, str], command: Command, line: str) -> None:
        assert words[0] == "skillwire", f"the guide runs skillwire, servers and pip: {line}"
        done = subprocess.run(
            [sys.executable, "-m", "skillwire", *words[1:]],
            cwd=self.folder,
            env=self.env(assigned),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=PROCESS_TIMEOUT,
        )
        assert done.returncode == 0, f"$ {line}\nexit {done.returncode}\n{done.stdout}"
        self.bindings.match(command.expected, done.stdout.splitlines(), line)

    # -- text: what the server printed -------------------------------------------------------------------------

    def text(self, body: str) -> None:
        assert self.server is not None, "a text block shows what the running server printed"
        wanted = body.splitlines()
        printed = self.server.wait_for_lines(len(wanted), "skillwire.access")
        self.bindings.match(wanted, printed, "(the server's terminal)")

    # -- python ------------------------------------------------------------------------------------------------

    def python(self, code: str) -> None:
        first = code.splitlines()[0]
        if first == "# agent.py" or first == "# main.py":
            (self.folder / first[2:]).write_text(code, encoding="utf-8")
        elif first == "# at the end of agent.py":
            with (self.folder / "agent.py").open("a", encoding="utf-8") as file:
                file.write("\n\n" + code)
        code = self.bindings.replaced(code)
        expected = [m.group(1).strip() for line in code.splitlines() if (m := EXPECT.search(line))]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), self.namespace)
        assert out.getvalue().splitlines() == expected, code

    def close(self) -> None:
        if self.server is not None:
            self.server.stop()


def wait_for_port(port: int, server: Server) -> None:
    """Until something listens on ``port`` (the server printed nothing the guide shows)."""
    ready = threading.Event()

    def probe() -> None:
        while server.proc.poll() is None and not ready.is_set():
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                ready.set()
                return
            ready.wait(0.05)  # between two connection attempts

    threading.Thread(target=probe, daemon=True).start()
    assert ready.wait(PROCESS_TIMEOUT), "the server never listened:\n" + "\n".join(server.lines)


@pytest.fixture
def guide(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Guide]:
    shutil.copytree(EXAMPLES / "greeter", tmp_path / "examples" / "greeter")
    monkeypatch.chdir(tmp_path)  # the Python blocks run where the commands do
    monkeypatch.syspath_prepend(str(tmp_path))  # `from agent import agent`, as uvicorn finds it
    running = Guide(tmp_path)
    yield running
    running.close()
    for name in ("agent", "main"):
        sys.modules.pop(name, None)


def test_the_guide_runs_as_written(guide: Guide) -> None:
    for language, body in blocks():
        if language == "console":
            for command in commands_of(body):
                guide.console(command)
        elif language == "text":
            guide.text(body)
        else:
            assert language == "python", f"a ```{language} block is not run by this test"
            guide.python(body)
    assert {"pip install -e .", "skillwire serve examples/greeter", "uvicorn main:app"} <= set(guide.ran)


def test_every_command_of_the_guide_is_in_a_block() -> None:
    """A command named in the prose only would not be run: each one in backquotes is also in a block."""
    text = DOC.read_text(encoding="utf-8")
    run = "\n".join(c.line for language, body in blocks() if language == "console" for c in commands_of(body))
    prose = BLOCK.sub("", text)
    for named in re.findall(r"`((?:skillwire|uvicorn|pip|python) [^`]+)`", prose):
        assert named in run, f"`{named}` is named but never run"
