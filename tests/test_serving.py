"""tests/serving.py, the one helper that runs a test server in a thread: it returns once the server accepts
connections, its stop is bounded and says so when the thread does not end, a start-up that fails is
reported, and no other test module makes a uvicorn server of its own."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import serving
from conftest import example_agent

TESTS = Path(__file__).resolve().parent
WAIT = 10.0

#: The modules that may make a uvicorn server: the helper, and the a2a-sdk 0.3 agent, a program of its own
#: run by another venv's python in a subprocess (it cannot import the helper: skillwire is not installed there).
ALLOWED = {TESTS / "serving.py", TESTS / "interop_v03" / "server.py"}


async def hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


def test_the_server_accepts_connections_when_start_returns() -> None:
    server = serving.start(hello, lifespan="off")
    try:
        assert server.started and server.thread.is_alive()
        # one connection, no retry: the socket listens and the loop answers
        with socket.create_connection((server.host, server.port), timeout=WAIT) as conn:
            conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b"".join(iter(lambda: conn.recv(4096), b""))
        assert answer.startswith(b"HTTP/1.1 200") and b"\r\nhello\r\n" in answer
    finally:
        server.stop()
    assert not server.thread.is_alive()


def test_an_a2a_application_is_served_as_skillwire_serve_serves_it() -> None:
    with serving.running(example_agent("echo").asgi(store="memory://")) as server:
        assert server.loop.is_running()  # the server's loop, for run_coroutine_threadsafe
        card = httpx.get(server.url + "/.well-known/agent-card.json", timeout=WAIT)
    assert card.status_code == 200 and card.json()["name"] == "Echo"
    assert not server.thread.is_alive()


def test_a_stop_that_does_not_end_the_thread_fails_within_its_bound() -> None:
    release = threading.Event()

    async def stuck() -> None:  # a shutdown that does not end until the test says so
        await asyncio.to_thread(release.wait, WAIT)

    server = serving.start(hello, lifespan="off", on_shutdown=stuck)
    try:
        with pytest.raises(AssertionError, match=r"did not stop within 0\.2 s"):
            server.stop(timeout=0.2)
        assert server.thread.is_alive()
    finally:
        release.set()
        server.stop()


def test_a_stream_a_client_keeps_open_does_not_hold_the_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serving, "GRACE", 0.2)
    forever = asyncio.Event()

    async def endless(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await forever.wait()  # never set: the stream ends only when the server cancels it

    server = serving.start(endless, lifespan="off", log_level="critical")
    with socket.create_connection((server.host, server.port), timeout=WAIT) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        server.stop()  # within its bound although the connection is still open
    assert not server.thread.is_alive()


def test_a_failed_start_up_is_reported_not_waited_out() -> None:
    @contextlib.asynccontextmanager
    async def failing(app: Any) -> AsyncIterator[None]:
        raise RuntimeError("no database")
        yield

    from starlette.applications import Starlette

    with pytest.raises(RuntimeError, match="did not start"):
        serving.start(Starlette(lifespan=failing), lifespan="on", log_level="critical")
    server = serving.start(Starlette(lifespan=failing), lifespan="on", log_level="critical", must_start=False)
    assert not server.started
    server.stop()


def test_an_a2a_application_that_cannot_start_says_why(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")  # the store's directory cannot be made: its parent is a file
    app = example_agent("echo").asgi(store=f"sqlite:///{blocker}/tasks.db")
    with pytest.raises(RuntimeError, match="did not start: cannot open the SQLite store"):
        serving.start(app)


def _makes_a_server(tree: ast.AST) -> list[int]:
    """The lines of ``tree`` that name uvicorn's server class or call skillwire's ``build_server``."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "Server":
            if isinstance(node.value, ast.Name) and node.value.id == "uvicorn":
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("uvicorn"):
            if any(alias.name == "Server" for alias in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.Name | ast.alias) and getattr(node, "id", getattr(node, "name", "")) == (
            "build_server"
        ):
            lines.append(getattr(node, "lineno", 0))
    return sorted(lines)


def test_no_test_module_makes_its_own_server() -> None:
    offenders = {
        str(path.relative_to(TESTS)): lines
        for path in sorted(TESTS.rglob("*.py"))
        if path not in ALLOWED and (lines := _makes_a_server(ast.parse(path.read_text(), str(path))))
    }
    assert not offenders, f"start servers with tests/serving.py, not uvicorn.Server: {offenders}"


def test_the_check_sees_a_server_made_by_hand() -> None:
    made = "import uvicorn\nclass S(uvicorn.Server): ...\nserver = uvicorn.Server(config)\n"
    assert _makes_a_server(ast.parse(made)) == [2, 3]
    assert _makes_a_server(ast.parse("from uvicorn import Server\n")) == [1]
    assert _makes_a_server(ast.parse("from skillwire.server.serving.serve import build_server\n")) == [1]
    assert _makes_a_server(ast.parse("import uvicorn\nuvicorn.Config(app)\n")) == []
