"""`skillwire mcp URL`: a running A2A agent's skills as MCP tools over stdio, called with skillwire.Client
and the credentials of --credential; the official MCP client on one side, a real skillwire server on the
other."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext

from conftest import RunningServer
from mcp_agent import secured
from skillwire import Client
from skillwire.protocol.states import TaskState
from skillwire.server.app import A2AApplication

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
