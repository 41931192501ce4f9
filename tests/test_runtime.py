"""Handler semantics per operation, through the task runtime in process (no HTTP)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from skillwire import (
    BaseRequestHandler,
    CallContext,
    Executor,
    Message,
    RequestContext,
    TaskEvents,
    TaskState,
)
from skillwire.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidAgentResponseError,
    InvalidParamsError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from skillwire.protocol.models import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
)
from skillwire.server.handler import Dispatcher, TypedStream, checked_result
from skillwire.server.tasks.executor import Work, as_executor
from skillwire.server.tasks.runtime import TaskRuntime
from skillwire.stores import SQLiteTaskStore, TaskStore
from skillwire.types import AgentCapabilities, Operation, Part, Role, SendMessageConfiguration, StreamResponse

CALL = CallContext()
WAIT = 10.0


class Scripted(Executor):
    """An executor whose behaviour is chosen by the message text."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.late_error: BaseException | None = None

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        text = context.text
        if context.task is not None:  # a continuation
            await events.working()
            await events.artifact(f"got {text}", name="answer")
            return
        if text == "complete":
            await events.working()
            await events.artifact("done", name="result")
        elif text == "ask":
            await events.working()
            await events.input_required("What is your name?")
        elif text == "block":
            await events.working()
            self.started.set()
            try:
                await self.release.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
            await events.artifact("released")
        elif text == "boom":
            raise RuntimeError("secret internal detail")
        elif text == "reply":
            await events.reply("just a message")
        elif text == "late":
            await events.complete("finished")
            try:
                await events.working()
            except InvalidAgentResponseError as exc:
                self.late_error = exc
        elif text == "nothing":
            return


def send(text: str, **config: Any) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(message_id=f"m-{text}", role=Role.USER, parts=[Part(text=text)]),
        configuration=SendMessageConfiguration(**config) if config else None,
    )


def follow_up(task_id: str, text: str, context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=f"m2-{text}",
            role=Role.USER,
            parts=[Part(text=text)],
            task_id=task_id,
            context_id=context_id,
        )
    )


@pytest.fixture
async def runtime(store: TaskStore) -> AsyncIterator[tuple[TaskRuntime, Scripted]]:
    executor = Scripted()
    rt = TaskRuntime(executor, store)
    await rt.start()
    yield rt, executor
    executor.release.set()
    await rt.stop(grace=1)


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    async def run() -> list[StreamResponse]:
        return [e async for e in stream]

    return await asyncio.wait_for(run(), WAIT)


async def test_send_creates_a_task_with_server_ids(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    response = await rt.on_send_message(send("complete"), CALL)
    task = response.task
    assert task is not None and response.message is None
    assert task.id and task.context_id and task.id != task.context_id
    assert task.status.state is TaskState.COMPLETED
    assert [a.parts[0].text for a in task.artifacts] == ["done"]
    assert task.history[0].message_id == "m-complete"
    assert task.history[0].task_id == task.id and task.history[0].context_id == task.context_id


async def test_a_blocking_send_runs_one_task_whatever_the_store(
    runtime: tuple[TaskRuntime, Scripted],
) -> None:
    # The run's creation is written behind; the commit that settles it covers that write. On a store that
    # answers later (SQLite, PostgreSQL) the write-behind used to start a flush task of its own, which then
    # found nothing left to write: a task more per request than on the memory store.
    rt, _ = runtime
    loop = asyncio.get_running_loop()
    made: list[str] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        if coro.cr_frame.f_globals["__name__"].startswith("skillwire.server."):  # not a store's own
            made.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop, **kwargs)

    await rt.on_send_message(send("complete"), CALL)  # the first request of a store sets things up
    loop.set_task_factory(factory)
    try:
        response = await rt.on_send_message(send("complete"), CALL)
    finally:
        loop.set_task_factory(None)
    assert response.task is not None and response.task.status.state is TaskState.COMPLETED
    assert made == ["TaskRun._drive"]


