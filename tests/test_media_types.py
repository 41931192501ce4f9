"""Media types are honoured: inputModes refuse parts before a task exists (-32005), acceptedOutputModes reach
the handler, and an artifact part the client does not accept is never delivered (the task fails)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from skillwire import Agent
from skillwire.errors import ContentTypeNotSupportedError, InvalidParamsError
from skillwire.protocol.media import accepts, media_type_of, refused_part
from skillwire.protocol.models import Message, Part, Role, SendMessageConfiguration, Task, new_id
from skillwire.protocol.states import TaskState
from skillwire.server.tasks.executor import RequestContext, TaskEvents
from skillwire.skills.context import SkillContext
from skillwire.skills.executor import Outcome
from skillwire.skills.registry import skill_from_function

CAP = 10.0
PNG = b"\x89PNG\r\n\x1a\n"
BINDINGS = ["JSONRPC", "HTTP+JSON"]


def message(*parts: Part, skill: str | None = None, task_id: str = "") -> Message:
    return Message(
        message_id=new_id(),
        role=Role.USER,
        parts=list(parts),
        task_id=task_id,
        metadata={"skillId": skill} if skill else None,
    )


def accepting(*modes: str) -> SendMessageConfiguration:
    return SendMessageConfiguration(accepted_output_modes=list(modes))


async def describe(params: Any, ctx: SkillContext) -> str:
    """Names the media types of the parts it was sent."""
    kinds = [media_type_of(p) for p in ctx.message.parts]
    return " ".join(kinds)


def media_agent(**options: Any) -> Agent:
    """``photo`` takes images only, ``any`` everything, ``plain`` has no inputModes (the agent's defaults)."""
    agent = Agent("Media", **options)
    agent.add_skill(skill_from_function(describe, id="photo", tags=["media"], input_modes=["image/*"]))
    agent.add_skill(skill_from_function(describe, id="any", tags=["media"], input_modes=["*/*"]))
    agent.add_skill(skill_from_function(describe, id="plain", tags=["media"]))
    return agent


# -- the rules, as a table -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "media_type"),
    [
        (Part(text="hi"), "text/plain"),
        (Part(text="# hi", media_type="text/markdown"), "text/markdown"),
        (Part(data={"a": 1}), "application/json"),
        (Part(raw=PNG, media_type="image/png"), "image/png"),
        (Part(url="https://example.com/r.pdf", media_type="application/pdf"), "application/pdf"),
        (Part(raw=b"?"), "application/octet-stream"),
    ],
)
def test_a_parts_media_type_is_its_own_or_its_kinds(part: Part, media_type: str) -> None:
    assert media_type_of(part) == media_type


@pytest.mark.parametrize(
    ("modes", "media_type", "accepted"),
    [
        ([], "image/png", True),
        (["image/png"], "image/png", True),
        (["IMAGE/PNG"], "image/png; q=1", True),
        (["text/plain"], "text/plain; charset=utf-8", True),
        (["image/*"], "image/jpeg", True),
        (["*/*"], "application/x-anything", True),
        (["image/*"], "text/plain", False),
        (["text/plain"], "application/json", False),
        (["image/png"], "image/jpeg", False),
        (["image/png"], "image/*", False),
    ],
)
def test_modes_accept_the_same_type_or_a_declared_wildcard(
    modes: list[str], media_type: str, accepted: bool
) -> None:
    assert accepts(modes, media_type) is accepted


def test_the_first_refused_part_is_named() -> None:
    parts = [Part(text="a"), Part(data={}), Part(raw=PNG, media_type="image/png")]
    assert refused_part(parts, ["text/plain", "application/json"]) == (2, "image/png")
    assert refused_part(parts, []) is None


