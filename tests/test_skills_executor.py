"""The skill executor's part of issue 9: results that are not JSON fail the task with a reason (through a real
server), the schema step budget reaches callers as -32602, large input is validated off the event loop,
``timeout(context)`` exposes ``executionHints.timeoutSeconds``, and a cancelled run never looks like a
success to the hooks."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import A2A_V1, EXAMPLES, RunningServer, assert_rpc_result, rpc, user_message
from skillwire import (
    Agent,
    CallContext,
    Message,
    Outcome,
    RequestContext,
    SkillContext,
    SkillwireError,
    TaskState,
)
from skillwire.errors import InvalidParamsError
from skillwire.protocol.models import CancelTaskRequest, SendMessageRequest
from skillwire.server.app import A2AApplication
from skillwire.server.tasks.runtime import TaskRuntime
from skillwire.skills.context import NotJson
from skillwire.skills.executor import SkillExecutor
from skillwire.skills.registry import InMemorySkillRegistry, Skill, skill_from_function
from skillwire.stores import MemoryTaskStore, TaskStore
from skillwire.types import Part, Role, SendMessageConfiguration

WAIT = 10.0

NOT_JSON: dict[str, tuple[Callable[[], Any], str]] = {
    "object": (object, "/ is a Python object, not a JSON value"),
    "set": (lambda: {1, 2}, "/ is a Python set, not a JSON value"),
    "bytes": (lambda: b"raw", "/ is a Python bytes, not a JSON value"),
    "nan": (lambda: {"score": float("nan")}, "/score is nan, which JSON has no number for"),
    "int-keys": (lambda: {1: "one"}, "/ has a key that is not a string: int 1"),
    "deep": (lambda: {"a": [1, {"b/c": [None, object()]}]}, "/a/1/b~1c/1 is a Python object, not a JSON value"),
}  # fmt: skip


def request(text: str, *, skill: str | None = None, immediate: bool = False) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id="m",
            role=Role.USER,
            parts=[Part(text=text)],
            metadata={"skillId": skill} if skill else None,
        ),
        configuration=SendMessageConfiguration(return_immediately=True) if immediate else None,
    )


@pytest.fixture
async def store() -> AsyncIterator[TaskStore]:
    s = MemoryTaskStore()
    await s.open()
    yield s
    await s.close()


# -- results that are not JSON, through a real server ----------------------------------------------------------


def not_json_agent(outcomes: list[Outcome]) -> Agent:
    agent = Agent("Broken")

    @agent.skill(id="result", tags=["test"])
    async def result(params: Any, ctx: SkillContext) -> Any:
        """The result skill."""
        return NOT_JSON[params["text"]][0]()

    @agent.skill(id="artifact", tags=["test"])
    async def artifact(params: Any, ctx: SkillContext) -> Any:
        """The artifact skill."""
        await ctx.artifact(NOT_JSON[params["text"]][0]())
        return "unreachable"

    agent.on_outcome(outcomes.append)
    return agent


@pytest.fixture
def broken(
    serve: Callable[[A2AApplication], RunningServer], tmp_path: Path
) -> tuple[RunningServer, list[Outcome]]:
    outcomes: list[Outcome] = []
    return serve(not_json_agent(outcomes).asgi(store=f"sqlite:///{tmp_path}/tasks.db")), outcomes


async def call(client: httpx.AsyncClient, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await client.post(url, json=rpc(method, params), headers=A2A_V1)
    assert response.status_code == 200, response.text
    return assert_rpc_result(response.json(), method)


@pytest.mark.parametrize("kind", list(NOT_JSON))
async def test_a_result_that_is_not_json_fails_the_task_with_a_reason(
    broken: tuple[RunningServer, list[Outcome]], kind: str
) -> None:
    srv, outcomes = broken
    async with httpx.AsyncClient(timeout=WAIT) as client:
        sent = await call(
            client,
            srv.rpc_url,
            "SendMessage",
            {"message": user_message(kind, metadata={"skillId": "result"})},
        )
        task = sent["task"]
        status = task["status"]
        assert status["state"] == "TASK_STATE_FAILED"
        assert (
            status["message"]["parts"][0]["text"]
            == "The skill returned a value that is not JSON: " + NOT_JSON[kind][1]
        )
        assert "artifacts" not in task
        stored = await call(client, srv.rpc_url, "GetTask", {"id": task["id"]})  # the task was stored
        assert stored["status"] == status
    (outcome,) = outcomes
    assert outcome.state is TaskState.FAILED and isinstance(outcome.error, NotJson)


async def test_an_artifact_that_is_not_json_fails_the_task_and_its_stream_ends(
    broken: tuple[RunningServer, list[Outcome]],
) -> None:
    srv, outcomes = broken
    body = rpc("SendStreamingMessage", {"message": user_message("set", metadata={"skillId": "artifact"})})
    async with (
        httpx.AsyncClient(timeout=WAIT) as client,
        client.stream("POST", srv.rpc_url, json=body, headers=A2A_V1) as response,
    ):
        assert response.status_code == 200
        lines = [line async for line in response.aiter_lines() if line.startswith("data:")]
    last = httpx.Response(200, content=lines[-1].removeprefix("data:")).json()["result"]
    status = last["statusUpdate"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    assert status["message"]["parts"][0]["text"] == (
        "The skill produced an artifact that is not JSON: part 0: / is a Python set, not a JSON value"
    )
    assert [o.state for o in outcomes] == [TaskState.FAILED]


# -- the schema step budget ------------------------------------------------------------------------------------

TREE = {
    "$defs": {"node": {"type": "object", "properties": {"kids": {"items": {"$ref": "#/$defs/node"}}}}},
    "$ref": "#/$defs/node",
}


def data_request(value: Any, *, skill: str | None = None) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id="m",
            role=Role.USER,
            parts=[Part(data=value)],
            metadata={"skillId": skill} if skill else None,
        )
    )


def tree_skill(registry: InMemorySkillRegistry) -> None:
    async def handler(params: Any, ctx: SkillContext) -> str:
        return "ok"

    registry.register(
        skill_from_function(handler, id="tree", tags=["test"], description="A test skill.", input_schema=TREE)
    )


async def test_input_over_the_step_budget_is_invalid_params(store: TaskStore) -> None:
    registry = InMemorySkillRegistry()
    tree_skill(registry)
    value = {"kids": [{"kids": [{} for _ in range(5)]} for _ in range(5)]}  # 31 $ref applications
    tight = TaskRuntime(SkillExecutor(registry, schema_steps=30), store)
    with pytest.raises(InvalidParamsError) as caught:
        await tight.on_send_message(data_request(value), CallContext())
    assert caught.value.code == -32602
    assert caught.value.message == (
        "Invalid input for skill 'tree': /: validating this value takes more than 30 schema steps "
        "($ref applications), the limit for one validation"
    )
    roomy = TaskRuntime(SkillExecutor(registry, schema_steps=31), store)
    done = await roomy.on_send_message(data_request(value), CallContext())
    assert done.task is not None and done.task.status.state is TaskState.COMPLETED


# -- large input is validated off the event loop -----------------------------------------------------------------

NAMED = {"type": "object", "properties": {"name": {"type": "string"}, "pad": {"type": "string"}}}


def recording_skill(threads: list[int]) -> Skill:
    """A skill whose input check records the thread it runs on (and checks NAMED)."""
    from skillwire import compile_schema

    validator = compile_schema(NAMED)

    def check(value: Any) -> Any:
        threads.append(threading.get_ident())
        validator.validate(value)
        return value

    async def handler(params: Any, ctx: SkillContext) -> str:
        return "ok"

    plain = skill_from_function(handler, id="named", tags=["test"], description="A test skill.")
    return Skill(id=plain.id, agent_skill=plain.agent_skill, handler=handler, check_input=check)


async def test_large_input_is_validated_on_a_worker_thread_with_the_same_verdicts(store: TaskStore) -> None:
    threads: list[int] = []
    registry = InMemorySkillRegistry()
    registry.register(recording_skill(threads))
    rt = TaskRuntime(SkillExecutor(registry, offload_bytes=1000), store)
    loop_thread = threading.get_ident()
    small, large = CallContext(request_bytes=200), CallContext(request_bytes=300_000)
    pad = "x" * 300_000

    ok = await rt.on_send_message(data_request({"name": "Ada", "pad": pad}), large)
    assert ok.task is not None and ok.task.status.state is TaskState.COMPLETED
    errors = []
    for value, call_context in (({"name": 5}, small), ({"name": 5, "pad": pad}, large)):
        with pytest.raises(InvalidParamsError) as caught:
            await rt.on_send_message(data_request(value), call_context)
        errors.append((caught.value.message, caught.value.metadata))
    assert errors[0] == errors[1]
    assert errors[0][0] == "Invalid input for skill 'named': /name: expected string, got integer"
    on_loop = [t == loop_thread for t in threads]
    assert on_loop == [False, True, False]  # large valid, small invalid, large invalid


async def test_without_an_offload_threshold_input_is_validated_on_the_loop(store: TaskStore) -> None:
    threads: list[int] = []
    registry = InMemorySkillRegistry()
    registry.register(recording_skill(threads))
    rt = TaskRuntime(SkillExecutor(registry, offload_bytes=None), store)
    await rt.on_send_message(data_request({"name": "Ada"}), CallContext(request_bytes=10**9))
    assert threads == [threading.get_ident()]


# -- timeoutSeconds ----------------------------------------------------------------------------------------------


def context(text: str, *, skill: str | None = None) -> RequestContext:
    return RequestContext(
        message=request(text, skill=skill).message, task_id="t", context_id="c", call=CallContext()
    )


def test_timeout_is_the_routed_skills_timeout_seconds_hint() -> None:
    folder = Agent.from_folder(EXAMPLES / "workshop")
    executor = SkillExecutor(folder.registry)
    assert executor.timeout(context("v1", skill="deploy")) == 600.0  # executionHints.timeoutSeconds: 600
    assert executor.timeout(context("5", skill="countdown")) is None  # no hint: the agent-wide default
    assert executor.timeout(context("x", skill="nope")) is None  # not routable: admit refuses it anyway
    assert executor.timeout(context("x")) is None  # several skills and no skillId
    greeter = SkillExecutor(Agent.from_folder(EXAMPLES / "greeter").registry)
    assert greeter.timeout(context("Ada")) == 5.0


def test_a_code_skill_sets_its_timeout_and_a_bad_one_is_refused() -> None:
    async def handler(params: Any, ctx: SkillContext) -> str:
        return "ok"

    registry = InMemorySkillRegistry()
    registry.register(
        skill_from_function(
            handler, id="quick", tags=["test"], description="A test skill.", timeout_seconds=2.5
        )
    )
    assert SkillExecutor(registry).timeout(context("x")) == 2.5
    for bad in (0, -1, True, "5"):
        with pytest.raises(SkillwireError, match="timeout_seconds must be a positive number"):
            skill_from_function(
                handler, id="bad", tags=["test"], description="A test skill.", timeout_seconds=bad
            )  # type: ignore[arg-type]


async def test_timeout_uses_the_skill_admit_routed(store: TaskStore) -> None:
    async def handler(params: Any, ctx: SkillContext) -> str:
        return "ok"

    registry = InMemorySkillRegistry()
    registry.register(
        skill_from_function(handler, id="a", tags=["test"], description="A test skill.", timeout_seconds=1)
    )
    registry.register(
        skill_from_function(handler, id="b", tags=["test"], description="A test skill.", timeout_seconds=2)
    )
    executor = SkillExecutor(registry)
    routed = context("x", skill="b")
    await executor.admit(routed)
    assert executor.timeout(routed) == 2.0


# -- cancelled runs and the hooks ---------------------------------------------------------------------------------


def waiting_agent(outcomes: list[Outcome], started: asyncio.Event) -> Agent:
    agent = Agent("Slow")

    @agent.skill(id="wait", tags=["test"])
    async def wait(params: Any, ctx: SkillContext) -> str:
        """The wait skill."""
        started.set()
        await asyncio.Event().wait()  # until cancelled
        return "never"

    agent.on_outcome(outcomes.append)
    return agent


async def test_a_run_the_runtime_fails_and_cancels_is_failed_for_the_hooks(store: TaskStore) -> None:
    # What the runtime does at a deadline (and at shutdown): end the task FAILED, then cancel the run.
    outcomes: list[Outcome] = []
    started = asyncio.Event()
    rt = TaskRuntime(waiting_agent(outcomes, started)._executor(), store)
    sent = await rt.on_send_message(request("x", immediate=True), CallContext())
    await asyncio.wait_for(started.wait(), WAIT)
    await asyncio.wait_for(rt.stop(grace=0), WAIT)
    assert sent.task is not None
    (outcome,) = outcomes
    assert outcome.state is TaskState.FAILED and not outcome.ok
    assert isinstance(outcome.error, asyncio.CancelledError)


async def test_a_cancelled_task_is_canceled_for_the_hooks(store: TaskStore) -> None:
    outcomes: list[Outcome] = []
    started = asyncio.Event()
    rt = TaskRuntime(waiting_agent(outcomes, started)._executor(), store)
    sent = await rt.on_send_message(request("x", immediate=True), CallContext())
    assert sent.task is not None
    await asyncio.wait_for(started.wait(), WAIT)
    await rt.on_cancel_task(CancelTaskRequest(id=sent.task.id), CallContext())
    await asyncio.wait_for(rt.stop(grace=WAIT), WAIT)
    assert [o.state for o in outcomes] == [TaskState.CANCELED]


# -- hooks after a turn that waits for the client --------------------------------------------------------------


async def test_a_client_answering_at_once_is_not_held_up_by_a_busy_hook(store: TaskStore) -> None:
    # A hook still busy with the outcome INPUT_REQUIRED must not make the answer that follows at once be
    # refused as "still working on an earlier message"; the hooks still see the two outcomes in order.
    agent = Agent("Asker")

    @agent.skill(id="confirm", tags=["test"])
    async def confirm(params: Any, ctx: SkillContext) -> str:
        """Asks before it answers."""
        answer = await ctx.ask("Sure?")
        return f"got {answer.text}"

    release = asyncio.Event()
    seen: list[tuple[TaskState, float]] = []
    all_seen = asyncio.Event()

    async def slow_observer(outcome: Outcome) -> None:
        if outcome.state is TaskState.INPUT_REQUIRED:
            await release.wait()
        seen.append((outcome.state, outcome.duration))
        if len(seen) == 2:
            all_seen.set()

    agent.on_outcome(slow_observer)
    rt = TaskRuntime(agent._executor(), store)
    first = await asyncio.wait_for(rt.on_send_message(request("go"), CallContext()), WAIT)
    assert first.task is not None and first.task.status.state is TaskState.INPUT_REQUIRED
    answer = Message(
        message_id="m2",
        role=Role.USER,
        parts=[Part(text="yes")],
        task_id=first.task.id,
        context_id=first.task.context_id,
    )
    second = await asyncio.wait_for(
        rt.on_send_message(SendMessageRequest(message=answer), CallContext()), WAIT
    )
    assert second.task is not None and second.task.status.state is TaskState.COMPLETED
    assert not seen  # the first outcome's hook is still busy, and the second's waits for it
    release.set()
    await asyncio.wait_for(all_seen.wait(), WAIT)
    assert [state for state, _ in seen] == [TaskState.INPUT_REQUIRED, TaskState.COMPLETED]
    assert all(duration >= 0 for _, duration in seen)
    await asyncio.wait_for(rt.stop(grace=WAIT), WAIT)
