"""`skillwire serve --mcp` (``agent.asgi(mcp=True)``): the skills as MCP tools over Streamable HTTP at
``/mcp``, beside the A2A routes of a real uvicorn server, behind the same API key, browser guard and body
budget; driven by the official MCP client, with the tasks read back over A2A (ListTasks)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from conftest import RunningServer
from mcp_agent import secured
from skillwire import Client
from skillwire.protocol.limits import Limits
from skillwire.protocol.states import TaskState
from skillwire.server.app import A2AApplication

KEY = "k-ada"
HEADERS = {"X-API-Key": KEY}
DEADLINE = 30
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def server(serve: Callable[[A2AApplication], RunningServer]) -> RunningServer:
    agent = secured({"ada": KEY, "bob": "k-bob"})
    return serve(agent.asgi(store="memory://", mcp=True, limits=Limits(max_body_bytes=64_000)))


@asynccontextmanager
async def mcp_session(
    url: str, headers: dict[str, str] | None = None, elicitation: Callable[..., Any] | None = None
) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(headers=headers if headers is not None else HEADERS) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write, elicitation_callback=elicitation) as session,
    ):
        with anyio.fail_after(DEADLINE):
            await session.initialize()
        yield session


async def a2a_tasks(url: str) -> list[Any]:
    async with await Client.connect(url, headers=HEADERS) as client:
        return list((await client.list_tasks()).tasks)


async def test_mcp_beside_a2a_lists_and_calls_the_skills(server: RunningServer) -> None:
    agent = secured({"ada": KEY})
    async with mcp_session(server.url) as session:
        with anyio.fail_after(DEADLINE):
            listed = await session.list_tools()
            added = await session.call_tool("add", {"a": 2, "b": 40})
            refused = await session.call_tool("refuse", {})
    assert {t.name: (t.input_schema, t.output_schema) for t in listed.tools} == {
        s.id: (s.input_schema, s.output_schema if (s.output_schema or {}).get("type") == "object" else None)
        for s in agent.served_skills()
    }
    assert added.structured_content == {"sum": 42}
    assert refused.is_error and refused.content[0].text == "The vault is closed on Sundays."  # type: ignore[union-attr]
    tasks = await a2a_tasks(server.url)
    assert sorted(t.status.state.name for t in tasks) == ["COMPLETED", "FAILED"]


async def test_without_credentials_mcp_is_refused_like_a2a(server: RunningServer) -> None:
    async with httpx.AsyncClient() as http:
        bare = await http.post(f"{server.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        wrong = await http.post(
            f"{server.url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "X-API-Key": "no"}
        )
        a2a = await http.post(
            server.url + "/", json={"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
        )
        good = await http.post(f"{server.url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **HEADERS})
    assert bare.status_code == 401
    assert wrong.status_code == 401
    assert "www-authenticate" in bare.headers
    assert a2a.status_code == 401  # the A2A route refuses the same caller the same way
    assert good.status_code == 200
    with pytest.raises(Exception):  # noqa: B017 - the SDK's error for a 401 is its own
        async with mcp_session(server.url, headers={}) as session:
            await session.list_tools()


async def test_browser_guard_and_body_budget_apply_to_mcp(server: RunningServer) -> None:
    async with httpx.AsyncClient() as http:
        cross_site = await http.post(
            f"{server.url}/mcp",
            json=INITIALIZE,
            headers={
                **MCP_HEADERS,
                **HEADERS,
                "Origin": "https://evil.example",
                "Sec-Fetch-Site": "cross-site",
            },
        )
        huge = await http.post(
            f"{server.url}/mcp",
            content=b'{"pad": "' + b"x" * 70_000 + b'"}',
            headers={**MCP_HEADERS, **HEADERS},
        )
    assert cross_site.status_code == 403
    assert huge.status_code == 413
    assert huge.json()["error"]["details"][0]["metadata"]["budget"] == "max_body_bytes"


async def test_progress_elicitation_and_cancel_over_http(server: RunningServer) -> None:
    seen: list[str | None] = []
    started = anyio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append(message)
        if message == "waiting":
            started.set()

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": f"Ada ({params.message})"})

    async with mcp_session(server.url, elicitation=elicit) as session:
        with anyio.fail_after(DEADLINE):
            counted = await session.call_tool("count", {"n": 2}, progress_callback=progress)
            answered = await session.call_tool("interview", {})
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    await session.call_tool("wait", {}, progress_callback=progress)

                group.start_soon(call)
                await started.wait()
                group.cancel_scope.cancel()
    assert seen[:4] == ["Counting down from 2", "2...", "1...", "Liftoff!"]
    assert [c.text for c in counted.content] == ["2...1...", "Liftoff!"]  # type: ignore[union-attr]
    assert answered.content[0].text == '{"name": "Ada (What is your name?)"}'  # type: ignore[union-attr]
    async with await Client.connect(server.url, headers=HEADERS) as client:
        tasks = (await client.list_tasks()).tasks
        (waiting,) = [t for t in tasks if (t.metadata or {}).get("skillId") == "wait"]
        # the cancel reaches the task once the client stopped waiting: a long-poll until it ends, capped
        ended = await client.wait(waiting.id, timeout=DEADLINE)
    assert ended.status.state is TaskState.CANCELED
    assert sorted(t.status.state.name for t in tasks if t.id != waiting.id) == ["COMPLETED", "COMPLETED"]


@pytest.mark.parametrize(("flag", "env"), [(["--mcp"], None), ([], "1"), (["--no-mcp"], "1")])
def test_serve_mcp_flag_and_env(monkeypatch: pytest.MonkeyPatch, flag: list[str], env: str | None) -> None:
    from pathlib import Path

    from skillwire.cli.assembly import application
    from skillwire.cli.main import _parse

    if env is not None:
        monkeypatch.setenv("SKILLWIRE_MCP", env)
    target = str(Path(__file__).with_name("mcp_agent.py"))
    _, app = application(_parse(["serve", target, "--store", "memory://", *flag]))
    assert [mount.path for mount in app.mounts] == ([] if "--no-mcp" in flag else ["/mcp"])


async def test_a_session_belongs_to_the_caller_that_opened_it(server: RunningServer) -> None:
    version = {"MCP-Protocol-Version": "2025-11-25"}
    async with httpx.AsyncClient() as http:
        opened = await http.post(f"{server.url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **HEADERS})
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], **version}
        as_bob = await http.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            headers={**MCP_HEADERS, "X-API-Key": "k-bob", **session},
        )
        as_ada = await http.post(
            f"{server.url}/mcp",
            json={"jsonrpc": "2.0", "method": "notifications/initialized"},
            headers={**MCP_HEADERS, **HEADERS, **session},
        )
    assert as_bob.status_code == 404
    assert as_bob.json()["error"]["message"] == "Session not found"
    assert as_ada.status_code == 202  # the owner goes on


def test_serve_reload_hands_mcp_to_its_processes() -> None:
    from pathlib import Path

    from skillwire.cli.main import _parse
    from skillwire.cli.serve_options import as_env

    target = str(Path(__file__).with_name("mcp_agent.py"))
    assert as_env(_parse(["serve", target, "--mcp"]))["SKILLWIRE_MCP"] == "1"
    assert as_env(_parse(["serve", target]))["SKILLWIRE_MCP"] == "0"