# -- input: refused before a task exists ---------------------------------------------------------------


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_part_the_skill_does_not_accept_is_refused_before_any_task(binding: str) -> None:
    async with media_agent().test_client(bindings=[binding]) as client:
        with pytest.raises(ContentTypeNotSupportedError) as refused:
            await client.send(message(Part(text="a cat"), skill="photo"))
        assert refused.value.code == -32005
        assert "Message part 0 is text/plain" in refused.value.message
        assert "image/*" in refused.value.message
        assert (await client.list_tasks()).tasks == []


async def test_a_skill_with_input_modes_takes_what_it_declares() -> None:
    async with media_agent().test_client() as client:
        photo = await client.send(message(Part(raw=PNG, media_type="image/png"), skill="photo"))
        anything = await client.send(message(Part(raw=b"?"), Part(data={"x": 1}), skill="any"))
    assert text_of(photo) == "image/png"
    assert text_of(anything) == "application/octet-stream application/json"


async def test_a_skill_without_input_modes_takes_the_agents_defaults() -> None:
    """The default defaultInputModes are text/plain and application/json: a skill takes text or data."""
    async with media_agent().test_client() as client:
        assert client.card.default_input_modes == ["text/plain", "application/json"]
        assert text_of(await client.send(message(Part(data={"n": 1}), skill="plain"))) == "application/json"
        with pytest.raises(ContentTypeNotSupportedError, match="part 1 is image/png"):
            await client.send(
                message(Part(text="look"), Part(raw=PNG, media_type="image/png"), skill="plain")
            )


async def test_an_agents_own_default_input_modes_are_honoured() -> None:
    async with media_agent(default_input_modes=["text/plain"]).test_client() as client:
        with pytest.raises(ContentTypeNotSupportedError, match="application/json"):
            await client.send(message(Part(data={"n": 1}), skill="plain"))
        assert text_of(await client.send(message(Part(text="hi"), skill="plain"))) == "text/plain"


async def test_an_unknown_skill_is_still_a_routing_error() -> None:
    async with media_agent().test_client() as client:
        with pytest.raises(InvalidParamsError, match="unknown skillId"):
            await client.send(message(Part(raw=PNG, media_type="image/png"), skill="nope"))


async def test_an_answer_in_a_task_is_checked_too() -> None:
    agent = Agent("Asker")

    @agent.skill(tags=["ask"])
    async def ask(params: Any, ctx: SkillContext) -> str:
        """Asks a question."""
        return (await ctx.ask("Which one?")).text

    async with agent.test_client() as client:
        task = await client.send("pick")
        assert isinstance(task, Task) and task.status.state is TaskState.INPUT_REQUIRED
        with pytest.raises(ContentTypeNotSupportedError):
            await client.send(message(Part(raw=PNG, media_type="image/png"), task_id=task.id))
        assert (await client.get_task(task.id)).status.state is TaskState.INPUT_REQUIRED
        done = await client.send(message(Part(text="that one"), task_id=task.id))
        assert isinstance(done, Task) and done.status.state is TaskState.COMPLETED


async def test_an_executor_agent_is_held_to_its_default_input_modes() -> None:
    async def echo(context: RequestContext, events: TaskEvents) -> None:
        await events.reply(context.text)

    async with Agent("Echo", executor=echo, default_input_modes=["text/*"]).test_client() as client:
        with pytest.raises(ContentTypeNotSupportedError):
            await client.send(message(Part(data={"n": 1})))
        reply = await client.send(message(Part(text="# hi", media_type="text/markdown")))
        assert isinstance(reply, Message) and reply.text() == "# hi"


# -- output: acceptedOutputModes -----------------------------------------------------------------------


def text_of(task: Task | Message) -> str:
    assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED, task
    return task.artifacts[0].parts[0].text  # type: ignore[return-value]


def picture_agent(outcomes: list[Outcome]) -> Agent:
    """``draw`` answers with a PNG when the client accepts one, else with text; ``say`` always with text."""
    agent = Agent("Pictures")
    agent.on_outcome(outcomes.append)

    @agent.skill(tags=["media"], output_modes=["image/png", "text/plain"])  # what it may make
    async def draw(params: Any, ctx: SkillContext) -> str | None:
        """Draws a picture."""
        if ctx.accepts_output("image/png"):
            await ctx.artifact([Part(raw=PNG, media_type="image/png", filename="cat.png")], name="cat")
            return None
        return f"a cat (accepted: {ctx.accepted_output_modes})"

    @agent.skill(tags=["media"])
    async def say(params: Any, ctx: SkillContext) -> str:
        """Says something."""
        return "meow"

    return agent


