"""The paved path (issue 11): what a new user meets first, for real where it is about processes.

``serve --reload``, the access log, the banner of ``agent.run()``, ``SKILLWIRE_*`` variables, a store per
agent, ``--version``, ``--timeout``, a closed pipe, ``host:port`` URLs, repeated ``--data``, and
``module:attribute`` from the working directory. No sleeps: every wait polls with a cap.
"""

from __future__ import annotations

import json
import logging
import os
import pty
import queue
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from conftest import (
    EXAMPLES,
    PROCESS_TIMEOUT,
    RunningServer,
    Served,
    assert_rpc_result,
    free_port,
    start_process,
    user_message,
)
from skillwire import Agent, Client, RequestContext, TaskEvents
from skillwire.agent import DEFAULT_STORE, default_store
from skillwire.cli.calls import agent_url
from skillwire.cli.main import EXIT_CLOSED_PIPE, _parse, main
from skillwire.server.app import A2AApplication

Serve = Callable[[A2AApplication], RunningServer]
CARD = "/.well-known/agent-card.json"


class Lines:
    """A process's output lines, read on a thread, waited for with a cap."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.seen: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def until(self, needle: str, timeout: float = PROCESS_TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no line with {needle!r} in:\n{''.join(self.seen)}"
            try:
                line = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"exited before {needle!r}:\n{''.join(self.seen)}"
            self.seen.append(line)
            if needle in line:
                return line

    def rest(self) -> str:
        """Everything once the process has ended."""
        self.proc.wait(PROCESS_TIMEOUT)
        while (line := self._queue.get(timeout=PROCESS_TIMEOUT)) is not None:
            self.seen.append(line)
        return "".join(self.seen)


@pytest.fixture
def popen() -> Iterator[Callable[..., Lines]]:
    """``popen(argv, cwd=..., env=...)``: a process whose output is read as lines; ended after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> Lines:
        proc = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            start_new_session=True,  # --reload starts a process of its own: end the whole group
        )
        started.append(proc)
        return Lines(proc)

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(PROCESS_TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()


def skillwire(*argv: str) -> list[str]:
    return [sys.executable, "-m", "skillwire", *argv]


def wait_for(check: Callable[[], bool], what: str, timeout: float = PROCESS_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)  # a poll interval, not an assertion's wait


# -- the store, per agent --------------------------------------------------------------------------------


def test_default_store_is_named_after_the_agent() -> None:
    assert DEFAULT_STORE == "sqlite:///.skillwire/{agent}.db"
    assert default_store("Greeter") == "sqlite:///.skillwire/greeter.db"
    assert default_store("My  Agent v2!") == "sqlite:///.skillwire/my-agent-v2.db"
    assert default_store("!!!") == "sqlite:///.skillwire/agent.db"


def test_two_agents_started_in_one_folder_keep_their_own_tasks(
    tmp_path: Path, popen: Callable[..., Lines]
) -> None:
    echo_port, greeter_port = free_port(), free_port()
    echo = popen(skillwire("serve", str(EXAMPLES / "echo"), "--port", str(echo_port)), cwd=tmp_path)
    greeter = popen(skillwire("serve", str(EXAMPLES / "greeter"), "--port", str(greeter_port)), cwd=tmp_path)
    assert "sqlite:///.skillwire/echo.db" in echo.until("task store:")
    assert "sqlite:///.skillwire/greeter.db" in greeter.until("task store:")
    assert (tmp_path / ".skillwire" / "echo.db").exists()
    assert (tmp_path / ".skillwire" / "greeter.db").exists()
    sent = httpx.post(
        f"http://127.0.0.1:{echo_port}/",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": user_message("hi")}},
        headers={"A2A-Version": "1.0"},
        timeout=PROCESS_TIMEOUT,
    ).json()
    task_id = assert_rpc_result(sent, "SendMessage")["task"]["id"]
    listed = httpx.get(
        f"http://127.0.0.1:{greeter_port}/tasks", headers={"A2A-Version": "1.0"}, timeout=PROCESS_TIMEOUT
    ).json()
    assert task_id not in json.dumps(listed)


# -- the banner of agent.run() ------------------------------------------------------------------------------

RUN_AGENT = """
import sys
from skillwire import Agent

agent = Agent("Run Me", "Says it back")

@agent.skill(tags=["echo"], description="Says it back.")
async def echo(params, ctx):
    return "ok"

agent.run(port=int(sys.argv[1]))
"""


def test_agent_run_prints_the_serve_banner(tmp_path: Path, popen: Callable[..., Lines]) -> None:
    port = free_port()
    (tmp_path / "run_me.py").write_text(RUN_AGENT, encoding="utf-8")
    lines = popen([sys.executable, "run_me.py", str(port)], cwd=tmp_path)
    store = lines.until("task store:")
    text = "".join(lines.seen)
    assert f"skillwire: serving 'Run Me' at http://127.0.0.1:{port}/" in text
    assert f"agent card: http://127.0.0.1:{port}{CARD}" in text
    assert "sqlite:///.skillwire/run-me.db" in store
    assert httpx.get(f"http://127.0.0.1:{port}{CARD}", timeout=PROCESS_TIMEOUT).json()["name"] == "Run Me"


def test_agent_run_takes_the_serve_variables(tmp_path: Path, popen: Callable[..., Lines]) -> None:
    port = free_port()
    (tmp_path / "run_me.py").write_text(RUN_AGENT.replace("port=int(sys.argv[1])", ""), encoding="utf-8")
    env = {"SKILLWIRE_PORT": str(port), "SKILLWIRE_STORE": "memory://", "SKILLWIRE_LOG_LEVEL": "warning"}
    lines = popen([sys.executable, "run_me.py"], cwd=tmp_path, env=env)
    assert "memory://" in lines.until("task store:")
    assert f"skillwire: serving 'Run Me' at http://127.0.0.1:{port}/" in "".join(lines.seen)
    assert httpx.get(f"http://127.0.0.1:{port}{CARD}", timeout=PROCESS_TIMEOUT).json()["name"] == "Run Me"
    assert not (tmp_path / ".skillwire").exists()  # the variable's store, not the default file


# -- SKILLWIRE_* variables ---------------------------------------------------------------------------------


def test_every_serve_option_has_a_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    variables = {
        "TARGET": "examples/echo",
        "HOST": "0.0.0.0",
        "PORT": "9123",
        "STORE": "memory://",
        "PUBLIC_URL": "https://agents.example.com",
        "LOG_LEVEL": "debug",
        "RELOAD": "yes",
        "GRPC_PORT": "50051",
        "GRPC_STATUSES": "v1.0.0",
        "V03_CARD": "0",
        "READ_ONLY": "true",
        "PLUGINS": "on",
        "LIMIT": "max_connections=10, task_timeout=none",
    }
    for name, value in variables.items():
        monkeypatch.setenv(f"SKILLWIRE_{name}", value)
    args = _parse(["serve"])
    assert (args.target, args.host, args.port, args.store) == ("examples/echo", "0.0.0.0", 9123, "memory://")
    assert (args.public_url, args.log_level, args.reload) == ("https://agents.example.com", "debug", True)
    assert (args.grpc_port, args.grpc_statuses) == (50051, "v1.0.0")
    assert (args.v03_card, args.read_only, args.plugins) == (False, True, True)
    assert args.limit == ["max_connections=10", "task_timeout=none"]
    # a flag wins over its variable; a repeated --limit comes after the variable's, so it wins too
    flags = _parse(["serve", "other", "--port", "9000", "--no-read-only", "--limit", "max_connections=5"])
    assert (flags.target, flags.port, flags.read_only) == ("other", 9000, False)
    assert flags.limit == ["max_connections=10", "task_timeout=none", "max_connections=5"]


def test_a_bad_variable_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SKILLWIRE_READ_ONLY", "maybe")
    assert main(["serve", str(EXAMPLES / "echo")]) == 2
    err = capsys.readouterr().err
    assert "SKILLWIRE_READ_ONLY='maybe'" in err and "Traceback" not in err


def test_serve_takes_its_options_from_the_environment(tmp_path: Path, popen: Callable[..., Lines]) -> None:
    port = free_port()
    env = {
        "SKILLWIRE_TARGET": str(EXAMPLES / "greeter"),
        "SKILLWIRE_PORT": "1",  # the flag below wins
        "SKILLWIRE_STORE": "memory://",
        "SKILLWIRE_READ_ONLY": "1",
    }
    lines = popen(skillwire("serve", "--port", str(port)), cwd=tmp_path, env=env)
    assert "memory://" in lines.until("task store:")
    assert f"http://127.0.0.1:{port}/" in "".join(lines.seen)
    assert not (tmp_path / ".skillwire").exists()


# -- the access log ----------------------------------------------------------------------------------------


def test_serve_logs_one_line_per_request_at_its_default_level(
    tmp_path: Path, popen: Callable[..., Lines]
) -> None:
    port = free_port()
    lines = popen(skillwire("serve", str(EXAMPLES / "greeter"), "--port", str(port)), cwd=tmp_path)
    lines.until("task store:")
    message = user_message("Ada", metadata={"skillId": "greet"})
    sent = httpx.post(
        f"http://127.0.0.1:{port}/",
        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}},
        headers={"A2A-Version": "1.0"},
        timeout=PROCESS_TIMEOUT,
    ).json()
    task_id = assert_rpc_result(sent, "SendMessage")["task"]["id"]
    line = lines.until("skillwire.access")
    assert f"INFO skillwire.access: JSONRPC SendMessage skill=greet task={task_id} COMPLETED " in line
    assert re.search(r" \d+\.\d ms request=[0-9a-f]{16}$", line.rstrip()), line  # the request id ends it
    httpx.get(f"http://127.0.0.1:{port}/tasks/nope", headers={"A2A-Version": "1.0"}, timeout=PROCESS_TIMEOUT)
    assert "HTTP+JSON GetTask task=nope TASK_NOT_FOUND " in lines.until("GetTask")


