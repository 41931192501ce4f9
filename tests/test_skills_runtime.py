"""Running skills: routing, params, validation, results, errors, progress, turns, delegation, hooks."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from skillwire import (
    Agent,
    CallContext,
    Message,
    Outcome,
    SkillContext,
    SkillError,
    SkillwireError,
    Task,
    TaskState,
)
from skillwire.errors import InvalidParamsError
from skillwire.protocol.models import (
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
)
from skillwire.server.tasks.runtime import TaskRuntime
from skillwire.skills.executor import GENERIC_FAILURE, OUTPUT_MISMATCH, SkillExecutor
from skillwire.skills.registry import InMemorySkillRegistry, skill_from_function
from skillwire.stores import MemoryTaskStore, SQLiteTaskStore, TaskStore
from skillwire.types import Part, Role, SendMessageConfiguration, StreamResponse

CALL = CallContext()
WAIT = 10.0


def message(*parts: Part, skill: str | None = None, task_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id="m",
            role=Role.USER,
            parts=list(parts) or [Part(text="hi")],
            metadata={"skillId": skill} if skill else None,
            task_id=task_id,
        )
    )


def text(value: str, **kw: Any) -> SendMessageRequest:
    return message(Part(text=value), **kw)


async def send(rt: TaskRuntime, request: SendMessageRequest) -> Task:
    response = await rt.on_send_message(request, CALL)
    assert response.task is not None, response
    return response.task


async def finish(rt: TaskRuntime, task_id: str) -> list[StreamResponse]:
    stream = await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=task_id), CALL)

    async def drain() -> list[StreamResponse]:
        return [e async for e in stream]

    return await asyncio.wait_for(drain(), WAIT)


@pytest.fixture
async def store() -> AsyncIterator[TaskStore]:
    s = MemoryTaskStore()
    await s.open()
    yield s
    await s.close()


def runtime_for(agent: Agent, store: TaskStore) -> TaskRuntime:
    return TaskRuntime(agent._executor(), store)


# -- routing and params ---------------------------------------------------------------------------------------


async def test_routing_by_skill_id_and_the_single_skill_default(store: TaskStore) -> None:
    agent = Agent("A")

    @agent.skill(tags=["test"])
    async def upper(params: Any, ctx: SkillContext) -> str:
        """The upper skill."""
        return str(params["text"]).upper()

    rt = runtime_for(agent, store)
    assert (await send(rt, text("hey"))).artifacts[0].parts[0].text == "HEY"  # one skill: no skillId needed

    @agent.skill(id="lower", tags=["test"])
    async def lower(params: Any, ctx: SkillContext) -> str:
        """The lower skill."""
        return str(params["text"]).lower()

    rt = runtime_for(agent, store)
    assert (await send(rt, text("HEY", skill="lower"))).artifacts[0].parts[0].text == "hey"
    with pytest.raises(InvalidParamsError, match="lower, upper") as info:
        await send(rt, text("x"))
    assert info.value.field_violations[0][0] == "params.message.metadata.skillId"
    with pytest.raises(InvalidParamsError, match="unknown skillId 'nope'"):
        await send(rt, text("x", skill="nope"))
    assert (await rt.on_list_tasks(ListTasksRequest(), CALL)).total_size == 2  # refusals left no task


async def test_params_are_the_data_part_or_the_text(store: TaskStore) -> None:
    agent = Agent("A")
    seen: list[Any] = []

    @agent.skill(tags=["test"])
    async def look(params: Any, ctx: SkillContext) -> None:
        """The look skill."""
        seen.append((params, [p.filename for p in ctx.files], ctx.message.message_id, ctx.principal.subject))

    rt = runtime_for(agent, store)
    await send(rt, message(Part(text="a"), Part(text="b")))
    await send(rt, message(Part(text="ignored"), Part(data=[1, 2]), Part(raw=b"x", filename="f.bin")))
    assert seen == [
        ({"text": "a\nb"}, [], "m", "anonymous"),
        ([1, 2], ["f.bin"], "m", "anonymous"),
    ]


# -- input and output ---------------------------------------------------------------------------------------


class Order(msgspec.Struct):
    item: str
    quantity: int = 1


async def test_struct_annotation_is_the_schema_and_bad_input_leaves_no_task(store: TaskStore) -> None:
    agent = Agent("Shop")
    got: list[Order] = []

    @agent.skill(id="order", tags=["test"])
    async def order(params: Order, ctx: SkillContext) -> dict[str, Any]:
        """The order skill."""
        got.append(params)
        return {"ordered": params.item, "count": params.quantity}

    skill = agent.registry.get("order")
    (name,) = msgspec.json.schema(Order)["$defs"]  # msgspec's schema, with the object at the top
    assert skill is not None and skill.input_schema == msgspec.json.schema(Order)["$defs"][name]
    rt = runtime_for(agent, store)
    task = await send(rt, message(Part(data={"item": "tea", "quantity": 2})))
    assert got == [Order("tea", 2)]
    assert task.artifacts[0].parts[0].data == {"ordered": "tea", "count": 2}
    assert task.artifacts[0].parts[0].media_type == "application/json"
    with pytest.raises(InvalidParamsError) as info:
        await send(rt, message(Part(data={"item": "tea", "quantity": "two"})))
    assert "/quantity: expected integer, got string" in info.value.message
    assert info.value.metadata["instancePath"] == "/quantity"
    assert info.value.field_violations[0][0] == "params.message.input/quantity"
    assert (await rt.on_list_tasks(ListTasksRequest(), CALL)).total_size == 1


async def test_results_become_artifacts(store: TaskStore) -> None:
    agent = Agent("A")

    @agent.skill(tags=["test"])
    async def shape(params: Any, ctx: SkillContext) -> Any:
        """The shape skill."""
        return {"text": "words", "json": {"a": [1]}, "none": None, "struct": Order("x")}[params["text"]]

    rt = runtime_for(agent, store)
    assert (await send(rt, text("text"))).artifacts[0].parts == [Part(text="words")]
    assert (await send(rt, text("json"))).artifacts[0].parts[0].data == {"a": [1]}
    assert (await send(rt, text("struct"))).artifacts[0].parts[0].data == {"item": "x", "quantity": 1}
    done = await send(rt, text("none"))
    assert done.artifacts == [] and done.status.state is TaskState.COMPLETED


async def test_output_that_fails_its_schema_fails_the_task(
    store: TaskStore, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Agent("A")

    @agent.skill(output_schema={"type": "string"}, tags=["test"])
    async def wrong(params: Any, ctx: SkillContext) -> Any:
        """The wrong skill."""
        return {"not": "a string"}

    rt = runtime_for(agent, store)
    with caplog.at_level(logging.ERROR, logger="skillwire.skills"):
        task = await send(rt, text("x"))
    assert task.status.state is TaskState.FAILED
    assert task.status.message is not None and task.status.message.parts[0].text == OUTPUT_MISMATCH
    assert task.artifacts == []
    assert "outputSchema" in caplog.text


# -- errors ----------------------------------------------------------------------------------------------------


async def test_skill_errors_and_crashes(store: TaskStore) -> None:
    agent = Agent("A")

    @agent.skill(tags=["test"])
    async def fails(params: Any, ctx: SkillContext) -> None:
        """The fails skill."""
        kind = params["text"]
        if kind == "invalid":
            raise SkillError.invalid_request("The date must be in the future.")
        if kind == "rejected":
            raise SkillError.rejected("Orders over 100 need approval.")
        raise KeyError("internal detail /etc/secret")

    rt = runtime_for(agent, store)
    invalid = await send(rt, text("invalid"))
    assert invalid.status.state is TaskState.FAILED
    assert (
        invalid.status.message is not None
        and invalid.status.message.parts[0].text == "The date must be in the future."
    )
    rejected = await send(rt, text("rejected"))
    assert rejected.status.state is TaskState.REJECTED
    assert rejected.status.message is not None and "approval" in (rejected.status.message.parts[0].text or "")
    crashed = await send(rt, text("crash"))
    assert crashed.status.state is TaskState.FAILED
    assert crashed.status.message is not None and crashed.status.message.parts[0].text == GENERIC_FAILURE
    assert b"secret" not in msgspec.json.encode(crashed)


def test_duplicate_skill_ids_are_refused() -> None:
    agent = Agent("A")

    async def one(params: Any, ctx: SkillContext) -> None:
        """One skill."""
        return None

    agent.skill(id="same", tags=["test"])(one)
    with pytest.raises(SkillwireError, match="already registered"):
        agent.skill(id="same", tags=["test"])(one)


# -- progress -----------------------------------------------------------------------------------------------


async def test_progress_states_and_chunks_stream_in_order(store: TaskStore) -> None:
    agent = Agent("A")
    connected: list[bool] = []

    @agent.skill(tags=["test"])
    async def progress(params: Any, ctx: SkillContext) -> str:
        """The progress skill."""
        await ctx.working("starting")
        connected.append(ctx.client_connected())
        for i in range(3):
            await ctx.artifact(f"part {i}", artifact_id="a", append=i > 0, last_chunk=i == 2)
        with pytest.raises(ValueError, match="not TASK_STATE_COMPLETED"):
            await ctx.set_state(TaskState.COMPLETED)
        return "done"

    rt = runtime_for(agent, store)
    stream = await rt.on_send_streaming_message(text("go"), CALL)
    events = [e async for e in stream]
    kinds = [
        "task" if e.task else f"status:{e.status_update.status.state.name}" if e.status_update else "artifact"
        for e in events
    ]
    assert kinds == [
        "task",
        "status:WORKING",
        "artifact",
        "artifact",
        "artifact",
        "artifact",
        "status:COMPLETED",
    ]
    chunks = [e.artifact_update for e in events if e.artifact_update is not None]
    assert [(c.append, c.last_chunk) for c in chunks[:3]] == [(False, False), (True, False), (True, True)]
    assert connected == [True]
    got = await rt.on_get_task(GetTaskRequest(id=events[0].task.id if events[0].task else ""), CALL)
    assert [p.text for p in got.artifacts[0].parts] == ["part 0", "part 1", "part 2"]
    assert got.artifacts[1].parts[0].text == "done"


async def test_client_connected_is_false_when_nobody_waits(store: TaskStore) -> None:
    agent = Agent("A")
    gate = asyncio.Event()
    seen: list[bool] = []
    done = asyncio.Event()

    @agent.skill(tags=["test"])
    async def lonely(params: Any, ctx: SkillContext) -> None:
        """The lonely skill."""
        await gate.wait()
        seen.append(ctx.client_connected())

    agent.on_outcome(lambda outcome: done.set())  # hooks run after the handler: a clean wait
    rt = runtime_for(agent, store)
    request = text("x")
    request.configuration = SendMessageConfiguration(return_immediately=True)
    task = await send(rt, request)
    stream = await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=task.id), CALL)
    first = await anext(stream)
    assert first.task is not None
    gate.set()
    [e async for e in stream]
    assert seen == [True]  # the subscriber counts
    gate.clear()
    done.clear()
    await send(rt, request)  # returns at once; nobody subscribes
    gate.set()
    await asyncio.wait_for(done.wait(), WAIT)
    assert seen == [True, False]


class _BrokenEvents:
    task_id = "t"
    context_id = "c"

    async def status(self, *args: Any) -> None:
        raise RuntimeError("store is down")

    async def artifact(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("store is down")

    @property
    def watchers(self) -> int:
        raise RuntimeError("bus is down")


async def test_a_broken_progress_sink_is_not_hidden_from_the_handler() -> None:
    # A fault we cannot cause for real from here: every call of a sink of one's own fails with a bug of its
    # own (the runtime's refusals are ProgressErrors: tests/test_skill_context.py).
    skill = skill_from_function(_noop, id="x", tags=["test"], description="A test skill.")
    ctx = SkillContext(
        skill,
        _BrokenEvents(),
        message=text("x").message,
        call=CALL,
        task=None,
        params={},  # type: ignore[arg-type]
    )
    with pytest.raises(RuntimeError, match="store is down"):
        await ctx.working("not reported")
    with pytest.raises(RuntimeError, match="store is down"):
        await ctx.artifact("not reported")
    assert ctx.client_connected() is False
    assert ctx.deadline is None and ctx.time_left() is None  # a sink without a deadline


async def _noop(params: Any, ctx: SkillContext) -> None:
    return None


# -- turns -----------------------------------------------------------------------------------------------------


def interviewer(agent: Agent, log: list[str]) -> None:
    @agent.skill(id="interview", tags=["test"])
    async def interview(params: Any, ctx: SkillContext) -> dict[str, str]:
        """The interview skill."""
        await ctx.artifact("intro", artifact_id="intro")  # replayed turns must not repeat this
        log.append("start")
        name = (await ctx.ask("Name?")).text
        log.append(f"name={name}")
        colour = (await ctx.ask(f"Colour, {name}?")).text
        return {"name": name, "colour": colour}


async def test_ask_carries_a_conversation_in_one_task(store: TaskStore) -> None:
    agent = Agent("A")
    log: list[str] = []
    interviewer(agent, log)
    rt = runtime_for(agent, store)
    first = await send(rt, text("start"))
    assert first.status.state is TaskState.INPUT_REQUIRED
    assert first.status.message is not None and first.status.message.parts[0].text == "Name?"
    second = await send(rt, text("Ada", task_id=first.id))
    assert second.id == first.id and second.status.state is TaskState.INPUT_REQUIRED
    assert second.status.message is not None and second.status.message.parts[0].text == "Colour, Ada?"
    third = await send(rt, text("teal", task_id=first.id))
    assert third.status.state is TaskState.COMPLETED
    assert next(a.artifact_id for a in third.artifacts) == "intro"
    assert len(third.artifacts) == 2 and third.artifacts[1].parts[0].data == {"name": "Ada", "colour": "teal"}
    assert [m.parts[0].text for m in third.history if m.role is Role.USER] == ["start", "Ada", "teal"]
    assert log == ["start", "start", "name=Ada", "start", "name=Ada"]


async def test_a_waiting_conversation_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SQLiteTaskStore(path)
    await store.open()
    agent = Agent("A")
    interviewer(agent, [])
    rt = runtime_for(agent, store)
    first = await send(rt, text("start"))
    second = await send(rt, text("Ada", task_id=first.id))
    assert second.status.state is TaskState.INPUT_REQUIRED
    await store.close()  # the process is gone; nothing of the run is in memory any more

    store2 = SQLiteTaskStore(path)
    await store2.open()
    fresh = Agent("A")
    interviewer(fresh, [])
    rt2 = runtime_for(fresh, store2)
    await rt2.start()
    done = await send(rt2, text("teal", task_id=first.id))
    assert done.status.state is TaskState.COMPLETED
    assert done.artifacts[-1].parts[0].data == {"name": "Ada", "colour": "teal"}
    await rt2.stop()
    await store2.close()


# -- delegation -------------------------------------------------------------------------------------------------


class Job:
    """External work the test drives: steps and an end, followed by the skill."""

    def __init__(self) -> None:
        self.steps: asyncio.Queue[str | None] = asyncio.Queue()


def delegating_agent(job: Job) -> Agent:
    agent = Agent("A")

    async def follow(ref: Any, ctx: SkillContext) -> str:
        while (step := await job.steps.get()) is not None:
            await ctx.artifact(step, artifact_id="log", append=True)
        return f"job {ref['job']} finished"

    @agent.skill(id="deploy", follow=follow, tags=["test"])
    async def deploy(params: Any, ctx: SkillContext) -> None:
        """The deploy skill."""
        await ctx.delegate({"job": 42}, "Job 42 started")

    return agent


async def test_delegated_work_returns_at_once_and_follows_to_the_end(store: TaskStore) -> None:
    job = Job()
    rt = runtime_for(delegating_agent(job), store)
    task = await send(rt, text("go"))
    assert task.status.state is TaskState.WORKING
    assert task.metadata == {"skillId": "deploy", "delegation": {"skillId": "deploy", "ref": {"job": 42}}}
    for step in ("build", "ship"):
        job.steps.put_nowait(step)
    job.steps.put_nowait(None)
    events = await finish(rt, task.id)
    assert events[-1].status_update is not None
    assert events[-1].status_update.status.state is TaskState.COMPLETED
    done = await rt.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert [p.text for p in done.artifacts[0].parts] == ["build", "ship"]
    assert done.artifacts[1].parts[0].text == "job 42 finished"


async def test_following_resumes_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SQLiteTaskStore(path)
    await store.open()
    job = Job()
    rt = runtime_for(delegating_agent(job), store)
    task = await send(rt, text("go"))
    await store.close()  # "crash" while the job is still running elsewhere

    store2 = SQLiteTaskStore(path)
    await store2.open()
    job2 = Job()
    rt2 = runtime_for(delegating_agent(job2), store2)
    await rt2.start()
    assert await rt2.recovered() == []  # taken back, not failed
    job2.steps.put_nowait("after restart")
    job2.steps.put_nowait(None)
    await finish(rt2, task.id)
    done = await rt2.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert done.status.state is TaskState.COMPLETED
    assert done.artifacts[-1].parts[0].text == "job 42 finished"
    await rt2.stop()
    await store2.close()


def retrying_agent(started: asyncio.Event, release: asyncio.Event, retryable: bool = True) -> Agent:
    agent = Agent("R")

    @agent.skill(tags=["test"], retryable=retryable)
    async def work(params: Any, ctx: SkillContext) -> str:
        """Safe to run twice."""
        started.set()
        await release.wait()
        return f"done {params['text']}"

    return agent


async def _drain(stream: Any) -> list[StreamResponse]:
    return [e async for e in stream]


async def left_working(path: Path, agent: Agent) -> str:
    """A task of ``agent`` left WORKING in the SQLite file at ``path`` by a process that "died"."""
    store = SQLiteTaskStore(path)
    await store.open()
    rt = runtime_for(agent, store)
    request = text("x")
    request.configuration = SendMessageConfiguration(return_immediately=True)
    task = await send(rt, request)
    await store.close()  # "crash" while the handler runs
    return task.id


async def test_a_retryable_skill_runs_again_after_a_restart_at_most_three_times(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    task_id = await left_working(path, retrying_agent(asyncio.Event(), asyncio.Event()))
    for attempt in (2, 3):
        started, release = asyncio.Event(), asyncio.Event()
        store = SQLiteTaskStore(path)
        await store.open()
        rt = runtime_for(retrying_agent(started, release), store)
        await rt.start()
        assert await rt.recovered() == []  # taken back, not failed
        await asyncio.wait_for(started.wait(), WAIT)
        running = await rt.on_get_task(GetTaskRequest(id=task_id), CALL)
        assert running.metadata == {"skillId": "work", "attempt": attempt}
        if attempt == 3:
            stream = await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=task_id), CALL)
            release.set()
            events = await asyncio.wait_for(_drain(stream), WAIT)
            assert events[-1].status_update is not None
            assert events[-1].status_update.status.state is TaskState.COMPLETED
            done = await rt.on_get_task(GetTaskRequest(id=task_id), CALL)
            assert done.status.state is TaskState.COMPLETED
            assert done.artifacts[0].parts[0].text == "done x"
        await store.close()  # dies again while running (attempt 2), or ends cleanly (attempt 3)

    # a third death: the task has had its runs and is failed
    task_id = await left_working(tmp_path / "u.db", retrying_agent(asyncio.Event(), asyncio.Event()))
    for _ in range(2):
        started = asyncio.Event()
        store = SQLiteTaskStore(tmp_path / "u.db")
        await store.open()
        rt = runtime_for(retrying_agent(started, asyncio.Event()), store)
        await rt.start()
        await asyncio.wait_for(started.wait(), WAIT)
        await store.close()
    store = SQLiteTaskStore(tmp_path / "u.db")
    await store.open()
    rt = runtime_for(retrying_agent(asyncio.Event(), asyncio.Event()), store)
    await rt.start()
    assert await rt.recovered() == [task_id]
    failed = await rt.on_get_task(GetTaskRequest(id=task_id), CALL)
    assert failed.status.state is TaskState.FAILED
    await rt.stop()
    await store.close()


async def test_a_skill_that_is_not_retryable_is_failed_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    task_id = await left_working(path, retrying_agent(asyncio.Event(), asyncio.Event(), retryable=False))
    store = SQLiteTaskStore(path)
    await store.open()
    rt = runtime_for(retrying_agent(asyncio.Event(), asyncio.Event(), retryable=False), store)
    await rt.start()
    assert await rt.recovered() == [task_id]
    await rt.stop()
    await store.close()


# -- hooks and read-only ---------------------------------------------------------------------------------------


async def test_hooks_see_every_outcome_in_order_and_cannot_change_it(store: TaskStore) -> None:
    agent = Agent("A")
    seen: list[tuple[str, str, TaskState, Any]] = []

    @agent.skill(tags=["test"])
    async def work(params: Any, ctx: SkillContext) -> str:
        """The work skill."""
        if params["text"] == "bad":
            raise SkillError.invalid_request("nope")
        return "ok"

    @agent.on_outcome
    def first(outcome: Outcome) -> None:
        seen.append(("first", outcome.skill_id, outcome.state, outcome.result))

    @agent.on_outcome
    async def broken(outcome: Outcome) -> None:
        raise RuntimeError("hook bug")

    @agent.on_outcome
    async def last(outcome: Outcome) -> None:
        seen.append(("last", outcome.skill_id, outcome.state, type(outcome.error).__name__))

    rt = runtime_for(agent, store)
    good = await send(rt, text("fine"))
    bad = await send(rt, text("bad"))
    assert good.status.state is TaskState.COMPLETED and bad.status.state is TaskState.FAILED
    assert seen == [
        ("first", "work", TaskState.COMPLETED, "ok"),
        ("last", "work", TaskState.COMPLETED, "NoneType"),
        ("first", "work", TaskState.FAILED, None),
        ("last", "work", TaskState.FAILED, "SkillInvalidRequestError"),
    ]


async def test_read_only_mode_hides_and_refuses_writing_skills(store: TaskStore) -> None:
    agent = Agent("A", read_only=True)
    ran: list[str] = []

    @agent.skill(read_only=True, tags=["test"])
    async def look(params: Any, ctx: SkillContext) -> str:
        """The look skill."""
        ran.append("look")
        return "seen"

    @agent.skill(tags=["test"])
    async def change(params: Any, ctx: SkillContext) -> str:
        """The change skill."""
        ran.append("change")
        return "changed"

    assert [s.id for s in agent.card().skills] == ["look"]
    rt = runtime_for(agent, store)
    assert (await send(rt, text("x", skill="look"))).status.state is TaskState.COMPLETED
    # hidden means absent: naming it is the same error as naming a skill that does not exist
    with pytest.raises(InvalidParamsError) as hidden:
        await send(rt, text("x", skill="change"))
    with pytest.raises(InvalidParamsError) as missing:
        await send(rt, text("x", skill="nope"))
    assert str(hidden.value) == str(missing.value).replace("'nope'", "'change'")
    assert str(hidden.value) == "unknown skillId 'change'; skills: look"
    assert hidden.value.metadata == {"skills": "look"}
    # without a skillId, only served skills count: the one served skill is selected
    assert (await send(rt, text("x"))).status.state is TaskState.COMPLETED
    assert ran == ["look", "look"]
    assert (await rt.on_list_tasks(ListTasksRequest(), CALL)).total_size == 2


async def test_read_only_mode_with_no_served_skill_lists_none(store: TaskStore) -> None:
    agent = Agent("A", read_only=True)

    @agent.skill(tags=["test"])
    async def change(params: Any, ctx: SkillContext) -> str:
        """The change skill."""
        return "changed"

    rt = runtime_for(agent, store)
    with pytest.raises(InvalidParamsError, match=r"skillId is required.*; skills: \(none\)$"):
        await send(rt, text("x"))
    with pytest.raises(InvalidParamsError, match=r"^unknown skillId 'change'; skills: \(none\)$"):
        await send(rt, text("x", skill="change"))


def test_card_lists_skills_and_plugin_sources() -> None:
    agent = Agent("A")

    async def handler(params: Any, ctx: SkillContext) -> None:
        return None

    agent.skill(id="mine", tags=["t"], description="Mine.")(handler)
    plugin = skill_from_function(handler, id="theirs", tags=["x"], description="A test skill.")
    agent.add_skill(dataclasses.replace(plugin, source="plugin:acme-skills"))
    entries = {s.id: s for s in agent.card().skills}
    assert entries["mine"].tags == ["t"]
    assert entries["theirs"].tags == ["x", "plugin:acme-skills"]
    assert SkillExecutor(agent.registry).route(text("x", skill="mine").message).id == "mine"


async def test_register_manifest_validates_with_the_manifest_schemas(store: TaskStore) -> None:
    from skillwire import SkillCard

    card = SkillCard.parse(
        "---\nid: sum\nname: Sum\ndescription: Adds numbers.\ntags: [math]\n"
        "inputSchema: {type: array, items: {type: number}, minItems: 1}\n"
        "outputSchema: {type: number}\n---\nAdd {{ numbers }}.\n"
    )
    registry = InMemorySkillRegistry()

    async def add(params: Any, ctx: SkillContext) -> float:
        return float(sum(params))

    skill = registry.register_manifest(card, add)
    assert skill.card is card and skill.input_schema == {
        "type": "array",
        "items": {"type": "number"},
        "minItems": 1,
    }
    with pytest.raises(SkillwireError, match="already registered"):
        registry.register_manifest(card, add)
    rt = TaskRuntime(SkillExecutor(registry), store)
    task = await send(rt, message(Part(data=[1, 2, 3.5])))
    assert task.artifacts[0].parts[0].data == 6.5
    with pytest.raises(InvalidParamsError) as info:
        await send(rt, message(Part(data=[1, "two"])))
    assert info.value.metadata["instancePath"] == "/1" and info.value.metadata["schemaPath"] == "/items/type"
