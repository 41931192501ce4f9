"""`skillwire mcp URL`: a running A2A agent's skills as MCP tools over stdio, called with skillwire.Client
and the credentials of --credential; the official MCP client on one side, a real skillwire server on the
other."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from conftest import RunningServer, free_port
from mcp_agent import secured
from skillwire import Client
from skillwire.protocol.states import TaskState
from skillwire.server.app import A2AApplication
from test_client_v03 import peer as v03_peer  # noqa: F401 - a fixture: the a2a-sdk 0.3 agent

KEY = "k-ada"
DEADLINE = 60


@pytest.fixture
def server(serve: Callable[[A2AApplication], RunningServer]) -> RunningServer:
    return serve(secured({"ada": KEY}).asgi(store="memory://"))


@asynccontextmanager
async def bridge(
    tmp_path: Path, url: str, *options: str, elicitation: Callable[..., Any] | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "skillwire", "mcp", url, *options])
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, elicitation_callback=elicitation) as session,
        ):
            with anyio.fail_after(DEADLINE):
                await session.initialize()
            yield session


async def test_a_remote_agents_skills_are_tools(tmp_path: Path, server: RunningServer) -> None:
    agent = secured({"ada": KEY})

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "Grace"})

    async with bridge(tmp_path, server.url, "--credential", f"apiKey={KEY}", elicitation=elicit) as session:
        with anyio.fail_after(DEADLINE):
            listed = await session.list_tools()
            added = await session.call_tool("add", {"a": 20, "b": 22})
            refused = await session.call_tool("refuse", {})
            answered = await session.call_tool("interview", {})
            report = await session.call_tool("report", {})
    # the schemas travel on the card (skillwire's skill-schemas extension) and arrive unchanged
    assert {t.name: (t.description, t.input_schema) for t in listed.tools} == {
        s.id: (s.agent_skill.description, s.input_schema) for s in agent.served_skills()
    }
    assert added.structured_content == {"sum": 42}
    assert refused.is_error and refused.content[0].text == "The vault is closed on Sundays."  # type: ignore[union-attr]
    assert answered.content[0].text == '{"name": "Grace"}'  # type: ignore[union-attr]
    assert isinstance(report.content[0], types.EmbeddedResource)
    async with await Client.connect(server.url, headers={"X-API-Key": KEY}) as client:
        tasks = (await client.list_tasks()).tasks
    assert sorted(t.status.state.name for t in tasks) == ["COMPLETED", "COMPLETED", "COMPLETED", "FAILED"]


async def test_cancel_reaches_the_remote_task(tmp_path: Path, server: RunningServer) -> None:
    started = anyio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()

    async with bridge(tmp_path, server.url, "--credential", f"apiKey={KEY}") as session:
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    await session.call_tool("wait", {}, progress_callback=progress)

                group.start_soon(call)
                await started.wait()
                group.cancel_scope.cancel()
            await session.send_ping()
    async with await Client.connect(server.url, headers={"X-API-Key": KEY}) as client:
        (task,) = (await client.list_tasks()).tasks
        ended = await client.wait(task.id, timeout=DEADLINE)
    assert ended.status.state is TaskState.CANCELED


async def test_without_the_credential_each_call_says_it_was_refused(
    tmp_path: Path, server: RunningServer
) -> None:
    async with bridge(tmp_path, server.url) as session:
        with anyio.fail_after(DEADLINE):
            result = await session.call_tool("add", {"a": 1, "b": 2})
    assert result.is_error
    assert result.content[0].text == "This agent needs credentials: apiKey"  # type: ignore[union-attr]


def test_local_options_are_refused_with_a_url() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "skillwire", "mcp", "http://127.0.0.1:9", "--read-only"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "apply to an agent served here" in done.stderr


@contextmanager
def http_bridge(url: str, port: int) -> Iterator[str]:
    """``skillwire mcp URL --http 127.0.0.1:PORT`` in a process, once its banner says it listens: the banner."""
    command = [sys.executable, "-m", "skillwire", "mcp", url, "--credential", f"apiKey={KEY}"]
    proc = subprocess.Popen(
        [*command, "--http", f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    stderr = proc.stderr
    assert stderr is not None
    threading.Thread(target=lambda: [lines.put(line) for line in stderr], daemon=True).start()
    try:
        yield lines.get(timeout=DEADLINE).strip()  # printed once it listens
    finally:
        proc.terminate()
        proc.wait(DEADLINE)
        stderr.close()


async def test_a_remote_agents_skills_over_streamable_http(server: RunningServer) -> None:
    port = free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    with http_bridge(server.url, port) as banner:
        assert banner == f"skillwire: serving the skills of {server.url} as MCP tools at {mcp_url}"
        async with (
            httpx2.AsyncClient() as http,
            streamable_http_client(mcp_url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            with anyio.fail_after(DEADLINE):
                await session.initialize()
                added = await session.call_tool("add", {"a": 1, "b": 2})
        async with httpx.AsyncClient() as plain:
            rebound = await plain.post(mcp_url, json={}, headers={"Host": "evil.example"})
            elsewhere = await plain.get(f"http://127.0.0.1:{port}/")
    assert added.structured_content == {"sum": 3}
    assert rebound.status_code == 400  # a loopback server answers to its loopback names only
    assert elsewhere.status_code == 404


def test_http_is_for_remote_agents() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "skillwire", "mcp", "examples/greeter", "--http", "9000"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 2
    assert "skillwire serve examples/greeter --mcp" in done.stderr


async def test_a_v03_agents_skills_are_tools(tmp_path: Path, v03_peer: Any) -> None:  # noqa: F811 - the fixture
    """An agent of the official a2a-sdk 0.3 (v0.3 card, JSON-RPC ``message/stream``), bridged the same way:
    its skill publishes no schema, so its tool takes the message's text, and the answer comes back as the
    tool's result."""
    async with bridge(tmp_path, v03_peer.url) as session:
        with anyio.fail_after(DEADLINE):
            listed = await session.list_tools()
            echoed = await session.call_tool("echo", {"text": "hello from MCP"})
    echo = {tool.name: tool for tool in listed.tools}["echo"]
    assert echo.input_schema["required"] == ["text"] and echo.output_schema is None
    assert not echoed.is_error, echoed
    texts = [c.text for c in echoed.content if isinstance(c, types.TextContent)]
    assert texts == ["echo: hello from MCP"]
