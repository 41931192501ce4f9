"""The client honours the card: against an agent that does not stream, ``stream()`` sends the message and
waits, and ``subscribe()`` reads and waits, yielding the events a stream would have ended with (the task
opening, its artifacts, its last status), so code written for a streaming agent works unchanged. Real
servers, on the HTTP bindings and gRPC, and the blocking client too."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from conftest import RecordingHandler, RunningServer, collect, state_of
from skillwire import Agent, Client, SkillContext, SyncClient, TaskState
from skillwire.protocol import models as m
from skillwire.types import SendMessageConfiguration

WAIT = 10.0
Serve = Callable[[Any], RunningServer]
BINDINGS = ["JSONRPC", "HTTP+JSON", "GRPC"]


def agent(streaming: bool, gate: threading.Event | None = None) -> Agent:
    made = Agent("Greeter", "Greets.", streaming=streaming)

    @made.skill(tags=["greeting"])
    async def greet(name: str, ctx: SkillContext) -> str:
        """Greets someone; asks who when the name is '?'."""
        if name == "?":
            name = (await ctx.ask("Who?")).text
        if gate is not None:
            import asyncio

            await asyncio.to_thread(gate.wait, WAIT)
        return f"Hi {name}!"

    return made


def served(serve: Serve, streaming: bool, gate: threading.Event | None = None) -> tuple[RunningServer, Any]:
    handlers: list[RecordingHandler] = []

    def wrap(runtime: Any) -> RecordingHandler:
        handlers.append(Operations(runtime))
        return handlers[-1]

    srv = serve(agent(streaming, gate).asgi(store="memory://", grpc_port=0, wrap=wrap))
    return srv, handlers[0]


class Operations(RecordingHandler):
    """Records the operations called."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.operations: list[str] = []

    async def handle(self, operation: Any, params: Any, context: Any) -> Any:
        self.operations.append(operation.value)
        return await super().handle(operation, params, context)


def rebuilt(events: list[m.StreamResponse]) -> tuple[TaskState | None, list[str]]:
    """The last state and the artifacts' texts the events add up to."""
    state, texts = None, []
    for event in events:
        state = state_of(event) or state
        if event.artifact_update is not None:
            texts.append(event.artifact_update.artifact.parts[0].text)
        if event.task is not None:
            texts.extend(a.parts[0].text for a in event.task.artifacts)
    return state, texts


@pytest.mark.parametrize("binding", BINDINGS)
async def test_stream_against_an_agent_without_streaming_sends_and_waits(serve: Serve, binding: str) -> None:
    srv, recorded = served(serve, streaming=False)
    async with await Client.connect(srv.url, bindings=(binding,), timeout=WAIT) as client:
        assert not client.card.capabilities.streaming
        events = await collect(client.stream(data={"name": "Ada"}))
        task = await client.get_task(events[0].task.id if events[0].task else "")
    assert recorded.operations[0] == "SendMessage" and "SendStreamingMessage" not in recorded.operations
    # a stream opens with the task, and ends with its artifacts and its last status, as here
    assert events[0].task is not None and state_of(events[0]) is TaskState.SUBMITTED
    assert events[-2].artifact_update is not None and events[-1].status_update is not None
    assert rebuilt(events) == (TaskState.COMPLETED, ["Hi Ada!"])
    assert events[-1].status_update.status == task.status


async def test_the_events_end_as_a_real_stream_ends(serve: Serve) -> None:
    streaming, _ = served(serve, streaming=True)
    plain, _ = served(serve, streaming=False)
    ends = []
    for srv in (streaming, plain):
        async with await Client.connect(srv.url, timeout=WAIT) as client:
            events = await collect(client.stream(data={"name": "Ada"}))
        ends.append(
            (rebuilt(events), [e.artifact_update is not None for e in events[-2:]], state_of(events[-1]))
        )
    assert ends[0] == ends[1]


async def test_a_question_ends_the_stream_waiting(serve: Serve) -> None:
    srv, _ = served(serve, streaming=False)
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        events = await collect(client.stream(data={"name": "?"}))
        assert state_of(events[-1]) is TaskState.INPUT_REQUIRED
        task_id = events[0].task.id if events[0].task else ""
        answer = await collect(client.stream("Grace", task_id=task_id, skill="greet"))
    assert rebuilt(answer) == (TaskState.COMPLETED, ["Hi Grace!"])


async def test_a_task_answered_at_once_is_waited_for(serve: Serve) -> None:
    gate = threading.Event()
    srv, recorded = served(serve, streaming=False, gate=gate)
    try:
        async with await Client.connect(srv.url, timeout=WAIT) as client:
            now = SendMessageConfiguration(return_immediately=True)
            events = client.stream(data={"name": "Ada"}, configuration=now)
            first = await anext(events)
            assert first.task is not None and state_of(first) is TaskState.SUBMITTED
            gate.set()
            rest = await collect(events)
    finally:
        gate.set()
    assert rebuilt([first, *rest]) == (TaskState.COMPLETED, ["Hi Ada!"])
    assert "GetTask" in recorded.operations


@pytest.mark.parametrize("binding", BINDINGS)
async def test_subscribe_against_an_agent_without_streaming_polls(serve: Serve, binding: str) -> None:
    gate = threading.Event()
    srv, recorded = served(serve, streaming=False, gate=gate)
    try:
        async with await Client.connect(srv.url, bindings=(binding,), timeout=WAIT) as client:
            now = SendMessageConfiguration(return_immediately=True)
            task = await client.send(data={"name": "Ada"}, configuration=now)
            assert isinstance(task, m.Task)
            events = client.subscribe(task.id)
            first = await anext(events)  # the task as it stands, as SubscribeToTask opens
            assert first.task is not None and first.task.id == task.id
            gate.set()
            rest = await collect(events)
    finally:
        gate.set()
    assert "SubscribeToTask" not in recorded.operations
    assert rebuilt([first, *rest]) == (TaskState.COMPLETED, ["Hi Ada!"])
    assert rest[-1].status_update is not None


def test_the_blocking_client_falls_back_too(serve: Serve) -> None:
    srv, recorded = served(serve, streaming=False)
    with SyncClient.connect(srv.url, timeout=WAIT) as client:
        events = list(client.stream(data={"name": "Ada"}))
    assert rebuilt(events) == (TaskState.COMPLETED, ["Hi Ada!"])
    assert "SendStreamingMessage" not in recorded.operations


async def test_a_direct_reply_is_one_message_event(serve: Serve) -> None:
    async def reply(context: Any, events: Any) -> None:
        await events.reply("pong")

    srv = serve(Agent("pong", "Replies.", executor=reply, streaming=False).asgi(store="memory://"))
    async with await Client.connect(srv.url, timeout=WAIT) as client:
        events = await collect(client.stream("ping"))
    assert len(events) == 1 and events[0].message is not None and events[0].message.text() == "pong"