async def test_the_runtimes_stream_passes_the_dispatcher_as_it_is(
    runtime: tuple[TaskRuntime, Scripted],
) -> None:
    # Its events are StreamResponse by construction: not checked again one by one (a handler's own stream is:
    # tests/test_handler_results.py).
    rt, _ = runtime
    stream = await rt.on_send_streaming_message(send("complete"), CALL)
    assert isinstance(stream, TypedStream)
    assert checked_result(Operation.SEND_STREAMING_MESSAGE, stream, rt) is stream
    events = await collect(stream)
    last = events[-1].status_update
    assert last is not None and last.status.state is TaskState.COMPLETED


async def test_client_context_id_is_kept(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    request = send("complete")
    request.message.context_id = "my-context"
    response = await rt.on_send_message(request, CALL)
    assert response.task is not None and response.task.context_id == "my-context"


async def test_direct_reply_is_a_message_and_no_task(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    response = await rt.on_send_message(send("reply"), CALL)
    assert response.task is None and response.message is not None
    assert response.message.role is Role.AGENT and response.message.parts[0].text == "just a message"
    listed = await rt.on_list_tasks(ListTasksRequest(), CALL)
    assert listed.total_size == 0


async def test_executor_that_does_nothing_completes(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    response = await rt.on_send_message(send("nothing"), CALL)
    assert response.task is not None and response.task.status.state is TaskState.COMPLETED


async def test_return_immediately_then_follow(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, executor = runtime
    response = await rt.on_send_message(send("block", return_immediately=True), CALL)
    task = response.task
    assert task is not None and task.status.state is TaskState.SUBMITTED
    stream = await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=task.id), CALL)
    executor.release.set()
    events = await collect(stream)
    assert events[0].task is not None and events[0].task.id == task.id
    assert events[-1].status_update is not None
    assert events[-1].status_update.status.state is TaskState.COMPLETED
    got = await rt.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert got.status.state is TaskState.COMPLETED and got.artifacts[0].parts[0].text == "released"


async def test_blocking_returns_at_input_required_and_resumes(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    first = (await rt.on_send_message(send("ask"), CALL)).task
    assert first is not None and first.status.state is TaskState.INPUT_REQUIRED
    assert first.status.message is not None and first.status.message.parts[0].text == "What is your name?"
    second = (await rt.on_send_message(follow_up(first.id, "Ada"), CALL)).task
    assert second is not None
    assert second.id == first.id and second.context_id == first.context_id
    assert second.status.state is TaskState.COMPLETED
    assert second.artifacts[-1].parts[0].text == "got Ada"
    texts = [m.parts[0].text for m in second.history]
    assert texts == ["ask", "What is your name?", "Ada"]


async def test_follow_up_errors(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    with pytest.raises(TaskNotFoundError):
        await rt.on_send_message(follow_up("no-such-task", "x"), CALL)
    waiting = (await rt.on_send_message(send("ask"), CALL)).task
    assert waiting is not None
    with pytest.raises(InvalidParamsError, match="contextId"):
        await rt.on_send_message(follow_up(waiting.id, "x", context_id="other"), CALL)
    done = (await rt.on_send_message(send("complete"), CALL)).task
    assert done is not None
    with pytest.raises(UnsupportedOperationError):
        await rt.on_send_message(follow_up(done.id, "x"), CALL)


async def test_history_length(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    task = (await rt.on_send_message(send("ask"), CALL)).task
    assert task is not None and len(task.history) == 2
    none = await rt.on_get_task(GetTaskRequest(id=task.id, history_length=0), CALL)
    assert none.history == []
    assert b'"history"' not in msgspec.json.encode(none)
    last = await rt.on_get_task(GetTaskRequest(id=task.id, history_length=1), CALL)
    assert [m.parts[0].text for m in last.history] == ["What is your name?"]
    full = await rt.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert len(full.history) == 2
    trimmed = (await rt.on_send_message(send("complete", history_length=0), CALL)).task
    assert trimmed is not None and trimmed.history == []


async def test_get_unknown_task(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    with pytest.raises(TaskNotFoundError):
        await rt.on_get_task(GetTaskRequest(id="nope"), CALL)


async def test_list_tasks_filters_pages_and_artifacts(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    ids = []
    for _ in range(5):
        task = (await rt.on_send_message(send("complete"), CALL)).task
        assert task is not None
        ids.append(task.id)
    waiting = (await rt.on_send_message(send("ask"), CALL)).task
    assert waiting is not None
    everything = await rt.on_list_tasks(ListTasksRequest(), CALL)
    assert everything.total_size == 6 and everything.page_size == 50 and everything.next_page_token == ""
    assert everything.tasks[0].id == waiting.id
    assert all(t.artifacts == [] for t in everything.tasks)
    assert b'"artifacts"' not in msgspec.json.encode(everything)
    with_artifacts = await rt.on_list_tasks(ListTasksRequest(include_artifacts=True), CALL)
    assert all(t.artifacts for t in with_artifacts.tasks if t.id != waiting.id)
    completed = await rt.on_list_tasks(ListTasksRequest(status=TaskState.COMPLETED), CALL)
    assert {t.id for t in completed.tasks} == set(ids)
    by_context = await rt.on_list_tasks(ListTasksRequest(context_id=waiting.context_id), CALL)
    assert [t.id for t in by_context.tasks] == [waiting.id]
    page1 = await rt.on_list_tasks(ListTasksRequest(page_size=4), CALL)
    assert len(page1.tasks) == 4 and page1.next_page_token and page1.page_size == 4
    page2 = await rt.on_list_tasks(ListTasksRequest(page_size=4, page_token=page1.next_page_token), CALL)
    assert len(page2.tasks) == 2 and page2.next_page_token == ""
    assert {t.id for t in page1.tasks + page2.tasks} == {*ids, waiting.id}
    no_history = await rt.on_list_tasks(ListTasksRequest(history_length=0), CALL)
    assert all(t.history == [] for t in no_history.tasks)


async def test_cancel_stops_the_running_work(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, executor = runtime
    task = (await rt.on_send_message(send("block", return_immediately=True), CALL)).task
    assert task is not None
    await asyncio.wait_for(executor.started.wait(), WAIT)
    canceled = await rt.on_cancel_task(CancelTaskRequest(id=task.id), CALL)
    assert canceled.status.state is TaskState.CANCELED
    await asyncio.wait_for(executor.cancelled.wait(), WAIT)
    got = await rt.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert got.status.state is TaskState.CANCELED
    assert [a.parts[0].text for a in got.artifacts] == []  # the work never reached its artifact
    with pytest.raises(TaskNotCancelableError):
        await rt.on_cancel_task(CancelTaskRequest(id=task.id), CALL)


async def test_cancel_waiting_task_and_errors(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    waiting = (await rt.on_send_message(send("ask"), CALL)).task
    assert waiting is not None
    canceled = await rt.on_cancel_task(CancelTaskRequest(id=waiting.id), CALL)
    assert canceled.status.state is TaskState.CANCELED
    stored = await rt.on_get_task(GetTaskRequest(id=waiting.id), CALL)
    assert stored.status.state is TaskState.CANCELED
    with pytest.raises(TaskNotFoundError):
        await rt.on_cancel_task(CancelTaskRequest(id="nope"), CALL)
    done = (await rt.on_send_message(send("complete"), CALL)).task
    assert done is not None
    with pytest.raises(TaskNotCancelableError):
        await rt.on_cancel_task(CancelTaskRequest(id=done.id), CALL)


async def test_failure_hides_internals(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    task = (await rt.on_send_message(send("boom"), CALL)).task
    assert task is not None and task.status.state is TaskState.FAILED
    assert b"secret" not in msgspec.json.encode(task)
    assert task.status.message is not None and task.status.message.parts[0].text


async def test_terminal_states_never_change(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, executor = runtime
    task = (await rt.on_send_message(send("late"), CALL)).task
    assert task is not None and task.status.state is TaskState.COMPLETED
    assert isinstance(executor.late_error, InvalidAgentResponseError)
    again = await rt.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert again.status.state is TaskState.COMPLETED


async def test_stream_order_and_every_subscriber_gets_every_event(
    runtime: tuple[TaskRuntime, Scripted],
) -> None:
    rt, executor = runtime
    main = await rt.on_send_streaming_message(send("block"), CALL)
    first = await asyncio.wait_for(anext(main), WAIT)
    assert first.task is not None
    task_id = first.task.id
    await asyncio.wait_for(executor.started.wait(), WAIT)
    subs = [await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=task_id), CALL) for _ in range(3)]
    snapshots = [await asyncio.wait_for(anext(s), WAIT) for s in subs]
    executor.release.set()
    rest = await collect(main)
    kinds = ["status" if e.status_update else "artifact" if e.artifact_update else "task" for e in rest]
    assert kinds == ["status", "artifact", "status"]
    assert rest[-1].status_update is not None and rest[-1].status_update.status.state is TaskState.COMPLETED
    for sub, snap in zip(subs, snapshots, strict=True):
        # A snapshot is what the store held (WORKING may still be written behind): every event after it
        # follows, none twice, none missing.
        assert snap.task is not None
        after = {TaskState.SUBMITTED: rest, TaskState.WORKING: rest[1:]}[snap.task.status.state]
        events = await collect(sub)
        assert [msgspec.json.encode(e) for e in events] == [msgspec.json.encode(e) for e in after]


async def test_stream_of_a_direct_reply_is_one_message(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    events = await collect(await rt.on_send_streaming_message(send("reply"), CALL))
    assert len(events) == 1 and events[0].message is not None


async def test_subscribe_errors(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    with pytest.raises(TaskNotFoundError):
        await rt.on_subscribe_to_task(SubscribeToTaskRequest(id="nope"), CALL)
    done = (await rt.on_send_message(send("complete"), CALL)).task
    assert done is not None
    with pytest.raises(UnsupportedOperationError):
        await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=done.id), CALL)


async def test_message_to_a_busy_task_is_refused(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, executor = runtime
    task = (await rt.on_send_message(send("block", return_immediately=True), CALL)).task
    assert task is not None
    with pytest.raises(UnsupportedOperationError, match="still working"):
        await rt.on_send_message(follow_up(task.id, "more"), CALL)
    executor.release.set()


async def test_tenants_do_not_see_each_other(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    task = (await rt.on_send_message(send("complete"), CallContext(tenant="a"))).task
    assert task is not None
    with pytest.raises(TaskNotFoundError):
        await rt.on_get_task(GetTaskRequest(id=task.id), CallContext(tenant="b"))
    assert (await rt.on_get_task(GetTaskRequest(id=task.id, tenant="a"), CALL)).id == task.id


async def test_shutdown_fails_running_tasks_and_ends_streams(store: TaskStore) -> None:
    executor = Scripted()
    rt = TaskRuntime(executor, store)
    await rt.start()
    stream = await rt.on_send_streaming_message(send("block"), CALL)
    first = await asyncio.wait_for(anext(stream), WAIT)
    assert first.task is not None
    await asyncio.wait_for(executor.started.wait(), WAIT)
    await rt.stop(grace=0)
    events = await collect(stream)
    assert events[-1].status_update is not None
    assert events[-1].status_update.status.state is TaskState.FAILED
    stored = await store.get(first.task.id)
    assert stored is not None and stored.task.status.state is TaskState.FAILED
    assert executor.cancelled.is_set()
    with pytest.raises(UnsupportedOperationError):
        await rt.on_send_message(send("complete"), CALL)


async def test_restart_keeps_finished_and_fails_orphans(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    store = SQLiteTaskStore(path)
    await store.open()
    rt = TaskRuntime(Scripted(), store)
    done = (await rt.on_send_message(send("complete"), CALL)).task
    waiting = (await rt.on_send_message(send("ask"), CALL)).task
    assert done is not None and waiting is not None
    await store.close()  # the process "dies" without stopping the runtime

    store2 = SQLiteTaskStore(path)
    await store2.open()
    rt2 = TaskRuntime(Scripted(), store2)
    await rt2.start()
    assert (await rt2.on_get_task(GetTaskRequest(id=done.id), CALL)).status.state is TaskState.COMPLETED
    resumed = (await rt2.on_send_message(follow_up(waiting.id, "Ada"), CALL)).task
    assert resumed is not None and resumed.status.state is TaskState.COMPLETED
    await rt2.stop()
    await store2.close()


async def test_base_handler_answers_not_implemented() -> None:
    class OnlyGet(BaseRequestHandler):
        async def on_get_task(self, request: GetTaskRequest, call: CallContext) -> str:
            return "got"

    handler = OnlyGet()
    assert await handler.handle(Operation.GET_TASK, GetTaskRequest(id="x"), CALL) == "got"
    with pytest.raises(MethodNotFoundError, match="ListTasks is not implemented"):
        await handler.handle(Operation.LIST_TASKS, ListTasksRequest(), CALL)


async def test_dispatcher_capability_gates(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    caps = AgentCapabilities(streaming=False, push_notifications=False, extended_agent_card=False)
    gated = Dispatcher(rt, lambda: caps)
    with pytest.raises(PushNotificationNotSupportedError):
        await gated.call(
            Operation.GET_PUSH_CONFIG, GetTaskPushNotificationConfigRequest(task_id="t", id="c"), CALL
        )
    with pytest.raises(UnsupportedOperationError):
        await gated.call(Operation.SEND_STREAMING_MESSAGE, send("complete"), CALL)
    with pytest.raises(UnsupportedOperationError):
        await gated.call(Operation.GET_EXTENDED_AGENT_CARD, GetExtendedAgentCardRequest(), CALL)
    open_card = Dispatcher(rt, lambda: AgentCapabilities(extended_agent_card=True))
    with pytest.raises(ExtendedAgentCardNotConfiguredError):
        await open_card.call(Operation.GET_EXTENDED_AGENT_CARD, GetExtendedAgentCardRequest(), CALL)


async def test_client_messages_must_have_the_user_role(runtime: tuple[TaskRuntime, Scripted]) -> None:
    rt, _ = runtime
    request = send("complete")
    request.message.role = Role.AGENT
    with pytest.raises(InvalidParamsError, match="ROLE_USER"):
        await rt.on_send_message(request, CALL)
    assert (await rt.on_list_tasks(ListTasksRequest(), CALL)).total_size == 0


async def test_push_config_in_a_send_needs_the_capability(runtime: tuple[TaskRuntime, Scripted]) -> None:
    from skillwire.protocol.models import TaskPushNotificationConfig

    rt, _ = runtime
    request = send("complete")
    request.configuration = SendMessageConfiguration(
        task_push_notification_config=TaskPushNotificationConfig(url="https://example.com/hook")
    )
    gated = Dispatcher(rt, lambda: AgentCapabilities(push_notifications=False))
    with pytest.raises(PushNotificationNotSupportedError):
        await gated.call(Operation.SEND_MESSAGE, request, CALL)
    assert (await rt.on_list_tasks(ListTasksRequest(), CALL)).total_size == 0


# -- seams the skills layer builds on -----------------------------------------------------------------------


class Seams(Executor):
    """An executor using admit, release, metadata, watchers and resume."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.watchers_seen: list[int] = []

    async def admit(self, context: RequestContext) -> None:
        if context.text == "refuse":
            raise InvalidParamsError("refused before any task exists")

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await events.working()
        await events.set_metadata("job", {"ref": 7})
        self.watchers_seen.append(events.watchers)
        await events.release()  # the blocking caller gets the WORKING task now
        await self.release.wait()
        await events.artifact("finished")

    def resume(self, task: Any) -> Any:
        if (task.metadata or {}).get("job") is None:
            return None

        async def carry_on(events: TaskEvents) -> None:
            await self.release.wait()
            await events.artifact(f"resumed job {task.metadata['job']['ref']}")

        return carry_on


async def test_admit_refuses_before_any_task_exists(store: TaskStore) -> None:
    rt = TaskRuntime(Seams(), store)
    with pytest.raises(InvalidParamsError, match="refused"):
        await rt.on_send_message(send("refuse"), CALL)
    with pytest.raises(InvalidParamsError):
        await rt.on_send_streaming_message(send("refuse"), CALL)
    assert (await rt.on_list_tasks(ListTasksRequest(), CALL)).total_size == 0
    assert rt.running == 0


class Parsing(Executor):
    """An executor whose ``admit`` parses the message and hands the number to the work it returns."""

    def __init__(self) -> None:
        self.executed = 0

    async def admit(self, context: RequestContext) -> Work | None:
        if context.text == "plain":
            return None  # the runtime runs execute()
        try:
            number = int(context.text)
        except ValueError:
            raise InvalidParamsError("send a number") from None

        async def double(events: TaskEvents) -> None:
            await events.artifact(str(number * 2))

        return double

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        self.executed += 1
        await events.artifact("executed")


async def test_admit_hands_its_work_to_the_run_or_lets_execute_run(store: TaskStore) -> None:
    executor = Parsing()
    rt = TaskRuntime(executor, store)
    doubled = (await rt.on_send_message(send("21"), CALL)).task
    assert doubled is not None and doubled.artifacts[0].parts[0].text == "42"
    assert executor.executed == 0
    plain = (await rt.on_send_message(send("plain"), CALL)).task
    assert plain is not None and plain.artifacts[0].parts[0].text == "executed"
    assert executor.executed == 1
    with pytest.raises(InvalidParamsError, match="send a number"):
        await rt.on_send_message(send("many"), CALL)


def test_an_executor_is_an_executor_subclass_or_an_async_function() -> None:
    class Structural:  # has execute, but does not declare the hooks by subclassing Executor
        async def execute(self, context: RequestContext, events: TaskEvents) -> None: ...

    async def function(context: RequestContext, events: TaskEvents) -> None: ...

    with pytest.raises(TypeError, match=r"subclass of skillwire\.Executor"):
        as_executor(Structural())  # type: ignore[arg-type]
    wrapped = as_executor(function)
    assert isinstance(wrapped, Executor)
    parsing = Parsing()
    assert as_executor(parsing) is parsing


async def test_release_answers_the_caller_while_work_goes_on(store: TaskStore) -> None:
    executor = Seams()
    rt = TaskRuntime(executor, store)
    task = (await rt.on_send_message(send("go"), CALL)).task
    assert task is not None and task.status.state is TaskState.WORKING
    assert task.metadata == {"job": {"ref": 7}}
    assert executor.watchers_seen == [1]  # the blocking caller was waiting
    stored = await store.get(task.id)
    assert stored is not None and stored.task.metadata == {"job": {"ref": 7}}
    stream = await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=task.id), CALL)
    executor.release.set()
    events = await collect(stream)
    assert events[-1].status_update is not None
    assert events[-1].status_update.status.state is TaskState.COMPLETED
    await rt.stop()


async def test_start_resumes_what_the_executor_takes_back_and_fails_the_rest(store: TaskStore) -> None:
    from skillwire.testing.store_contract import make_task, save

    delegated = make_task(state=TaskState.WORKING)
    delegated.metadata = {"job": {"ref": 9}}
    orphan = make_task(state=TaskState.WORKING)
    await save(store, delegated, version=4)
    await save(store, orphan, version=2, tenant="t")
    seams = Seams()
    rt = TaskRuntime(seams, store)
    await rt.start()
    failed = await rt.recovered()
    assert failed == [orphan.id]
    stream = await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=delegated.id), CALL)
    seams.release.set()
    events = await collect(stream)
    assert events[-1].status_update is not None
    assert events[-1].status_update.status.state is TaskState.COMPLETED
    done = await rt.on_get_task(GetTaskRequest(id=delegated.id), CALL)
    assert done.artifacts[-1].parts[0].text == "resumed job 9"
    lost = await rt.on_get_task(GetTaskRequest(id=orphan.id, tenant="t"), CALL)
    assert lost.status.state is TaskState.FAILED
    assert lost.status.message is not None and "stopped" in (lost.status.message.parts[0].text or "")
    await rt.stop()
