"""`skillwire mcp DIR`: an agent's skills as MCP tools over stdio, driven by the official MCP client
(``mcp.ClientSession`` over ``stdio_client``), with the tasks kept in a SQLite file the test reads back over
A2A afterwards."""

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

from skillwire.cli.targets import load_agent
from skillwire.mcp.tools import TEXT_INPUT
from skillwire.protocol.states import TaskState

ROOT = Path(__file__).resolve().parents[1]
AGENT = str(ROOT / "tests" / "mcp_agent.py")
EXAMPLES = ROOT / "examples"
#: The most any one exchange with the server may take (a cold start of the server process included).
DEADLINE = 60


@asynccontextmanager
async def mcp_session(
    tmp_path: Path, target: str = AGENT, *extra: str, elicitation: Callable[..., Any] | None = None
) -> AsyncIterator[ClientSession]:
    store = f"sqlite:///{tmp_path / 'tasks.db'}"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "skillwire", "mcp", target, "--store", store, *extra],
        cwd=str(ROOT),
    )
    with (tmp_path / "stderr.txt").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write, elicitation_callback=elicitation) as session,
        ):
            with anyio.fail_after(DEADLINE):
                await session.initialize()
            yield session


def stored_tasks(tmp_path: Path, target: str = AGENT) -> list[Any]:
    """The tasks the MCP server kept, listed over A2A (ListTasks) by the same agent on the same store."""
    agent = load_agent(target)
    with agent.test_client(store=f"sqlite:///{tmp_path / 'tasks.db'}") as client:
        return list(client.list_tasks().tasks)


def test_importing_skillwire_does_not_import_mcp() -> None:
    code = "import sys, skillwire, skillwire.mcp; assert 'mcp' not in sys.modules, 'mcp was imported'"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


async def test_tools_are_the_skills_with_their_exact_schemas(tmp_path: Path) -> None:
    agent = load_agent(AGENT)
    async with mcp_session(tmp_path) as session:
        with anyio.fail_after(DEADLINE):
            listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) == {skill.id for skill in agent.served_skills()}
    for skill in agent.served_skills():
        tool = tools[skill.id]
        assert tool.description == skill.agent_skill.description
        assert tool.input_schema == skill.input_schema
        object_output = (skill.output_schema or {}).get("type") == "object"
        assert tool.output_schema == (skill.output_schema if object_output else None)
        assert tool.annotations is not None and tool.annotations.read_only_hint is skill.read_only
        assert tool.meta == {"skillwire/tags": skill.agent_skill.tags}


async def test_results_data_text_file_and_error(tmp_path: Path) -> None:
    async with mcp_session(tmp_path) as session:
        with anyio.fail_after(DEADLINE):
            await session.list_tools()  # the client validates structured results against outputSchema
            added = await session.call_tool("add", {"a": 2, "b": 3})
            shouted = await session.call_tool("shout", {"text": "hi"})
            report = await session.call_tool("report", {})
            refused = await session.call_tool("refuse", {})
            invalid = await session.call_tool("add", {"a": "two"})
    assert not added.is_error
    assert added.structured_content == {"sum": 5}
    assert [c.text for c in added.content if isinstance(c, types.TextContent)] == ['{"sum": 5}']
    assert not shouted.is_error and shouted.structured_content is None
    assert [c.text for c in shouted.content if isinstance(c, types.TextContent)] == ["HI"]
    (embedded,) = report.content
    assert isinstance(embedded, types.EmbeddedResource)
    assert isinstance(embedded.resource, types.BlobResourceContents)
    assert embedded.resource.mime_type == "text/plain"
    assert embedded.resource.uri.endswith("/report/report.txt")
    import base64

    assert base64.b64decode(embedded.resource.blob) == b"all good\n"
    assert refused.is_error
    assert [c.text for c in refused.content if isinstance(c, types.TextContent)] == [
        "The vault is closed on Sundays."
    ]
    assert invalid.is_error
    assert "a" in invalid.content[0].text  # type: ignore[union-attr]
    # the call refused for its input made no task; the others are stored, as A2A calls' tasks are
    states = {(t.metadata or {}).get("skillId"): t.status.state for t in stored_tasks(tmp_path)}
    done = TaskState.COMPLETED
    assert states == {"add": done, "shout": done, "report": done, "refuse": TaskState.FAILED}


