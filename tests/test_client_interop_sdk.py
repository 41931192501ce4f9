"""Interop: skillwire's client against an agent built with the official a2a-sdk 1.3 (``sdk_agent.py``).

The agent runs under a real uvicorn on 127.0.0.1 and serves JSON-RPC and HTTP+JSON, and gRPC from the app's
lifespan on a port of its own; every behaviour is checked over each binding with
``Client.connect(url, bindings=(binding,))``: discovery and card revalidation (HTTP bindings), tenants, send,
stream, cancel, subscribe, get/list, the protocol errors, a multi-turn conversation, push-notification configs
and the extended card.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import pytest

import sdk_agent
import serving
from conftest import collect, free_port, state_of
from skillwire import Client, TaskFailedError, TaskState
from skillwire.client import HTTPStatusError
from skillwire.errors import (
    InternalError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from skillwire.protocol import models as m

HTTP_BINDINGS = ["JSONRPC", "HTTP+JSON"]
BINDINGS = [*HTTP_BINDINGS, "GRPC"]
WAIT = 10.0  # the cap on every wait in this module, in seconds
HOOK = "https://example.com/a2a-hook"  # stored only: the agent has no push sender, nothing is sent


@dataclass
class SdkServer:
    url: str
    grpc_url: str  # the GRPC interface's url on the card: host:port
    executor: sdk_agent.SdkExecutor


@contextlib.contextmanager
def run_sdk_agent(**options: str) -> Iterator[SdkServer]:
    """The a2a-sdk agent (``sdk_agent.create_app(**options)``) under uvicorn in a thread, gRPC included."""
    port = grpc_port = free_port()
    while grpc_port == port:
        grpc_port = free_port()
    app, executor = sdk_agent.create_app("127.0.0.1", port, grpc_port=grpc_port, **options)
    with serving.running(app, port=port, name="a2a-sdk", lifespan="on", timeout=WAIT):
        yield SdkServer(f"http://127.0.0.1:{port}", f"127.0.0.1:{grpc_port}", executor)


@pytest.fixture(scope="module")
def sdk_server() -> Iterator[SdkServer]:
    """One agent for the whole module: every test keeps to its own tasks and contexts."""
    with run_sdk_agent() as server:
        yield server


@pytest.fixture(params=BINDINGS)
async def client(request: pytest.FixtureRequest, sdk_server: SdkServer) -> AsyncIterator[Client]:
    async with await Client.connect(sdk_server.url, bindings=(request.param,), timeout=WAIT) as c:
        assert c.interface is not None and c.interface.protocol_binding == request.param
        if request.param == "GRPC":  # the card's host:port, the port the lifespan bound
            assert c.interface.url == sdk_server.grpc_url
        yield c


def artifact_texts(task: m.Task) -> list[str]:
    return [part.text for artifact in task.artifacts for part in artifact.parts if isinstance(part.text, str)]


def reassemble(events: list[m.StreamResponse]) -> dict[str, list[str]]:
    """Artifact id -> text parts, built from the artifact updates as A2A says (append or replace)."""
    artifacts: dict[str, list[str]] = {}
    for event in events:
        update = event.artifact_update
        if update is None:
            continue
        texts = [p.text for p in update.artifact.parts if isinstance(p.text, str)]
        if update.append:
            artifacts[update.artifact.artifact_id] += texts
        else:
            artifacts[update.artifact.artifact_id] = texts
    return artifacts


async def start_slow(client: Client) -> m.Task:
    """A ``slow`` task, returned as soon as the agent has made it (``returnImmediately``)."""
    task = await client.send("slow", configuration=m.SendMessageConfiguration(return_immediately=True))
    assert isinstance(task, m.Task) and task.status.state not in (TaskState.COMPLETED, TaskState.CANCELED)
    return task


# -- the card --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("binding", HTTP_BINDINGS)
async def test_card_is_discovered_and_revalidated_with_its_etag(sdk_server: SdkServer, binding: str) -> None:
    seen: list[tuple[int, str | None, str | None]] = []

    async def record(response: httpx.Response) -> None:
        if response.url.path.endswith("agent-card.json"):
            asked = response.request.headers.get("if-none-match")
            seen.append((response.status_code, asked, response.headers.get("etag")))

    async with (
        httpx.AsyncClient(timeout=WAIT, event_hooks={"response": [record]}) as http,
        await Client.connect(sdk_server.url, bindings=(binding,), http=http) as client,
    ):
        card = client.card
        assert card.name == sdk_agent.AGENT_NAME
        assert [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
            ("JSONRPC", "1.0"),
            ("HTTP+JSON", "1.0"),
            ("GRPC", "1.0"),
        ]
        assert card.supported_interfaces[-1].url == sdk_server.grpc_url
        path = sdk_agent.RPC_PATH if binding == "JSONRPC" else sdk_agent.REST_PREFIX
        assert client.interface is not None and client.interface.url == sdk_server.url + path
        assert card.capabilities.streaming and card.capabilities.push_notifications
        refreshed = await client.refresh_card()
        assert refreshed is card  # a 304 keeps the cached card
    etag = seen[0][2]
    assert etag and seen[0][:2] == (200, None)
    assert seen[1] == (304, etag, etag)


@pytest.mark.parametrize(
    ("binding", "rest_prefix"),
    [
        pytest.param("JSONRPC", sdk_agent.REST_PREFIX, id="JSONRPC"),
        pytest.param("GRPC", sdk_agent.REST_PREFIX, id="GRPC"),
        pytest.param("HTTP+JSON", "", id="HTTP+JSON-at-the-root"),
        pytest.param(
            "HTTP+JSON",
            sdk_agent.REST_PREFIX,
            id="HTTP+JSON-under-a-path",
            marks=pytest.mark.xfail(
                strict=True,
                raises=HTTPStatusError,
                reason="a2a-sdk 1.3 create_rest_routes(path_prefix=P) mounts the tenant form at /{tenant}P/... "
                "instead of P/{tenant}/... (REST paths, tenant form included, are relative to the interface "
                "URL), so a tenant request to the advertised URL is a 404",
            ),
        ),
    ],
)
async def test_the_interfaces_tenant_reaches_the_agent(binding: str, rest_prefix: str) -> None:
    with run_sdk_agent(rest_prefix=rest_prefix, tenant="acme") as server:
        async with await Client.connect(server.url, bindings=(binding,), timeout=WAIT) as client:
            assert client.interface is not None and client.interface.tenant == "acme"
            reply = await client.send("tenant")
            assert isinstance(reply, m.Message) and reply.text() == "tenant=acme"
            events = await collect(client.stream("stream 1"))
            assert state_of(events[-1]) is TaskState.COMPLETED


async def test_extended_card_has_the_extra_skill(client: Client) -> None:
    assert client.card.capabilities.extended_agent_card
    extended = await client.get_extended_card()
    assert extended.name == sdk_agent.AGENT_NAME
    assert [s.id for s in extended.skills] == ["echo", sdk_agent.EXTENDED_SKILL]
    assert [s.id for s in client.card.skills] == ["echo"]


# -- send ------------------------------------------------------------------------------------------------


async def test_send_returns_the_completed_task_with_the_echo(client: Client) -> None:
    task = await client.send("hello there")
    assert isinstance(task, m.Task) and task.status.state is TaskState.COMPLETED
    assert artifact_texts(task) == ["hello there"]
    assert task.context_id and [h.text() for h in task.history] == ["hello there"]


async def test_send_honours_the_configurations_history_length(client: Client) -> None:
    task = await client.send("quiet", configuration=m.SendMessageConfiguration(history_length=0))
    assert isinstance(task, m.Task) and task.history == [] and artifact_texts(task) == ["quiet"]


async def test_send_gets_a_direct_message_reply(client: Client) -> None:
    reply = await client.send("message")
    assert isinstance(reply, m.Message) and reply.role is m.Role.AGENT
    assert reply.text() == sdk_agent.DIRECT_REPLY and reply.task_id == ""


async def test_failed_task_is_a_result_unless_raise_on_failure(client: Client) -> None:
    task = await client.send("fail")
    assert isinstance(task, m.Task) and task.status.state is TaskState.FAILED
    assert task.status.message is not None and task.status.message.text() == sdk_agent.FAILURE
    with pytest.raises(TaskFailedError) as caught:
        await client.send("fail", raise_on_failure=True)
    assert caught.value.task.status.state is TaskState.FAILED
    assert sdk_agent.FAILURE in str(caught.value)


# -- stream ----------------------------------------------------------------------------------------------


async def test_stream_yields_the_events_in_order_and_the_chunks_reassemble(client: Client) -> None:
    events = await collect(client.stream("stream 3"))
    assert events[0].task is not None and events[0].task.status.state is TaskState.SUBMITTED
    task_id = events[0].task.id
    kinds = ["task" if e.task else "status" if e.status_update else "artifact" for e in events]
    assert kinds == ["task", "status", "artifact", "artifact", "artifact", "status"]
    assert [state_of(e) for e in events if e.status_update] == [TaskState.WORKING, TaskState.COMPLETED]
    updates = [e.artifact_update for e in events if e.artifact_update is not None]
    assert [(u.append, u.last_chunk) for u in updates] == [(False, False), (True, False), (True, True)]
    assert all(u.task_id == task_id for u in updates)
    assert reassemble(events) == {f"{task_id}-stream": ["chunk 0", "chunk 1", "chunk 2"]}
    stored = await client.get_task(task_id)
    assert artifact_texts(stored) == ["chunk 0", "chunk 1", "chunk 2"]  # the agent appended them too


async def test_stream_of_a_direct_message_is_one_event(client: Client) -> None:
    events = await collect(client.stream("message"))
    assert len(events) == 1 and events[0].message is not None
    assert events[0].message.text() == sdk_agent.DIRECT_REPLY


async def test_stream_ends_at_input_required(client: Client) -> None:
    events = await collect(client.stream("ask"))
    assert events[0].task is not None
    last = events[-1].status_update
    assert last is not None and last.status.state is TaskState.INPUT_REQUIRED
    assert last.status.message is not None and last.status.message.text() == sdk_agent.QUESTION


# -- cancel and subscribe --------------------------------------------------------------------------------


async def test_cancel_of_a_task_started_with_return_immediately(client: Client) -> None:
    task = await start_slow(client)
    canceled = await client.cancel_task(task.id)
    assert canceled.id == task.id and canceled.status.state is TaskState.CANCELED
    again = await client.get_task(task.id)
    assert again.status.state is TaskState.CANCELED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(task.id)


async def test_cancel_while_streaming_ends_the_stream_canceled(client: Client) -> None:
    events: list[m.StreamResponse] = []
    async with asyncio.timeout(WAIT):
        async for event in client.stream("slow"):
            events.append(event)
            if state_of(event) is TaskState.WORKING:
                assert events[0].task is not None
                canceled = await client.cancel_task(events[0].task.id)
                assert canceled.status.state is TaskState.CANCELED
    assert [state_of(e) for e in events] == [TaskState.SUBMITTED, TaskState.WORKING, TaskState.CANCELED]
    last = events[-1].status_update
    assert last is not None and last.status.message is not None
    assert last.status.message.text() == "canceled by the client"


async def test_subscribe_to_a_running_task_follows_it_to_completion(
    client: Client, sdk_server: SdkServer
) -> None:
    task = await start_slow(client)
    events: list[m.StreamResponse] = []
    async with asyncio.timeout(WAIT):
        async for event in client.subscribe(task.id):
            events.append(event)
            if len(events) == 1:
                assert event.task is not None and event.task.id == task.id
                assert event.task.status.state in (TaskState.SUBMITTED, TaskState.WORKING)
                sdk_server.executor.release(task.id)
    assert state_of(events[-1]) is TaskState.COMPLETED
    assert list(reassemble(events).values()) == [["released"]]
    done = await client.get_task(task.id)
    assert done.status.state is TaskState.COMPLETED and artifact_texts(done) == ["released"]


async def test_subscribe_to_a_running_task_sees_the_cancel(client: Client) -> None:
    task = await start_slow(client)
    events: list[m.StreamResponse] = []
    async with asyncio.timeout(WAIT):
        async for event in client.subscribe(task.id):
            events.append(event)
            if len(events) == 1:
                await client.cancel_task(task.id)
    assert events[0].task is not None and state_of(events[-1]) is TaskState.CANCELED


async def test_subscribe_to_a_task_waiting_for_input_follows_the_answer(client: Client) -> None:
    asked = await client.send("ask")
    assert isinstance(asked, m.Task)
    events: list[m.StreamResponse] = []
    async with asyncio.timeout(WAIT):
        async for event in client.subscribe(asked.id):  # an interrupted task keeps the stream open
            events.append(event)
            if len(events) == 1:
                assert state_of(event) is TaskState.INPUT_REQUIRED
                done = await client.send("Lin", task_id=asked.id, context_id=asked.context_id)
                assert isinstance(done, m.Task) and done.status.state is TaskState.COMPLETED
    assert state_of(events[-1]) is TaskState.COMPLETED
    assert list(reassemble(events).values()) == [["hello, Lin"]]


async def test_subscribe_to_a_terminal_task_is_unsupported(client: Client) -> None:
    task = await client.send("done already")
    assert isinstance(task, m.Task)
    with pytest.raises(UnsupportedOperationError):
        await collect(client.subscribe(task.id))
    with pytest.raises(TaskNotFoundError):
        await collect(client.subscribe(f"no-such-task-{uuid.uuid4()}"))


# -- get and list ----------------------------------------------------------------------------------------


async def test_get_task_honours_history_length(client: Client) -> None:
    asked = await client.send("ask")
    assert isinstance(asked, m.Task)
    done = await client.send("Ada", task_id=asked.id, context_id=asked.context_id)
    assert isinstance(done, m.Task)
    full = await client.get_task(asked.id)
    assert len(full.history) >= 2 and full.history[0].text() == "ask" and full.history[-1].text() == "Ada"
    assert (await client.get_task(asked.id, history_length=0)).history == []
    last = await client.get_task(asked.id, history_length=1)
    assert [h.text() for h in last.history] == ["Ada"]


async def test_list_tasks_filters_by_context_and_state(client: Client) -> None:
    first = await client.send("one")
    assert isinstance(first, m.Task)
    second = await client.send("two", context_id=first.context_id)
    failed = await client.send("fail", context_id=first.context_id)
    assert isinstance(second, m.Task) and isinstance(failed, m.Task)
    page = await client.list_tasks(context_id=first.context_id, page_size=10)
    assert {t.id for t in page.tasks} == {first.id, second.id, failed.id}
    assert page.total_size == 3 and page.next_page_token == ""
    assert all(t.artifacts == [] for t in page.tasks)  # includeArtifacts defaults to false
    completed = await client.list_tasks(context_id=first.context_id, status=TaskState.COMPLETED)
    assert {t.id for t in completed.tasks} == {first.id, second.id}
    with_artifacts = await client.list_tasks(
        context_id=first.context_id, status=TaskState.FAILED, include_artifacts=True, history_length=0
    )
    assert [(t.id, t.history) for t in with_artifacts.tasks] == [(failed.id, [])]


async def test_list_tasks_pages_through_a_context(client: Client) -> None:
    first = await client.send("page 0")
    assert isinstance(first, m.Task)
    ids = {first.id}
    for i in range(1, 5):
        task = await client.send(f"page {i}", context_id=first.context_id)
        assert isinstance(task, m.Task)
        ids.add(task.id)
    seen: list[str] = []
    token = ""
    for _ in range(5):
        page = await client.list_tasks(context_id=first.context_id, page_size=2, page_token=token)
        assert page.total_size == 5 and page.page_size == 2 and len(page.tasks) <= 2
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 5


async def test_list_tasks_by_status_timestamp(client: Client) -> None:
    task = await client.send("stamped")
    assert isinstance(task, m.Task) and task.status.timestamp is not None
    stamp = task.status.timestamp
    before = await client.list_tasks(
        context_id=task.context_id, status_timestamp_after=stamp - dt.timedelta(seconds=1)
    )
    assert [t.id for t in before.tasks] == [task.id]
    after = await client.list_tasks(
        context_id=task.context_id, status_timestamp_after=stamp + dt.timedelta(seconds=1)
    )
    assert after.tasks == [] and after.total_size == 0


# -- errors ----------------------------------------------------------------------------------------------


async def test_unknown_task_is_task_not_found(client: Client) -> None:
    with pytest.raises(TaskNotFoundError):
        await client.get_task(f"no-such-task-{uuid.uuid4()}")
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task(f"no-such-task-{uuid.uuid4()}")


@pytest.mark.parametrize("binding", BINDINGS)
async def test_an_agent_that_raises_is_an_internal_error(sdk_server: SdkServer, binding: str) -> None:
    # Over gRPC the sdk ends the call UNKNOWN ("Unexpected <class 'RuntimeError'>: ...") with no ErrorInfo,
    # where A2A says INTERNAL with ErrorInfo INTERNAL_ERROR; the client reads a status it has no error for
    # as InternalError all the same.
    async with await Client.connect(sdk_server.url, bindings=(binding,), timeout=WAIT) as client:
        with pytest.raises(InternalError):
            await client.send("crash")
        events: list[m.StreamResponse] = []
        with pytest.raises(InternalError):
            async with asyncio.timeout(WAIT):
                async for event in client.stream("crash"):
                    events.append(event)
        assert events[0].task is not None and state_of(events[-1]) is TaskState.WORKING
        crashed = await client.get_task(events[0].task.id)
        assert crashed.status.state is TaskState.FAILED  # the sdk marks the task failed


async def test_cancel_of_a_completed_task_is_not_cancelable(client: Client) -> None:
    task = await client.send("finished")
    assert isinstance(task, m.Task) and task.status.state is TaskState.COMPLETED
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(task.id)


async def test_a_message_to_a_terminal_task_is_unsupported(client: Client) -> None:
    task = await client.send("over")
    assert isinstance(task, m.Task) and task.status.state is TaskState.COMPLETED
    with pytest.raises(UnsupportedOperationError):
        await client.send("more", task_id=task.id)
    with pytest.raises(UnsupportedOperationError):
        await collect(client.stream("more", task_id=task.id))


async def test_a_message_to_an_unknown_task_or_another_context_is_refused(client: Client) -> None:
    with pytest.raises(TaskNotFoundError):
        await client.send("hi", task_id=f"no-such-task-{uuid.uuid4()}")
    asked = await client.send("ask")
    assert isinstance(asked, m.Task)
    with pytest.raises(InvalidParamsError):
        await client.send("Ada", task_id=asked.id, context_id=f"other-{uuid.uuid4()}")
    assert (await client.get_task(asked.id)).status.state is TaskState.INPUT_REQUIRED


# -- a conversation --------------------------------------------------------------------------------------


async def test_input_required_then_the_answer_completes_the_task(client: Client) -> None:
    asked = await client.send("ask")
    assert isinstance(asked, m.Task) and asked.status.state is TaskState.INPUT_REQUIRED
    assert asked.status.message is not None and asked.status.message.text() == sdk_agent.QUESTION
    done = await client.send("Ada", task_id=asked.id, context_id=asked.context_id)
    assert isinstance(done, m.Task) and done.id == asked.id and done.context_id == asked.context_id
    assert done.status.state is TaskState.COMPLETED and artifact_texts(done) == ["hello, Ada"]


async def test_an_answer_streamed_to_an_input_required_task(client: Client) -> None:
    asked = await client.send("ask")
    assert isinstance(asked, m.Task)
    events = await collect(client.stream("Grace", task_id=asked.id, context_id=asked.context_id))
    assert state_of(events[-1]) is TaskState.COMPLETED
    assert list(reassemble(events).values()) == [["hello, Grace"]]


async def test_cancel_of_a_task_waiting_for_input(client: Client) -> None:
    asked = await client.send("ask")
    assert isinstance(asked, m.Task)
    canceled = await client.cancel_task(asked.id)
    assert canceled.status.state is TaskState.CANCELED
    with pytest.raises(UnsupportedOperationError):
        await client.send("too late", task_id=asked.id)


# -- push notification configs ---------------------------------------------------------------------------


async def test_push_config_create_get_list_delete(client: Client) -> None:
    task = await start_slow(client)
    try:
        created = await client.create_push_config(task.id, HOOK, id="hook-1", token="secret-token")
        assert (created.task_id, created.id, created.url, created.token) == (
            task.id,
            "hook-1",
            HOOK,
            "secret-token",
        )
        second = await client.create_push_config(task.id, HOOK + "/2")
        assert second.id and second.id != "hook-1"  # the agent names a config made without an id
        got = await client.get_push_config(task.id, "hook-1")
        assert got.url == HOOK and got.token == "secret-token"
        listed = await client.list_push_configs(task.id)
        assert {c.id for c in listed.configs} == {"hook-1", second.id}
        await client.delete_push_config(task.id, "hook-1")
        remaining = await client.list_push_configs(task.id)
        assert [c.id for c in remaining.configs] == [second.id]
        with pytest.raises(TaskNotFoundError):  # the sdk's answer for an unknown config id
            await client.get_push_config(task.id, "hook-1")
    finally:
        await client.cancel_task(task.id)


async def test_push_config_given_with_the_message_is_stored(client: Client) -> None:
    config = m.SendMessageConfiguration(
        task_push_notification_config=m.TaskPushNotificationConfig(url=HOOK, token="inline"),
        return_immediately=True,
    )
    task = await client.send("slow", configuration=config)
    assert isinstance(task, m.Task)
    try:
        listed = await client.list_push_configs(task.id)
        assert [(c.task_id, c.url, c.token) for c in listed.configs] == [(task.id, HOOK, "inline")]
        assert listed.configs[0].id  # the agent names it
    finally:
        await client.cancel_task(task.id)


async def test_push_config_of_an_unknown_task_is_task_not_found(client: Client) -> None:
    with pytest.raises(TaskNotFoundError):
        await client.create_push_config(f"no-such-task-{uuid.uuid4()}", HOOK)
