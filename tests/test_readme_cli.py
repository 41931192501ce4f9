"""Every command of the README's "Calling agents from the command line" section, run for real.

The section's ``console`` blocks hold commands (lines starting with ``$ ``) each followed by the output it
prints. ``skillwire serve`` is started as a process (in an empty folder where ``examples`` links to the
project's, on a free port instead of 8000); every other ``skillwire`` command runs in process against it and
must exit 0 and print exactly the lines shown. A command may pipe its output into ``python3`` (run here with
the interpreter running the tests).

Placeholders (``<task-1>``) are those of :mod:`doc_console`; ``http://127.0.0.1:8000`` stands for the test
server's URL everywhere.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT, free_port
from doc_console import Bindings, Command, commands_of
from skillwire.cli.main import main

SECTION = "## Calling agents from the command line"
README_URL = "http://127.0.0.1:8000"
WAIT = 30.0


def console_commands(section: str) -> list[Command]:
    """The ``$ `` commands of the section's fenced blocks, each with the lines printed after it."""
    commands: list[Command] = []
    blocks = re.findall(r"^```(\S*)\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    for language, body in blocks:
        assert language == "console", f"a ```{language} block in the section is not run by this test"
        commands += commands_of(body)
    return commands


def readme_section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(SECTION + "\n")
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end != -1 else len(text)]


@dataclass
class Server:
    process: subprocess.Popen[bytes]
    url: str
    lines: list[str]


def read_lines(process: subprocess.Popen[bytes], count: int) -> list[str]:
    """The first ``count`` lines the process prints on stderr, where the banner goes (waiting at most WAIT
    seconds)."""
    assert process.stderr is not None
    fd, data = process.stderr.fileno(), b""
    deadline = time.monotonic() + WAIT
    while data.count(b"\n") < count:
        ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
        assert ready, f"no more output after {data!r}"
        chunk = os.read(fd, 4096)
        assert chunk, f"the process ended after printing {data!r}"
        data += chunk
    return data.decode().splitlines()[:count]


@pytest.fixture
def greeter_process(tmp_path: Path) -> Iterator[tuple[Command, Server]]:
    """The section's first command, ``skillwire serve examples/greeter``, running in an empty folder."""
    serve, *_ = console_commands(readme_section())
    argv = shlex.split(serve.line)
    assert argv[:2] == ["skillwire", "serve"], "the section starts by serving an agent"
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    port = free_port()
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "skillwire", *argv[1:], "--port", str(port)],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.PIPE,
    )
    try:
        lines = read_lines(process, len(serve.expected))
        yield serve, Server(process, f"http://127.0.0.1:{port}", lines)
    finally:
        process.terminate()
        process.wait(timeout=WAIT)
        assert process.stderr is not None
        process.stderr.close()
        log.close()


def run_line(line: str, capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``skillwire ...`` in process, then any ``| python3 ...`` after it; return what is printed."""
    argv = shlex.split(line)
    pipeline: list[list[str]] = [[]]
    for word in argv:
        if word == "|":
            pipeline.append([])
        else:
            pipeline[-1].append(word)
    first, *rest = pipeline
    assert first[0] == "skillwire", line
    code = main(first[1:])
    out, err = capsys.readouterr()
    assert code == 0, f"$ {line}\nexit {code}\n{err}"
    assert err == "", f"$ {line}\n{err}"
    for stage in rest:
        assert stage[0] in ("python", "python3"), f"only python3 may take the output: {line}"
        result = subprocess.run(
            [sys.executable, *stage[1:]], input=out, capture_output=True, text=True, timeout=WAIT, check=False
        )
        assert result.returncode == 0, result.stderr
        out = result.stdout
    return out


def test_the_section_shows_the_client_commands() -> None:
    lines = [shlex.split(c.line) for c in console_commands(readme_section())]
    shown = {" ".join(argv[1:3]) if argv[1] == "tasks" else argv[1] for argv in lines}
    assert {"serve", "card", "send", "tasks list", "tasks get"} <= shown
    assert any("--json" in argv for argv in lines)
    assert all(c.expected for c in console_commands(readme_section())), "every command shows its output"


def test_readme_commands_print_what_the_readme_shows(
    greeter_process: tuple[Command, Server], capsys: pytest.CaptureFixture[str]
) -> None:
    serve, server = greeter_process
    bindings = Bindings({README_URL: server.url})
    bindings.match(serve.expected, server.lines, serve.line)
    commands = console_commands(readme_section())[1:]
    for command in commands:
        line = bindings.command(command.line)
        printed = run_line(line, capsys).splitlines()
        bindings.match(command.expected, printed, line)
    assert {"task-1", "context-1", "time-1"} <= bindings.values.keys()