async def test_accepted_output_modes_reach_the_handler() -> None:
    async with picture_agent([]).test_client() as client:
        task = await client.send(
            message(Part(text="cat"), skill="draw"), configuration=accepting("image/png")
        )
        assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED
        assert [p.media_type for p in task.artifacts[0].parts] == ["image/png"]
        plain = await client.send(message(Part(text="cat"), skill="draw"), configuration=accepting("text/*"))
        assert text_of(plain) == "a cat (accepted: ['text/*'])"
        unsaid = await client.send(message(Part(text="cat"), skill="draw"))  # no acceptedOutputModes: any
        assert isinstance(unsaid, Task) and unsaid.artifacts[0].parts[0].media_type == "image/png"


async def test_request_context_carries_accepted_output_modes() -> None:
    seen: list[list[str]] = []

    async def record(context: RequestContext, events: TaskEvents) -> None:
        seen.append(context.accepted_output_modes)
        seen.append(events.accepted_output_modes)
        await events.reply("ok")

    async with Agent("Recorder", executor=record).test_client() as client:
        await client.send(message(Part(text="hi")), configuration=accepting("text/plain", "image/*"))
    assert seen == [["text/plain", "image/*"]] * 2


@pytest.mark.parametrize("binding", BINDINGS)
async def test_an_artifact_the_client_does_not_accept_fails_the_task(binding: str) -> None:
    outcomes: list[Outcome] = []
    async with picture_agent(outcomes).test_client(bindings=[binding]) as client:
        task = await client.send(message(Part(text="hi"), skill="say"), configuration=accepting("image/png"))
        assert isinstance(task, Task) and task.status.state is TaskState.FAILED
        assert task.artifacts == []
        assert task.status.message is not None
        reason = task.status.message.text()
        assert "artifact part of type text/plain" in reason and "acceptedOutputModes: image/png" in reason
        stored = await client.get_task(task.id)
    assert stored.status.state is TaskState.FAILED and stored.artifacts == []
    assert [o.state for o in outcomes] == [TaskState.FAILED]


async def test_a_stream_never_carries_the_refused_artifact() -> None:
    async with asyncio.timeout(CAP), picture_agent([]).test_client() as client:
        request = message(Part(text="hi"), skill="say")
        events = [e async for e in client.stream(request, configuration=accepting("application/json"))]
    assert not [e for e in events if e.artifact_update is not None]
    last = events[-1].status_update
    assert last is not None and last.status.state is TaskState.FAILED


async def test_an_executor_artifact_the_client_does_not_accept_stops_the_executor() -> None:
    reached: list[str] = []

    async def chatty(context: RequestContext, events: TaskEvents) -> None:
        await events.artifact([Part(data={"n": 1})], name="data")
        reached.append("after the artifact")  # never: the run is cancelled at the refused artifact

    async with Agent("Chatty", executor=chatty).test_client() as client:
        task = await client.send(message(Part(text="hi")), configuration=accepting("text/plain"))
    assert isinstance(task, Task) and task.status.state is TaskState.FAILED
    assert task.status.message is not None and "application/json" in task.status.message.text()
    assert reached == []


async def test_the_mock_agent_takes_any_part() -> None:
    """MockAgent stands in for any agent: a client's file reaches its rules (here: the default echo)."""
    from skillwire.testing import MockAgent

    mock = MockAgent("Anything")
    async with mock.client() as client:
        reply = await client.send(message(Part(raw=PNG, media_type="image/png")))
    assert isinstance(reply, Message) and reply.parts[0].media_type == "image/png"