def test_log_level_warning_hides_the_access_log(tmp_path: Path, popen: Callable[..., Lines]) -> None:
    port = free_port()
    argv = skillwire("serve", str(EXAMPLES / "greeter"), "--port", str(port), "--log-level", "warning")
    lines = popen(argv, cwd=tmp_path)
    lines.until("task store:")
    httpx.get(f"http://127.0.0.1:{port}/tasks/nope", headers={"A2A-Version": "1.0"}, timeout=PROCESS_TIMEOUT)
    lines.proc.send_signal(signal.SIGTERM)
    assert "skillwire.access" not in lines.rest()


async def streaming_agent(context: RequestContext, events: TaskEvents) -> None:
    await events.artifact("one", name="result")
    await events.complete()


def test_streams_and_grpc_are_logged_with_the_state_they_ended_in(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent("Streamer", "Streams", executor=streaming_agent)
    srv = serve(agent.asgi(store="memory://", grpc_port=0))

    async def calls() -> None:
        for binding in ("HTTP+JSON", "GRPC"):
            async with await Client.connect(srv.url, bindings=(binding,)) as client:
                async for _ in client.stream("hi"):
                    pass
                await client.send("hi")

    caplog.set_level(logging.INFO, logger="skillwire.access")
    import asyncio

    asyncio.run(calls())
    lines = [r.getMessage() for r in caplog.records if r.name == "skillwire.access"]
    assert len(lines) == 4, lines
    for line, (binding, operation) in zip(
        lines,
        [
            ("HTTP+JSON", "SendStreamingMessage"),
            ("HTTP+JSON", "SendMessage"),
            ("GRPC", "SendStreamingMessage"),
            ("GRPC", "SendMessage"),
        ],
        strict=True,
    ):
        assert line.startswith(f"{binding} {operation} task="), line
        assert " COMPLETED " in line and line.endswith(" ms"), line


# -- the calling commands ----------------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import skillwire

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"skillwire {skillwire.__version__}"


@pytest.mark.parametrize(
    "argv",
    [["-m", "skillwire", "--version"], ["-m", "skillwire", "card", "--help"]],
    ids=["version", "other"],
)
def test_the_console_script_answers_as_the_command_line(argv: list[str]) -> None:
    """``python -m skillwire`` (the console script's own module, ``skillwire._command``) answers ``--version``
    itself and everything else through the command line: the same output either way."""
    import skillwire

    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    if argv[-1] == "--version":
        assert done.stdout == f"skillwire {skillwire.__version__}\n"
    else:
        assert done.stdout.startswith("usage: skillwire card")


def test_the_package_version_is_the_installed_distributions() -> None:
    """``--version`` prints ``skillwire.__version__`` (cheaper than reading the metadata): it must be true."""
    from importlib.metadata import version

    import skillwire

    assert skillwire.__version__ == version("skillwire")


def test_host_port_and_port_are_http_urls(serve: Serve, capsys: pytest.CaptureFixture[str]) -> None:
    assert agent_url(":8000") == "http://127.0.0.1:8000"
    assert agent_url("localhost:8000/a") == "http://localhost:8000/a"
    assert agent_url("https://x.example") == "https://x.example"
    srv = serve(Agent.from_folder(EXAMPLES / "greeter").asgi(store="memory://"))
    for url in (f":{srv.port}", f"127.0.0.1:{srv.port}"):
        assert main(["card", url]) == 0
        assert capsys.readouterr().out.startswith("Greeter 1.0.0")


def test_timeout_bounds_each_request(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        assert main(["card", url, "--timeout", "0.5", "--retries", "0"]) == 3
    err = capsys.readouterr().err
    assert "ReadTimeout: no answer within 0.5 s" in err  # the default would wait 60 s for the card
    assert "Traceback" not in err
    with pytest.raises(SystemExit):
        main(["card", url, "--timeout", "0"])


async def parts_agent(context: RequestContext, events: TaskEvents) -> None:
    data = [part.data for part in context.message.parts if part.data is not None]
    await events.artifact(json.dumps(data), name="data")


def test_repeated_data_makes_one_part_each(serve: Serve, capsys: pytest.CaptureFixture[str]) -> None:
    srv = serve(Agent("Parts", "Counts parts", executor=parts_agent).asgi(store="memory://"))
    assert main(["send", srv.url, "--data", '{"a": 1}', "--data", "[2]"]) == 0
    assert '[{"a": 1}, [2]]' in capsys.readouterr().out


def test_a_closed_pipe_ends_quietly(tmp_path: Path, processes: list[Served]) -> None:
    served = start_process(str(EXAMPLES / "echo"), "memory://", tmp_path)
    processes.append(served)
    for n in range(5):
        assert_rpc_result(served.call("SendMessage", {"message": user_message(f"hi {n}")}), "SendMessage")
    # the reader has gone before anything is written: every write fails
    proc = subprocess.Popen(
        skillwire("tasks", "list", served.url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    assert proc.wait(PROCESS_TIMEOUT) == EXIT_CLOSED_PIPE
    assert proc.stderr.read() == b""
    proc.stderr.close()
    # and as a shell pipeline into head -1
    shell = subprocess.run(
        ["bash", "-c", f"'{sys.executable}' -m skillwire tasks list {served.url} | head -1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=PROCESS_TIMEOUT,
    )
    assert shell.returncode == 0 and "completed" in shell.stdout and len(shell.stdout.splitlines()) == 1
    assert "Traceback" not in shell.stderr and "BrokenPipe" not in shell.stderr
    # and from a terminal, as a person types it: the pipeline's stdin and stderr are a pty
    leader, follower = pty.openpty()
    try:
        typed = subprocess.run(
            ["bash", "-c", f"'{sys.executable}' -m skillwire tasks list {served.url} | head -1"],
            stdin=follower,
            stdout=subprocess.PIPE,
            stderr=follower,
            cwd=tmp_path,
            timeout=PROCESS_TIMEOUT,
        )
    finally:
        os.close(follower)
    on_terminal = _drain(leader)
    assert typed.returncode == 0 and len(typed.stdout.splitlines()) == 1
    assert b"Traceback" not in on_terminal and b"BrokenPipe" not in on_terminal, on_terminal


def _drain(fd: int) -> bytes:
    """What a pty's other side wrote, once it is closed (read until the pty says EOF or EIO)."""
    chunks: list[bytes] = []
    try:
        while select.select([fd], [], [], 0)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:  # EIO: the follower side is closed and everything was read
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)


def test_module_attribute_is_found_in_the_working_directory(tmp_path: Path, processes: list[Served]) -> None:
    shutil.copy(EXAMPLES / "echo" / "agent.py", tmp_path / "my_echo_agent.py")
    # -P: nothing put in front of sys.path, as when the `skillwire` script runs
    served = start_process("my_echo_agent:agent", "memory://", tmp_path, launcher=("-P", "-m", "skillwire"))
    processes.append(served)
    assert httpx.get(served.url + CARD, timeout=PROCESS_TIMEOUT).json()["name"] == "Echo"


# -- serve --reload ----------------------------------------------------------------------------------------


def test_reload_serves_the_changed_skill(tmp_path: Path, popen: Callable[..., Lines]) -> None:
    folder = tmp_path / "greeter"
    shutil.copytree(EXAMPLES / "greeter", folder)
    port = free_port()
    argv = skillwire("serve", str(folder), "--port", str(port), "--store", "memory://", "--reload")
    lines = popen(argv, cwd=tmp_path)
    lines.until("task store:")
    url = f"http://127.0.0.1:{port}{CARD}"

    def description() -> str:
        try:
            card = httpx.get(url, timeout=PROCESS_TIMEOUT).json()
        except httpx.HTTPError:  # between two processes
            return ""
        return str(card["skills"][0]["description"])

    assert description().startswith("Greets a person")
    manifest = folder / "greet" / "SKILL.md"
    text = manifest.read_text(encoding="utf-8")
    changed = "description: Greets anyone, reloaded."
    manifest.write_text(
        text.replace("description: Greets a person by name, in a casual or a formal style.", changed),
        encoding="utf-8",
    )
    wait_for(lambda: description() == "Greets anyone, reloaded.", "the reloaded card", timeout=30)


def test_reload_with_a_broken_manifest_is_one_line_and_answers_503_meanwhile(
    tmp_path: Path, popen: Callable[..., Lines]
) -> None:
    folder = tmp_path / "greeter"
    shutil.copytree(EXAMPLES / "greeter", folder)
    port = free_port()
    argv = skillwire("serve", str(folder), "--port", str(port), "--store", "memory://", "--reload")
    lines = popen(argv, cwd=tmp_path)
    lines.until("task store:")
    manifest = folder / "greet" / "SKILL.md"
    text = manifest.read_text(encoding="utf-8")
    manifest.write_text(text.replace("\nname: ", "\nnme: ", 1), encoding="utf-8")  # a typo
    error = lines.until("skillwire.reload")
    assert f"{manifest}:3 nme: unknown key 'nme'" in error
    answer = httpx.get(f"http://127.0.0.1:{port}{CARD}", timeout=5)  # at once: never the read timeout
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert "unknown key 'nme'" in answer.json()["error"]["message"]
    rpc_answer = httpx.post(f"http://127.0.0.1:{port}/", json={}, timeout=5)
    assert rpc_answer.status_code == 503 and "unknown key 'nme'" in rpc_answer.json()["error"]["message"]
    manifest.write_text(text, encoding="utf-8")  # fixed: served again
    lines.until("task store:")
    assert httpx.get(f"http://127.0.0.1:{port}{CARD}", timeout=PROCESS_TIMEOUT).status_code == 200
    assert "Traceback" not in "".join(lines.seen)


def test_a_broken_agent_py_is_one_line_where_it_broke(tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(
        "from skillwire import Agent\n\nagent = Agent('Broken', 'Breaks.')\nundefined_name()\n"
    )
    done = subprocess.run(
        skillwire("serve", "agent.py", "--store", "memory://", "--port", str(free_port())),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=PROCESS_TIMEOUT,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines == [
        f"skillwire: agent.py: cannot load the agent: {tmp_path / 'agent.py'}:4: NameError: name"
        " 'undefined_name' is not defined"
    ], done.stderr
