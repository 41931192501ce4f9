"""agent.test_client(): the agent in process with its lifespan, a SyncClient or a Client, real streams."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from skillwire import Agent, Client, SyncClient
from skillwire.errors import SkillwireError
from skillwire.protocol.models import Message, Part, Role, Task, TaskStatus, new_id
from skillwire.protocol.states import TaskState
from skillwire.server.tasks.runtime import RESTART_MESSAGE, SHUTDOWN_MESSAGE
from skillwire.skills.context import SkillContext
from skillwire.stores import MemoryTaskStore
from skillwire.stores.base import write_task

CAP = 10.0  # seconds: no wait in these tests may take longer


def greeter() -> Agent:
    agent = Agent("Greeter", "Greets people")

    @agent.skill(tags=["greeting"])
    async def greet(params: Any, ctx: SkillContext) -> str:
        """Greets a person."""
        return f"Hello, {params['text']}!"

    return agent


def result_text(task: Task | Message) -> str:
    assert isinstance(task, Task), task
    return task.artifacts[0].parts[0].text  # type: ignore[return-value]


def test_sync_form_gives_a_sync_client_that_sends() -> None:
    with greeter().test_client() as client:
        assert isinstance(client, SyncClient)
        assert client.card.name == "Greeter"
        task = client.send("Ada")
        assert isinstance(task, Task) and task.status.state is TaskState.COMPLETED
        assert result_text(task) == "Hello, Ada!"
        assert client.get_task(task.id).status.state is TaskState.COMPLETED


def test_sync_form_streams_every_event() -> None:
    with greeter().test_client() as client:
        events = list(client.stream("Ada"))
    assert events[0].task is not None
    assert [e.artifact_update.artifact.parts[0].text for e in events if e.artifact_update] == ["Hello, Ada!"]
    last = events[-1].status_update
    assert last is not None and last.status.state is TaskState.COMPLETED


async def test_async_form_gives_a_client_on_the_running_loop() -> None:
    async with greeter().test_client(bindings=["HTTP+JSON"]) as client:
        assert isinstance(client, Client)
        assert client.interface is not None and client.interface.protocol_binding == "HTTP+JSON"
        assert result_text(await client.send("Grace")) == "Hello, Grace!"


async def test_async_stream_arrives_event_by_event() -> None:
    """The skill waits for the test to see its first chunk: a buffering transport would never deliver it."""
    seen = asyncio.Event()
    agent = Agent("Chunks")

    @agent.skill(tags=["stream"])
    async def chunks(params: Any, ctx: SkillContext) -> str:
        """Streams two chunks."""
        await ctx.artifact("one", artifact_id="log")
        await seen.wait()
        await ctx.artifact("two", artifact_id="log", append=True)
        return "done"

    texts = []
    async with asyncio.timeout(CAP), agent.test_client() as client:
        async for event in client.stream("go"):
            if event.artifact_update is not None:
                texts.append(event.artifact_update.artifact.parts[0].text)
                seen.set()
    assert texts == ["one", "two", "done"]


def seeded_store(state: TaskState) -> tuple[MemoryTaskStore, str]:
    """A store holding one task in ``state``, as a previous process would have left it."""
    store = MemoryTaskStore()
    task_id = new_id()
    first = Message(message_id=new_id(), role=Role.USER, parts=[Part(text="hi")], task_id=task_id)
    task = Task(id=task_id, context_id=new_id(), status=TaskStatus(state=state), history=[first])
    asyncio.run(store.commit(write_task(task, version=1, base=0, tenant="")))
    return store, task_id


def test_lifespan_startup_runs_recovery() -> None:
    store, task_id = seeded_store(TaskState.WORKING)
    with greeter().test_client(store=store) as client:
        task = client.get_task(task_id)
    assert task.status.state is TaskState.FAILED
    assert task.status.message is not None and task.status.message.text() == RESTART_MESSAGE


async def test_lifespan_shutdown_fails_a_task_still_running() -> None:
    store = MemoryTaskStore()
    agent = Agent("Slow")
    started = asyncio.Event()

    @agent.skill(tags=["slow"])
    async def slow(params: Any, ctx: SkillContext) -> None:
        """Never finishes by itself."""
        await ctx.working("started")  # a stream's first event (the task) comes with the first report
        started.set()
        await asyncio.Event().wait()

    async with asyncio.timeout(CAP):
        async with agent.test_client(store=store) as client:
            stream = client.stream("go")
            first = await anext(stream)
            assert first.task is not None
            await started.wait()
            await stream.aclose()
        stored = await store.get(first.task.id)
    assert stored is not None and stored.task.status.state is TaskState.FAILED
    assert stored.task.status.message is not None
    assert stored.task.status.message.text() == SHUTDOWN_MESSAGE


def test_each_with_serves_a_fresh_app() -> None:
    tester = greeter().test_client()
    with tester as client:
        first = client.send("Ada")
        assert tester.app is not None
    assert tester.app is None
    with tester as client:
        assert isinstance(first, Task)
        assert client.list_tasks().tasks == []


def test_a_failed_startup_is_raised(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SkillwireError), greeter().test_client(store=f"sqlite:///{blocker}/tasks.db"):
        pass


def test_a_test_client_cannot_be_entered_twice_at_once() -> None:
    tester = greeter().test_client()
    with tester, pytest.raises(RuntimeError, match="already open"), tester:
        pass


GUIDE = Path(__file__).resolve().parent.parent / "docs" / "testing.md"


async def test_the_guides_test_client_example_runs() -> None:
    import re

    (example,) = [
        b for b in re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S) if "test_client()" in b
    ]
    namespace: dict[str, Any] = {}
    exec(compile(example, str(GUIDE), "exec"), namespace)
    await asyncio.to_thread(namespace["test_greets"])
    await namespace["test_greets_as_a_stream"]()


def test_closing_the_sync_client_inside_the_with_is_harmless() -> None:
    with greeter().test_client() as client:
        client.close()
