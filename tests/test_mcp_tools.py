"""MCP tools as skills: an MCP server written with the official SDK (tests/mcp_tools_server.py), over stdio
and over Streamable HTTP, wrapped as skills of an agent served on a real uvicorn server and called through
the A2A JSON-RPC binding."""

from __future__ import annotations

import logging
import socket
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import RunningServer, serve_asgi
from skillwire import Agent, Client, McpServer
from skillwire.errors import ManifestError
from skillwire.server.app import A2AApplication

TOOLS_SERVER = str(Path(__file__).with_name("mcp_tools_server.py"))
STDIO = McpServer(command=[sys.executable, TOOLS_SERVER], name="calc", env=["MCP_TEST_SECRET"])


def agent_with(*servers: McpServer) -> Agent:
    agent = Agent("Tools", "An agent whose skills are MCP tools", mcp_servers=list(servers))

    @agent.skill(tags=["local"])
    def hello(name: str) -> str:
        """Says hello."""
        return f"Hello {name}"

    return agent


async def rpc_send(url: str, skill: str, data: dict[str, Any]) -> dict[str, Any]:
    """SendMessage over JSON-RPC: the whole answer."""
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"data": data}],
        "metadata": {"skillId": skill},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    async with httpx.AsyncClient(timeout=60) as http:
        answer: dict[str, Any] = (
            await http.post(url + "/", json=body, headers={"A2A-Version": "1.0"})
        ).json()
    return answer


async def send(url: str, skill: str, data: dict[str, Any]) -> dict[str, Any]:
    """SendMessage over JSON-RPC: the task it answers."""
    answer = await rpc_send(url, skill, data)
    assert "result" in answer, answer
    task: dict[str, Any] = answer["result"]["task"]
    return task


def status_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in task["status"].get("message", {}).get("parts", []))


