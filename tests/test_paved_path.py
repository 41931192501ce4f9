"""Issue 11, the paved path: text to a skill, addressing a skill from Python, and a MockAgent that routes as
the real skill router does. Everything runs against real uvicorn servers (the ``serve`` fixture)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from conftest import EXAMPLES, RunningServer
from skillwire import Agent, Client, SkillContext, SkillwireError, SyncClient, Task
from skillwire.errors import InvalidParamsError, ManifestError
from skillwire.server.app import A2AApplication
from skillwire.skills.manifest import SkillCard
from skillwire.skills.registry import implied_text_input, skill_from_function
from skillwire.testing import MockAgent
from skillwire.types import Part

Serve = Callable[[A2AApplication], RunningServer]


def artifact_text(result: Any) -> str:
    assert isinstance(result, Task), result
    return "".join(p.text for p in result.artifacts[0].parts if isinstance(p.text, str))


def artifact_data(result: Any) -> Any:
    assert isinstance(result, Task), result
    return result.artifacts[0].parts[0].data


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


class Trip(msgspec.Struct):
    city: str
    days: int


class Order(msgspec.Struct):
    item: str
    quantity: int = 1


def shop() -> Agent:
    """Two skills (so a message must name one) with several kinds of input."""
    agent = Agent("Shop", "Converts, plans and orders.", default_input_modes=["*/*"])  # files too

    @agent.skill(
        tags=["shop"],
        input_schema={
            "type": "object",
            "properties": {"amount": {"type": "number"}, "to": {"type": "string"}},
            "required": ["amount", "to"],
        },
    )
    async def convert(params: dict[str, Any], ctx: SkillContext) -> dict[str, Any]:
        """Converts an amount."""
        return {"converted": params["amount"] * 2, "to": params["to"]}

    @agent.skill(tags=["shop"])
    async def plan(params: Trip, ctx: SkillContext) -> str:
        """Plans a trip."""
        return f"{params.days} days in {params.city}"

    @agent.skill(tags=["shop"])
    async def order(params: Order, ctx: SkillContext) -> str:
        """Orders an item; text is the item (implied: the one required string)."""
        return f"{params.quantity} x {params.item}"

    @agent.skill(
        tags=["shop"],
        input_schema={
            "type": "object",
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        },
        text_input="query",
    )
    async def search(params: dict[str, Any], ctx: SkillContext) -> dict[str, Any]:
        """Searches; text is the query (declared)."""
        return params

    @agent.skill(tags=["shop"])
    async def inspect(params: Any, ctx: SkillContext) -> dict[str, Any]:
        """Describes the message it got."""
        return {
            "params": params,
            "files": [[p.filename, p.media_type, b64(p.raw)] for p in ctx.files if isinstance(p.raw, bytes)],
            "parts": len(ctx.message.parts),
        }

    return agent


@pytest.fixture
def greeter(serve: Serve) -> RunningServer:
    return serve(Agent.from_folder(EXAMPLES / "greeter").asgi(store="memory://"))


@pytest.fixture
def shop_url(serve: Serve) -> str:
    return serve(shop().asgi(store="memory://")).url


# -- text to a skill ------------------------------------------------------------------------------------


async def test_readme_greeter_takes_plain_text_as_its_name(greeter: RunningServer) -> None:
    async with await Client.connect(greeter.url) as client:
        assert artifact_text(await client.send("Ada")) == "Hi Ada!"
        assert artifact_text(await client.send("Ada", skill="greet")) == "Hi Ada!"
        formal = await client.send(skill="greet", data={"name": "Ada", "style": "formal"})
        assert artifact_text(formal) == "Good day, Ada. It is a pleasure to meet you."


def test_the_readme_manifest_is_the_greeter_manifest() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    card = SkillCard.parse((EXAMPLES / "greeter" / "greet" / "SKILL.md").read_text(encoding="utf-8"))
    assert card.text_input == "name" and card.input_schema is not None
    assert card.input_schema["required"] == ["name"]
    assert "  required: [name]\ntextInput: name" in readme


async def test_text_fills_the_declared_or_the_implied_property(shop_url: str) -> None:
    async with await Client.connect(shop_url) as client:
        assert artifact_text(await client.send("widget", skill="order")) == "1 x widget"
        assert artifact_data(await client.send("cheap flights", skill="search")) == {"query": "cheap flights"}
        # data still wins over text
        assert artifact_data(await client.send(skill="search", data={"limit": 3})) == {"limit": 3}


async def test_a_refused_text_message_says_how_text_arrives_and_how_to_send_data(shop_url: str) -> None:
    async with await Client.connect(shop_url) as client:
        with pytest.raises(InvalidParamsError) as refused:
            await client.send("Paris for a week", skill="plan")
        with pytest.raises(InvalidParamsError) as refused_data:
            await client.send(skill="plan", data={"city": "Paris"})
    message = str(refused.value)
    assert "Invalid input for skill 'plan'" in message
    assert 'arrives as {"text": "Paris for a week"}' in message
    assert "skillwire send URL --skill plan --data '{...}'" in message
    assert "client.send(skill='plan', data={...})" in message
    assert "arrives as" not in str(refused_data.value)  # the caller sent data: no hint about text


async def test_the_hint_shows_the_property_text_filled(greeter: RunningServer) -> None:
    async with await Client.connect(greeter.url) as client:
        with pytest.raises(InvalidParamsError, match=r'arrives as \{"name": "x{40}\.\.\."\}'):
            await client.send("x" * 101)  # longer than maxLength


@pytest.mark.parametrize(
    ("schema", "implied"),
    [
        ({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}, "name"),
        (msgspec.json.schema(Order), "item"),
        ({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}, None),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "required": ["a", "b"],
            },
            None,
        ),
        ({"type": "object", "properties": {"a": {"type": "string"}}}, None),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "anyOf": [{}]}, None),
        ({"properties": {"a": {"type": "string"}}, "required": ["a"]}, None),
        (None, None),
    ],
)
def test_implied_text_input(schema: dict[str, Any] | None, implied: str | None) -> None:
    assert implied_text_input(schema) == implied


def test_text_input_must_name_an_input_property() -> None:
    head = "---\nid: s\nname: S\ndescription: d.\ntags: [t]\n"
    schema = "inputSchema: {type: object, properties: {name: {type: string}}}\n"
    with pytest.raises(ManifestError, match="textInput: 'nmae' is not a property of inputSchema"):
        SkillCard.parse(head + schema + "textInput: nmae\n---\n")
    with pytest.raises(ManifestError, match="textInput: expected a non-empty string"):
        SkillCard.parse(head + "textInput: 3\n---\n")
    assert SkillCard.parse(head + schema + "textInput: name\n---\n").text_input == "name"

    async def handler(params: Any, ctx: SkillContext) -> None:
        """Handles."""

    assert skill_from_function(handler, id="h", tags=["t"], text_input="q").text_input == "q"
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    assert skill_from_function(handler, id="h", tags=["t"], input_schema=schema, text_input="name").text_input
    with pytest.raises(SkillwireError, match="text_input='nmae' is not a property of its input schema"):
        skill_from_function(handler, id="h", tags=["t"], input_schema=schema, text_input="nmae")


# -- addressing a skill from Python ---------------------------------------------------------------------


async def test_send_and_stream_address_a_skill_with_data(shop_url: str) -> None:
    async with await Client.connect(shop_url) as client:
        task = await client.send(skill="convert", data={"amount": 5, "to": "EUR"})
        assert artifact_data(task) == {"converted": 10, "to": "EUR"}
        events = [e async for e in client.stream(skill="convert", data={"amount": 1, "to": "USD"})]
        updates = [e.artifact_update for e in events if e.artifact_update is not None]
        assert updates[0].artifact.parts[0].data == {"converted": 2, "to": "USD"}
        with pytest.raises(InvalidParamsError, match="skillId is required"):
            # request metadata is not where the router reads the skill
            await client.send("x", metadata={"skillId": "convert"})
        with pytest.raises(ValueError, match="nothing to send"):
            await client.send(skill="convert")


async def test_parts_and_files_are_sent_after_the_data(shop_url: str, tmp_path: Path) -> None:
    report = tmp_path / "report.txt"
    report.write_bytes(b"all good")
    async with await Client.connect(shop_url) as client:
        task = await client.send(
            "look",
            skill="inspect",
            data={"k": 1},
            parts=[Part(text="more")],
            files=[report, ("pic.png", b"\x89PNG", "image/png")],
        )
    got = artifact_data(task)
    assert got["params"] == {"k": 1} and got["parts"] == 5
    assert got["files"] == [
        ["report.txt", "text/plain", "YWxsIGdvb2Q="],
        ["pic.png", "image/png", "iVBORw=="],
    ]


def test_sync_client_takes_the_same_arguments(shop_url: str, tmp_path: Path) -> None:
    note = tmp_path / "note.json"
    note.write_text("{}")
    with SyncClient.connect(shop_url) as client:
        assert artifact_data(client.send(skill="convert", data={"amount": 2, "to": "GBP"}))["converted"] == 4
        events = list(client.stream(skill="inspect", files=[str(note)]))
        data = [e.artifact_update.artifact.parts[0].data for e in events if e.artifact_update is not None]
        assert data[0]["files"] == [["note.json", "application/json", "e30="]]
        assert data[0]["params"] == {"text": ""}


# -- MockAgent routes as the router does ------------------------------------------------------------------

CALLS: list[dict[str, Any]] = [
    {"message": "hello", "skill": "greet"},
    {"skill": "convert", "data": {"amount": 1, "to": "EUR"}},
    {"message": "hello"},  # several skills, none named
    {"message": "hello", "metadata": {"skillId": "greet"}},  # request metadata: not read by the router
    {"message": "hello", "skill": "nope"},
]


def routing_agent(skill_ids: list[str]) -> Agent:
    agent = Agent("Router", "Says which skill it ran.")
    for skill_id in skill_ids:
        agent.add_skill(skill_from_function(_says(skill_id), id=skill_id, tags=["routing"]))
    return agent


def _says(skill_id: str) -> Any:
    async def run(params: Any, ctx: SkillContext) -> str:
        """Says which skill it is."""
        return skill_id

    return run


def routing_mock(skill_ids: list[str]) -> MockAgent:
    mock = MockAgent("Router", skills=skill_ids)
    for skill_id in skill_ids:
        mock.on(skill=skill_id).complete(artifact=skill_id)
    mock.complete(artifact="(no skill)")
    return mock


async def outcomes(url: str, calls: list[dict[str, Any]]) -> list[str]:
    seen = []
    async with await Client.connect(url) as client:
        for call in calls:
            try:
                seen.append(artifact_text(await client.send(**call)))
            except InvalidParamsError as exc:
                seen.append(f"refused: {exc}")
    return seen


@pytest.mark.parametrize("skill_ids", [["greet", "convert"], ["greet"]])
async def test_mock_agent_routes_exactly_as_a_real_agent(serve: Serve, skill_ids: list[str]) -> None:
    real = await outcomes(serve(routing_agent(skill_ids).asgi(store="memory://")).url, CALLS)
    async with routing_mock(skill_ids).serve_async() as url:
        mocked = await outcomes(url, CALLS)
    assert mocked == real
    if len(skill_ids) == 1:
        assert real[0] == real[2] == real[3] == "greet"  # the only skill: no skillId needed
    else:
        assert real[:2] == ["greet", "convert"]
        assert all(r.startswith("refused: ") for r in real[2:])


async def test_a_mock_without_skills_matches_only_a_named_skill_in_the_first_message() -> None:
    mock = MockAgent()
    mock.on(skill="deploy", in_task=True).complete(artifact="deployed")
    mock.on(skill="deploy").ask("which env?")
    async with mock.client() as client:
        waiting = await client.send("go", skill="deploy")
        assert isinstance(waiting, Task)
        done = await client.send("prod", task_id=waiting.id)  # routed by the task's first message
        echo = await client.send("go", metadata={"skillId": "deploy"})
    assert artifact_text(done) == "deployed"
    assert not isinstance(echo, Task) and echo.text() == "go"
