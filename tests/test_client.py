"""The client (skillwire.client) against real skillwire servers, on every binding."""

from __future__ import annotations

import ast
import asyncio
import itertools
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import RunningServer, collect, example_agent, gated_agent, state_of
from skillwire import Client, RetryPolicy, TaskFailedError, TaskState
from skillwire.client import AgentConnectionError, HTTPStatusError, NoCompatibleInterfaceError
from skillwire.client.client import select_interface
from skillwire.errors import (
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from skillwire.protocol import models as m
from skillwire.types import Operation

BINDINGS = ["JSONRPC", "HTTP+JSON"]
#: The behaviour tests run on every binding; retry and resume tests on the HTTP ones (gRPC has its own in
#: test_client_grpc.py).
EVERY_BINDING = [*BINDINGS, "GRPC"]
FAST = RetryPolicy(retries=3, base=0.0, cap=0.01)
WAIT = 10.0  # the cap on every wait in this module, in seconds


def msg(prefix: str, text: str = "hi") -> m.Message:
    return m.Message(message_id=f"{prefix}-{uuid.uuid4()}", role=m.Role.USER, parts=[m.Part(text=text)])


@pytest.fixture
def tck(serve: Any) -> RunningServer:
    return serve(example_agent("tck").asgi(store="memory://", grpc_port=0))  # type: ignore[no-any-return]


@pytest.fixture(params=EVERY_BINDING)
async def client(request: pytest.FixtureRequest, tck: RunningServer) -> AsyncIterator[Client]:
    async with await Client.connect(tck.url, bindings=(request.param,), timeout=WAIT) as c:
        assert c.interface is not None and c.interface.protocol_binding == request.param
        yield c


# -- every operation, every binding ------------------------------------------------------------------------


async def test_send_returns_the_completed_task(client: Client) -> None:
    task = await client.send(msg("tck-complete-task"))
    assert isinstance(task, m.Task) and task.status.state is TaskState.COMPLETED
    assert task.status.message is not None and task.status.message.text() == "Hello from TCK"


async def test_send_text_returns_a_direct_message(client: Client) -> None:
    reply = await client.send("tck-message-response")
    assert isinstance(reply, m.Message) and reply.role is m.Role.AGENT
    assert reply.text() == "Direct message response"


async def test_send_of_an_input_required_task_is_a_result(client: Client) -> None:
    task = await client.send(msg("tck-input-required"))
    assert isinstance(task, m.Task) and task.status.state is TaskState.INPUT_REQUIRED


async def test_failed_task_is_a_result_unless_raise_on_failure(client: Client) -> None:
    task = await client.send(msg("tck-task-failure"))
    assert isinstance(task, m.Task) and task.status.state is TaskState.FAILED
    with pytest.raises(TaskFailedError) as caught:
        await client.send(msg("tck-reject-task"), raise_on_failure=True)
    assert caught.value.task.status.state is TaskState.REJECTED
    assert "REJECTED" in str(caught.value)


async def test_get_task_with_history_length(client: Client) -> None:
    sent = await client.send(msg("tck-artifact-data"))
    assert isinstance(sent, m.Task)
    task = await client.get_task(sent.id, history_length=0)
    assert task.id == sent.id and task.history == []
    assert task.artifacts[0].parts[0].data == {"key": "value", "count": 42}


async def test_list_tasks_filters_by_context(client: Client) -> None:
    first = await client.send(msg("tck-complete-task"))
    assert isinstance(first, m.Task)
    again = await client.send(msg("tck-complete-task"), context_id=first.context_id)
    assert isinstance(again, m.Task)
    page = await client.list_tasks(context_id=first.context_id, page_size=10, include_artifacts=False)
    assert {t.id for t in page.tasks} == {first.id, again.id}
    assert page.total_size == 2 and page.next_page_token == ""
    completed = await client.list_tasks(status=TaskState.COMPLETED)
    assert all(t.status.state is TaskState.COMPLETED for t in completed.tasks)


async def test_cancel_task_then_cancel_again_is_not_cancelable(client: Client) -> None:
    config = m.SendMessageConfiguration(return_immediately=True)
    task = await client.send(msg("tck-long-running"), configuration=config)
    assert isinstance(task, m.Task)
    canceled = await client.cancel_task(task.id)
    assert canceled.status.state is TaskState.CANCELED
    with pytest.raises(TaskNotCancelableError) as caught:
        await client.cancel_task(task.id)
    assert caught.value.metadata  # the ErrorInfo metadata survives the trip


async def test_unknown_task_is_task_not_found_with_metadata(client: Client) -> None:
    with pytest.raises(TaskNotFoundError) as caught:
        await client.get_task("no-such-task")
    assert caught.value.metadata.get("taskId") == "no-such-task"
    assert "no-such-task" in caught.value.message
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task("no-such-task")


async def test_stream_yields_task_then_updates_until_completed(client: Client) -> None:
    events = await collect(client.stream(msg("tck-stream-001")))
    assert events[0].task is not None
    assert [e.artifact_update.artifact.parts[0].text for e in events if e.artifact_update] == [
        "Stream hello from TCK"
    ]
    assert state_of(events[-1]) is TaskState.COMPLETED


async def test_stream_of_a_direct_message_is_one_event(client: Client) -> None:
    events = await collect(client.stream(msg("tck-message-response")))
    assert len(events) == 1 and events[0].message is not None


async def test_subscribe_gets_the_snapshot_then_the_cancel(client: Client) -> None:
    config = m.SendMessageConfiguration(return_immediately=True)
    task = await client.send(msg("tck-long-running"), configuration=config)
    assert isinstance(task, m.Task)
    events: list[m.StreamResponse] = []
    async with asyncio.timeout(WAIT):
        async for event in client.subscribe(task.id):
            events.append(event)
            if len(events) == 1:
                assert event.task is not None and event.task.id == task.id
                await client.cancel_task(task.id)
    assert state_of(events[-1]) is TaskState.CANCELED


async def test_subscribe_to_a_terminal_task_is_unsupported(client: Client) -> None:
    task = await client.send(msg("tck-complete-task"))
    assert isinstance(task, m.Task)
    with pytest.raises(UnsupportedOperationError):
        await collect(client.subscribe(task.id))
    with pytest.raises(TaskNotFoundError):
        await collect(client.subscribe("no-such-task"))


async def test_push_config_calls_round_trip(client: Client) -> None:
    task = await client.send(msg("tck-complete-task"))
    assert isinstance(task, m.Task)
    created = await client.create_push_config(task.id, "https://example.com/hook", token="t")
    assert created.id and created.task_id == task.id and created.token == "t"
    assert (await client.get_push_config(task.id, created.id)).url == "https://example.com/hook"
    assert [c.id for c in (await client.list_push_configs(task.id)).configs] == [created.id]
    await client.delete_push_config(task.id, created.id)
    with pytest.raises(TaskNotFoundError):
        await client.get_push_config(task.id, created.id)


@pytest.mark.parametrize("binding", EVERY_BINDING)
async def test_push_config_calls_raise_push_not_supported_when_push_is_off(serve: Any, binding: str) -> None:
    srv = serve(example_agent("tck").asgi(store="memory://", grpc_port=0, push=False))
    async with await Client.connect(srv.url, bindings=(binding,), timeout=WAIT) as client:
        task = await client.send(msg("tck-complete-task"))
        assert isinstance(task, m.Task)
        calls = [
            client.create_push_config(task.id, "https://example.com/hook", token="t"),
            client.get_push_config(task.id, "c1"),
            client.list_push_configs(task.id),
            client.delete_push_config(task.id, "c1"),
        ]
        for call in calls:
            with pytest.raises(PushNotificationNotSupportedError):
                await call


async def test_extended_card_when_not_offered_is_unsupported(client: Client) -> None:
    assert not client.card.capabilities.extended_agent_card
    with pytest.raises(UnsupportedOperationError):
        await client.get_extended_card()


# -- card discovery --------------------------------------------------------------------------------------


async def test_card_is_revalidated_with_etag_and_304(tck: RunningServer) -> None:
    seen: list[tuple[int, str | None]] = []

    async def record(response: httpx.Response) -> None:
        if response.url.path.endswith("agent-card.json"):
            seen.append((response.status_code, response.request.headers.get("if-none-match")))

    async with httpx.AsyncClient(event_hooks={"response": [record]}) as http:
        client = await Client.connect(tck.url, http=http)
        card = await client.refresh_card()
        assert card is client.card and card.name == "skillwire TCK agent"
        await client.aclose()
        assert not http.is_closed  # a shared httpx client is the caller's to close
    assert seen[0] == (200, None)
    assert seen[1][0] == 304 and seen[1][1]


async def test_binding_order_is_the_clients_choice(tck: RunningServer) -> None:
    async with await Client.connect(tck.url) as default:
        assert default.interface is not None and default.interface.protocol_binding == "JSONRPC"
    async with await Client.connect(tck.url, bindings=("HTTP+JSON", "JSONRPC")) as rest:
        assert rest.interface is not None and rest.interface.protocol_binding == "HTTP+JSON"


def test_select_interface_needs_protocol_1_0() -> None:
    def iface(binding: str, version: str) -> m.AgentInterface:
        return m.AgentInterface(url="http://a", protocol_binding=binding, protocol_version=version)

    card = m.AgentCard(
        name="a",
        description="a",
        version="1",
        supported_interfaces=[iface("JSONRPC", "0.3"), iface("GRPC", "1.0"), iface("JSONRPC", "1.0.1")],
        capabilities=m.AgentCapabilities(),
        default_input_modes=[],
        default_output_modes=[],
        skills=[],
    )
    assert select_interface(card, ["HTTP+JSON", "JSONRPC"]) is card.supported_interfaces[2]
    with pytest.raises(NoCompatibleInterfaceError):
        select_interface(card, ["HTTP+JSON"])


# -- retries ---------------------------------------------------------------------------------------------


class Flaky:
    """An ASGI wrapper that answers the next ``armed`` HTTP requests with 503 and ``Retry-After: 0``."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.armed = 0
        self.requests = 0

    def __getattr__(self, name: str) -> Any:  # the test server calls the app's shutdown()
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.requests += 1
            if self.armed:
                self.armed -= 1
                headers = [(b"retry-after", b"0"), (b"content-type", b"text/plain")]
                await send({"type": "http.response.start", "status": 503, "headers": headers})
                await send({"type": "http.response.body", "body": b"busy"})
                return
        await self.app(scope, receive, send)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_idempotent_calls_retry_503_with_retry_after(serve: Any, binding: str) -> None:
    flaky = Flaky(example_agent("tck").asgi(store="memory://"))
    srv = serve(flaky)
    flaky.armed = 2
    async with await Client.connect(srv.url, bindings=(binding,), retries=FAST) as client:
        assert flaky.requests == 3  # the card: 503, 503, 200
        task = await client.send(msg("tck-complete-task"))
        assert isinstance(task, m.Task)
        flaky.armed, flaky.requests = 2, 0
        got = await client.get_task(task.id)
        assert got.id == task.id and flaky.requests == 3
        flaky.armed, flaky.requests = 2, 0
        listed = await client.list_tasks()
        assert listed.total_size == 1 and flaky.requests == 3


@pytest.mark.parametrize("binding", BINDINGS)
async def test_send_message_is_retried_only_with_idempotency_keys_and_retries_are_bounded(
    serve: Any, binding: str
) -> None:
    flaky = Flaky(example_agent("tck").asgi(store="memory://"))
    srv = serve(flaky)
    policy = RetryPolicy(retries=1, base=0.0, cap=0.01)
    async with await Client.connect(srv.url, bindings=(binding,), retries=policy) as client:
        assert client.idempotency_keys  # a skillwire agent declares them: a send is retried with its key
        flaky.armed, flaky.requests = 5, 0
        with pytest.raises(HTTPStatusError) as caught:
            await client.send(msg("tck-complete-task"))
        assert caught.value.status_code == 503 and caught.value.retry_after == 0.0
        assert flaky.requests == 2  # one try and one retry
        client.idempotency_keys = False  # as with an agent that does not honour keys: never retried
        flaky.requests = 0
        with pytest.raises(HTTPStatusError):
            await client.send(msg("tck-complete-task"))
        assert flaky.requests == 1
        flaky.requests = 0
        with pytest.raises(HTTPStatusError):
            await client.get_task("t1")
        assert flaky.requests == 2  # one try and one retry


async def test_unreachable_agent_is_a_connection_error() -> None:
    from conftest import free_port

    with pytest.raises(AgentConnectionError):
        await Client.connect(f"http://127.0.0.1:{free_port()}", retries=FAST)


def test_backoff_is_full_jitter_capped_and_honours_retry_after() -> None:
    policy = RetryPolicy(retries=3, base=1.0, cap=2.5)
    for attempt, bound in enumerate((1.0, 2.0, 2.5)):
        assert all(0.0 <= (policy.delay(attempt) or 0.0) <= bound for _ in range(50))
    assert policy.delay(3) is None
    assert policy.delay(0, retry_after=2.0) == 2.0
    assert policy.delay(0, retry_after=60.0) is None  # longer than the cap: give up rather than wait


# -- stream resumption -----------------------------------------------------------------------------------


class CutStream:
    """An ASGI wrapper that breaks the first SSE response after ``after`` events: it forwards those events,
    tells the app the client went away, and returns without finishing the response, so the server closes
    the connection mid-body."""

    def __init__(self, app: Any, after: int) -> None:
        self.app = app
        self.after = after
        self.cuts_left = 1
        self.streams: list[str] = []
        #: Set (in the server's thread) when a second SSE response starts: the resumed stream is live.
        self.resumed = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cut = asyncio.Event()
        cutting = False
        forwarded = 0

        async def send_(message: dict[str, Any]) -> None:
            nonlocal cutting, forwarded
            if cut.is_set():
                return
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
                    self.streams.append(scope["path"])
                    if len(self.streams) == 2:
                        self.resumed.set()
                    cutting = self.cuts_left > 0
                    self.cuts_left -= cutting
                await send(message)
                return
            if not cutting:
                await send(message)
                return
            body, out = message.get("body", b""), b""
            while body and forwarded < self.after:
                end = body.find(b"\n\n")
                event, body = (body, b"") if end < 0 else (body[: end + 2], body[end + 2 :])
                out += event
                forwarded += b"data:" in event
            if out:
                await send({"type": "http.response.body", "body": out, "more_body": True})
            if forwarded >= self.after:
                cut.set()

        async def receive_() -> dict[str, Any]:
            if cut.is_set():
                return {"type": "http.disconnect"}
            getter = asyncio.ensure_future(receive())
            waiter = asyncio.ensure_future(cut.wait())
            done, _ = await asyncio.wait({getter, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if getter in done:
                return getter.result()  # type: ignore[no-any-return]
            getter.cancel()
            return {"type": "http.disconnect"}

        await self.app(scope, receive_, send_)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_dropped_stream_resumes_without_repeats(serve: Any, binding: str, gate: Any) -> None:
    cutter = CutStream(gated_agent(gate).asgi(store="memory://"), after=1)
    srv = serve(cutter)
    events: list[m.StreamResponse] = []
    async with await Client.connect(srv.url, bindings=(binding,), retries=FAST) as client:
        async with asyncio.timeout(WAIT):
            async for event in client.stream(msg("gated")):
                events.append(event)
                if event.artifact_update is not None and event.artifact_update.artifact.artifact_id == "a1":
                    gate.set()  # a1 came from the resumed stream's snapshot; a2 will come live
    assert len(cutter.streams) == 2 and cutter.cuts_left == 0  # the original stream and one resubscription
    assert events[0].task is not None
    assert sum(e.task is not None for e in events) == 1  # the snapshot is not shown again
    artifacts = [e.artifact_update.artifact for e in events if e.artifact_update]
    assert [(a.artifact_id, a.parts[0].text) for a in artifacts] == [("a1", "one"), ("a2", "two")]
    states = [s for s in map(state_of, events) if s is not None]
    assert states[-1] is TaskState.COMPLETED and states.count(TaskState.COMPLETED) == 1
    assert all(a != b for a, b in itertools.pairwise(states))  # no status twice in a row


@pytest.mark.parametrize("binding", BINDINGS)
async def test_dropped_stream_resumes_live_until_canceled(serve: Any, binding: str) -> None:
    cutter = CutStream(example_agent("tck").asgi(store="memory://"), after=2)
    srv = serve(cutter)
    events: list[m.StreamResponse] = []

    async def cancel_once_resumed(client: Client, task_id: str) -> None:
        assert await asyncio.to_thread(cutter.resumed.wait, WAIT)
        await client.cancel_task(task_id)

    async with (
        await Client.connect(srv.url, bindings=(binding,), retries=FAST) as client,
        asyncio.timeout(WAIT),
        asyncio.TaskGroup() as group,
    ):
        async for event in client.stream(msg("tck-long-running")):
            events.append(event)
            if len(events) == 2:  # the line is cut after this one
                assert state_of(event) is TaskState.WORKING and events[0].task is not None
                group.create_task(cancel_once_resumed(client, events[0].task.id))
    assert len(cutter.streams) == 2
    states = [state_of(e) for e in events]
    assert states == [states[0], TaskState.WORKING, TaskState.CANCELED]
    assert sum(e.task is not None for e in events) == 1


async def test_stream_dropped_before_the_task_is_known_is_resent_only_with_idempotency_keys(
    serve: Any,
) -> None:
    cutter = CutStream(example_agent("tck").asgi(store="memory://"), after=0)
    srv = serve(cutter)
    async with await Client.connect(srv.url, retries=FAST) as client:
        client.idempotency_keys = False  # as with an agent that does not honour keys
        with pytest.raises(AgentConnectionError):
            await collect(client.stream(msg("tck-complete-task")))
        assert len(cutter.streams) == 1  # not idempotent there: no second attempt
        cutter.cuts_left = 1
        client.idempotency_keys = True  # a skillwire agent: sent again with its key, the same task follows
        events = await collect(client.stream(msg("tck-complete-task")))
    assert len(cutter.streams) == 3
    assert events[0].task is not None and state_of(events[-1]) is TaskState.COMPLETED


class ScriptedTransport:
    """A transport with canned answers: the stream breaks after the task, the task ends meanwhile."""

    def __init__(self, final: m.Task) -> None:
        self.final = final
        self.calls: list[Operation] = []

    async def send(self, operation: Operation, request: Any) -> Any:
        self.calls.append(operation)
        assert operation is Operation.GET_TASK
        return self.final

    async def stream(self, operation: Operation, request: Any) -> AsyncIterator[m.StreamResponse]:
        self.calls.append(operation)
        if operation is Operation.SUBSCRIBE_TO_TASK:
            raise UnsupportedOperationError("the task is terminal")
        working = m.Task(id="t", context_id="c", status=m.TaskStatus(state=TaskState.WORKING))
        yield m.StreamResponse(task=working)
        raise AgentConnectionError("cut")


async def test_resume_of_a_task_that_ended_meanwhile_reads_its_final_state() -> None:
    art = m.Artifact(artifact_id="a", parts=[m.Part(text="x")])
    final = m.Task(id="t", context_id="c", status=m.TaskStatus(state=TaskState.COMPLETED), artifacts=[art])
    transport = ScriptedTransport(final)
    client = Client(transport, retry=FAST)
    events = await collect(client.stream("hi"))
    assert transport.calls == [
        Operation.SEND_STREAMING_MESSAGE,
        Operation.SUBSCRIBE_TO_TASK,
        Operation.GET_TASK,
    ]
    assert events[1].artifact_update is not None and events[1].artifact_update.artifact.artifact_id == "a"
    assert state_of(events[2]) is TaskState.COMPLETED and len(events) == 3


# -- layering --------------------------------------------------------------------------------------------


def test_client_never_imports_the_server() -> None:
    package = Path(__file__).resolve().parent.parent / "src" / "skillwire" / "client"
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            for name in names:
                assert not name.startswith(("skillwire.server", "skillwire.agent", "skillwire.skills")), (
                    f"{path.name} imports {name}"
                )
