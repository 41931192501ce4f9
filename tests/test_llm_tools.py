"""A model-backed skill with tools (issue 30): providerConfig.tools names a local skill and an MCP tool made a
skill (tests/mcp_tools_server.py over stdio); the model is the provider stand-in speaking tool calls, in
OpenAI's and Ollama's formats; the agent is served by a real uvicorn server and called over A2A."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import RunningServer, serve_asgi
from llm_standin import ProviderStandIn, Reply, ToolCalls
from skillwire import Agent, Client, TaskState
from skillwire.errors import ManifestError
from skillwire.server.app import A2AApplication

TOOLS_SERVER = str(Path(__file__).with_name("mcp_tools_server.py"))
PLAN = """---
id: plan
name: Plan
description: Works a sum out with its tools.
tags: [llm]
inputSchema:
  type: object
  properties:
    question: {{type: string}}
  required: [question]
outputSchema:
  type: string
executionHints:
  timeoutSeconds: 30
providerConfig:
  vendor: {vendor}
  model: standin
  tools: [add, calc.multiply]
  toolSteps: {steps}
---
{{{{ question }}}}
"""


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProviderStandIn]:
    provider = ProviderStandIn()
    provider.url, stop = serve_asgi(provider)
    monkeypatch.setenv("OLLAMA_HOST", provider.url)
    monkeypatch.setenv("OPENAI_BASE_URL", provider.url + "/v1")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    yield provider
    stop()


def planner(folder: Path, vendor: str = "openai", steps: int = 4) -> Agent:
    (folder / "plan").mkdir(parents=True)
    (folder / "plan" / "SKILL.md").write_text(PLAN.format(vendor=vendor, steps=steps))
    (folder / "agent.yaml").write_text(
        "name: Planner\n"
        "description: Plans with tools\n"
        f"mcpServers:\n  - command: [{sys.executable!r}, {TOOLS_SERVER!r}]\n    name: calc\n"
    )
    agent = Agent.from_folder(folder)

    @agent.skill(tags=["math"])
    def add(a: int, b: int) -> int:
        """Adds two integers."""
        return a + b

    return agent


def history_texts(task: Any) -> list[str]:
    return [m.text() for m in task.history if m.role.name == "AGENT"]


@pytest.mark.parametrize("vendor", ["openai", "ollama"])
async def test_a_model_calls_a_local_skill_and_an_mcp_tool(
    tmp_path: Path, standin: ProviderStandIn, serve: Callable[[A2AApplication], RunningServer], vendor: str
) -> None:
    agent = planner(tmp_path, vendor)
    server = serve(agent.asgi(store="memory://"))
    standin.will(
        ToolCalls([("add", {"a": 2, "b": 3})]),
        ToolCalls([("calc_multiply", {"a": 5, "b": 4})]),
        Reply("The answer is 20."),
    )
    async with await Client.connect(server.url) as client:
        said: list[str] = []
        async for event in client.stream(skill="plan", data={"question": "(2 + 3) * 4?"}):
            update = event.status_update
            if update is not None and update.status.message is not None:
                said.append(update.status.message.text())
        (listed,) = (await client.list_tasks()).tasks
        task = await client.get_task(listed.id)
    assert task.status.state is TaskState.COMPLETED
    assert task.text == "The answer is 20."
    assert said == ["Calling add", "Calling calc.multiply"]  # each tool call is a status update

    first, second, third = (request.body for request in standin.wait_for_requests(3))
    offered = {tool["function"]["name"]: tool["function"] for tool in first["tools"]}
    assert set(offered) == {"add", "calc_multiply"}
    assert offered["add"]["parameters"] == agent.registry.get("add").input_schema  # type: ignore[union-attr]
    assert offered["calc_multiply"]["description"] == "Multiplies two integers."
    # the results go back to the model, in its wire format
    assert second["messages"][-1]["content"] == "5"
    assert json.loads(third["messages"][-1]["content"]) == {"result": 20}
    if vendor == "openai":
        assert second["messages"][-2]["tool_calls"][0]["function"] == {
            "name": "add",
            "arguments": '{"a":2,"b":3}',
        }
        assert second["messages"][-1]["tool_call_id"] == "call_0"
    else:
        assert second["messages"][-2]["tool_calls"][0]["function"] == {
            "name": "add",
            "arguments": {"a": 2, "b": 3},
        }
        assert second["messages"][-1]["tool_name"] == "add"


async def test_the_step_budget_ends_a_model_that_keeps_calling(
    tmp_path: Path, standin: ProviderStandIn
) -> None:
    agent = planner(tmp_path, steps=2)
    standin.will(*[ToolCalls([("add", {"a": 1, "b": 1})])] * 3)
    async with agent.test_client() as client:
        task = await client.send(skill="plan", data={"question": "loop"})
    assert task.status.state is TaskState.FAILED
    assert task.status.message is not None
    assert "still calling tools after 2 turns" in task.status.message.text()
    assert len(standin.requests) == 3


async def test_a_tool_error_goes_back_to_the_model(tmp_path: Path, standin: ProviderStandIn) -> None:
    agent = planner(tmp_path)
    standin.will(ToolCalls([("add", {"a": "two"}), ("nowhere", {})]), Reply("I could not add."))
    async with agent.test_client() as client:
        task = await client.send(skill="plan", data={"question": "add two"})
    assert task.text == "I could not add."
    results = [m for m in standin.wait_for_requests(2)[1].body["messages"] if m["role"] == "tool"]
    assert json.loads(results[0]["content"])["error"].startswith("Invalid input for add: ")
    assert json.loads(results[1]["content"]) == {"error": "there is no tool 'nowhere'"}


def test_tools_must_be_skill_ids(tmp_path: Path) -> None:
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "SKILL.md").write_text(
        PLAN.format(vendor="openai", steps=2).replace("tools: [add, calc.multiply]", "tools: add")
    )
    with pytest.raises(ManifestError, match=r"providerConfig\.tools"):
        Agent.from_folder(tmp_path)


async def test_a_model_calls_a_remote_agents_skill(
    tmp_path: Path,
    standin: ProviderStandIn,
    serve: Callable[[A2AApplication], RunningServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mcp_agent import secured

    remote = serve(secured({"ada": "k-ada"}).asgi(store="memory://"))
    monkeypatch.setenv("PARTNER_KEY", "k-ada")
    manifest = PLAN.format(vendor="openai", steps=2).replace(
        "tools: [add, calc.multiply]",
        f"tools:\n    - {{agent: {remote.url!r}, skill: shout, credentialsEnv: [{{scheme: apiKey, variable: PARTNER_KEY}}]}}",
    )
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "SKILL.md").write_text(manifest)
    agent = Agent.from_folder(tmp_path)
    standin.will(ToolCalls([("shout", {"text": "hello"}), ("shout", {"text": 1})]), Reply("It said HELLO."))
    async with agent.test_client() as client:
        task = await client.send(skill="plan", data={"question": "shout hello"})
    assert task.text == "It said HELLO."
    first, second = (request.body for request in standin.wait_for_requests(2))
    (offered,) = first["tools"]
    assert offered["function"]["parameters"] == {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }  # the remote card's published schema
    results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert results[0] == "HELLO"
    assert "refused the call" in json.loads(results[1])["error"]  # the remote agent validated the input
    async with await Client.connect(remote.url, headers={"X-API-Key": "k-ada"}) as partner:
        assert [t.status.state for t in (await partner.list_tasks()).tasks] == [TaskState.COMPLETED]


async def test_a_remote_tool_without_its_credential_variable(
    tmp_path: Path, standin: ProviderStandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PARTNER_KEY", raising=False)
    manifest = PLAN.format(vendor="openai", steps=2).replace(
        "tools: [add, calc.multiply]",
        "tools:\n    - {agent: 'http://127.0.0.1:9', skill: shout, credentialsEnv: [{scheme: apiKey, variable: PARTNER_KEY}]}",
    )
    (tmp_path / "plan").mkdir()
    (tmp_path / "plan" / "SKILL.md").write_text(manifest)
    async with Agent.from_folder(tmp_path).test_client() as client:
        task = await client.send(skill="plan", data={"question": "?"})
    assert task.status.state is TaskState.FAILED
    assert task.status.message is not None
    assert (
        task.status.message.text() == "The skill's model provider is not configured correctly on this server."
    )
    assert standin.requests == []  # nothing was asked of the model