async def test_stdio_server_tools_are_skills_called_over_jsonrpc(
    serve: Callable[[A2AApplication], RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TEST_SECRET", "s3cret")
    monkeypatch.setenv("MCP_TEST_HIDDEN", "not passed")
    agent = agent_with(STDIO)
    server = serve(agent.asgi(store="memory://"))
    skills = {skill.id: skill for skill in agent.registry}
    assert set(skills) == {
        "hello",
        "calc.multiply",
        "calc.lookup",
        "calc.steps",
        "calc.broken",
        "calc.secret",
    }
    multiply = skills["calc.multiply"]
    assert multiply.input_schema is not None and multiply.input_schema["required"] == ["a", "b"]
    assert (
        multiply.output_schema is not None
        and multiply.output_schema["properties"]["result"]["type"] == "integer"
    )
    assert skills["calc.lookup"].read_only and not multiply.read_only
    assert multiply.agent_skill.tags == ["mcp", "calc"]

    done = await send(server.url, "calc.multiply", {"a": 6, "b": 7})
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"][0]["data"] == {"result": 42}
    assert (await send(server.url, "calc.lookup", {"key": "sky"}))["artifacts"][0]["parts"][0][
        "text"
    ] == "blue"
    assert (await send(server.url, "calc.secret", {}))["artifacts"][0]["parts"][0]["text"] == "s3cret"
    failed = await send(server.url, "calc.broken", {})
    assert failed["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(failed) == "Error executing tool broken: the gauge is broken"  # the SDK's words
    refused = await rpc_send(server.url, "calc.multiply", {"a": "six"})
    assert refused["error"]["code"] == -32602  # the tool's inputSchema, enforced by the skill before any call

    async with await Client.connect(server.url) as client:
        said = [
            event.status_update.status.message.text()
            async for event in client.stream(skill="calc.steps", data={"n": 2})
            if event.status_update is not None and event.status_update.status.message is not None
        ]
    assert said == ["step 1 of 2", "step 2 of 2"]


async def test_http_server_tools_and_a_server_that_goes_down(
    serve: Callable[[A2AApplication], RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp_tools_server import server as tools

    monkeypatch.setenv("MCP_TEST_TOKEN", "t0ken")
    url, stop = serve_asgi(tools.streamable_http_app())
    remote = McpServer(url=f"{url}/mcp", headers={"Authorization": "Bearer ${MCP_TEST_TOKEN}"}, timeout=10)
    agent = agent_with(remote)
    server = serve(agent.asgi(store="memory://"))
    assert (await send(server.url, "multiply", {"a": 2, "b": 21}))["artifacts"][0]["parts"][0]["data"] == {
        "result": 42
    }
    stop()
    down = await send(server.url, "multiply", {"a": 2, "b": 21})
    assert down["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(down).startswith(f"The MCP server {url}/mcp could not be reached")
    # the agent and its other skills go on
    assert (await send(server.url, "hello", {"name": "Ada"}))["artifacts"][0]["parts"][0][
        "text"
    ] == "Hello Ada"


def test_a_server_down_at_start_adds_no_skill_and_does_not_stop_the_agent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    agent = agent_with(McpServer(url=f"http://127.0.0.1:{port}/mcp", name="gone", timeout=5))
    with caplog.at_level(logging.WARNING, logger="skillwire.mcp"), agent.test_client() as client:
        assert client.send(skill="hello", data={"name": "Ada"}).text == "Hello Ada"
    assert [skill.id for skill in agent.registry] == ["hello"]
    assert "MCP server gone: cannot list its tools" in caplog.text


def test_mcp_servers_in_agent_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TEST_SECRET", "from yaml")
    (tmp_path / "agent.yaml").write_text(
        "name: Calc\n"
        "description: Tools from agent.yaml\n"
        "mcpServers:\n"
        f"  - command: [{sys.executable!r}, {TOOLS_SERVER!r}]\n"
        "    name: calc\n"
        "    env: [MCP_TEST_SECRET]\n"
    )
    agent = Agent.from_folder(tmp_path)
    assert agent.mcp_servers == [STDIO]
    with agent.test_client() as client:
        assert client.send(skill="calc.secret", data={}).text == "from yaml"
        assert client.send(skill="calc.multiply", data={"a": 3, "b": 3}).data == {"result": 9}


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("  - name: x\n", "needs one of command"),
        ("  - command: python\n", "command must be a list of strings"),
        ("  - url: http://x/mcp\n    token: abc\n", "unknown key 'token'"),
        ("  - url: http://x/mcp\n    timeout: 0\n", "timeout must be a number of seconds above 0"),
    ],
)
def test_bad_mcp_servers_entries_are_refused(tmp_path: Path, entry: str, why: str) -> None:
    (tmp_path / "agent.yaml").write_text("name: Calc\nmcpServers:\n" + entry)
    with pytest.raises(ManifestError, match=why):
        Agent.from_folder(tmp_path)


def test_mcp_server_needs_one_of_command_or_url() -> None:
    from skillwire import SkillwireError

    with pytest.raises(SkillwireError, match="one of command"):
        McpServer()
    with pytest.raises(SkillwireError, match="is a list"):
        McpServer(command="python server.py")  # type: ignore[arg-type]


async def test_a_missing_credential_fails_the_task_with_its_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_tools_server import server as tools

    url, stop = serve_asgi(tools.streamable_http_app())
    try:
        monkeypatch.setenv("MCP_TEST_TOKEN", "t0ken")
        agent = agent_with(McpServer(url=f"{url}/mcp", headers={"Authorization": "Bearer ${MCP_TEST_TOKEN}"}))
        agent.load_mcp_tools()
        monkeypatch.delenv("MCP_TEST_TOKEN")
        async with agent.test_client() as client:
            task = await client.send(skill="lookup", data={"key": "sky"})
    finally:
        stop()
    assert task.status.state.name == "FAILED"
    assert task.status.message is not None
    assert "the environment variable MCP_TEST_TOKEN is not set" in task.status.message.text()


def test_skills_list_shows_the_tools_of_mcp_servers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from skillwire.cli.main import main

    (tmp_path / "agent.yaml").write_text(
        f"name: Calc\nmcpServers:\n  - command: [{sys.executable!r}, {TOOLS_SERVER!r}]\n    name: calc\n"
    )
    assert main(["skills", "list", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    assert "calc.multiply: Multiplies two integers. [mcp, calc]" in listed
    assert '  input: {"properties":{"a":' in listed