async def test_progress_notifications_follow_the_task(tmp_path: Path) -> None:
    seen: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, message))

    async with mcp_session(tmp_path) as session:
        with anyio.fail_after(DEADLINE):
            result = await session.call_tool("count", {"n": 3}, progress_callback=progress)
    assert not result.is_error
    assert [text for _, text in seen] == ["Counting down from 3", "3...", "2...", "1...", "Liftoff!"]
    assert [value for value, _ in seen] == sorted(value for value, _ in seen)
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    assert texts == ["3...2...1...", "Liftoff!"]


async def test_cancel_from_the_host_cancels_the_task(tmp_path: Path) -> None:
    started = anyio.Event()

    async def progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    async with mcp_session(tmp_path) as session:
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    await session.call_tool("wait", {}, progress_callback=progress)

                group.start_soon(call)
                await started.wait()
                group.cancel_scope.cancel()
            # the server goes on serving after a canceled call
            assert (await session.call_tool("add", {"a": 1, "b": 1})).structured_content == {"sum": 2}
    waited = [t for t in stored_tasks(tmp_path) if t.status.state is not TaskState.COMPLETED]
    assert [t.status.state for t in waited] == [TaskState.CANCELED]


async def test_a_question_is_asked_by_elicitation(tmp_path: Path) -> None:
    asked: list[str] = []

    async def elicit(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"answer": "Ada"})

    async with mcp_session(tmp_path, elicitation=elicit) as session:
        with anyio.fail_after(DEADLINE):
            await session.list_tools()
            result = await session.call_tool("interview", {})
    assert asked == ["What is your name?"]
    assert not result.is_error
    assert result.content[0].text == '{"name": "Ada"}'  # type: ignore[union-attr]
    assert result.structured_content == {"name": "Ada"}  # data, though the skill declares no outputSchema


async def test_a_question_without_elicitation_is_a_clear_error(tmp_path: Path) -> None:
    async with mcp_session(tmp_path) as session:
        with anyio.fail_after(DEADLINE):
            result = await session.call_tool("interview", {})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "What is your name?" in text and "does not support elicitation" in text
    assert [t.status.state for t in stored_tasks(tmp_path)] == [TaskState.CANCELED]


async def test_a_declined_question_cancels_the_task(tmp_path: Path) -> None:
    async def decline(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with mcp_session(tmp_path, elicitation=decline) as session:
        with anyio.fail_after(DEADLINE):
            result = await session.call_tool("interview", {})
    assert result.is_error and "declined" in result.content[0].text  # type: ignore[union-attr]


async def test_read_only_mode_hides_and_refuses_the_same_skills(tmp_path: Path) -> None:
    async with mcp_session(tmp_path, AGENT, "--read-only") as session:
        with anyio.fail_after(DEADLINE):
            listed = await session.list_tools()
            with pytest.raises(Exception, match="Unknown tool: shout"):
                await session.call_tool("shout", {"text": "hi"})
            added = await session.call_tool("add", {"a": 1, "b": 2})
    assert [tool.name for tool in listed.tools] == ["add"]
    assert added.structured_content == {"sum": 3}


@pytest.mark.parametrize(
    ("example", "tool", "arguments", "expected"),
    [
        ("greeter", "greet", {"name": "Ada"}, "Hi Ada!"),
        ("echo_skill", "echo", {"text": "hello"}, "hello"),
        ("workshop", "countdown", {"from": 2}, "Liftoff!"),
    ],
)
async def test_example_skills_over_stdio(
    tmp_path: Path, example: str, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    target = str(EXAMPLES / example)
    agent = load_agent(target)
    async with mcp_session(tmp_path, target) as session:
        with anyio.fail_after(DEADLINE):
            listed = await session.list_tools()
            result = await session.call_tool(tool, arguments)
    assert {t.name: t.input_schema for t in listed.tools} == {
        s.id: s.input_schema or TEXT_INPUT
        for s in agent.served_skills()  # none: the message text
    }
    assert not result.is_error, result
    assert result.content[-1].text == expected  # type: ignore[union-attr]
