"""Interop: the official a2a-sdk client (PyPI ``a2a-sdk`` 1.3) against a real server, on each of the three
bindings (JSON-RPC, HTTP+JSON, gRPC): one behaviour suite that must give the same results, errors and events
on every binding.

Every test resolves the agent card with the sdk's ``A2ACardResolver``, builds its clients with the sdk's
``ClientFactory`` and talks to a skillwire server running under uvicorn, over memory and SQLite stores.

The sdk parses responses leniently (unknown fields are ignored), so the shared ``httpx`` client also
checks every body it receives strictly: the card, each JSON-RPC response and each SSE event of a stream
must parse into a2a-sdk's protobuf types with no unknown field, and errors must carry a google.rpc
``ErrorInfo``. A strictness failure is raised (``AssertionError`` or protobuf's ``ParseError``) from inside
the sdk call, so it fails the test that made it.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import httpx
import pytest
from a2a.client import (
    A2ACardResolver,
    AgentCardResolutionError,
    Client,
    ClientConfig,
    ClientFactory,
    create_client,
)
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from conftest import RunningServer, assert_proto, assert_rpc_error, assert_rpc_result, example_agent

WAIT = 15.0
V03_CARD_MEMBERS = {
    "protocolVersion",
    "url",
    "preferredTransport",
    "additionalInterfaces",
    "supportsAuthenticatedExtendedCard",
    "security",
}
CARD_PATH = "/.well-known/agent-card.json"

T = TypeVar("T")

SUBMITTED = pb.TASK_STATE_SUBMITTED
WORKING = pb.TASK_STATE_WORKING
COMPLETED = pb.TASK_STATE_COMPLETED
CANCELED = pb.TASK_STATE_CANCELED
INPUT_REQUIRED = pb.TASK_STATE_INPUT_REQUIRED


# -- strict checks of what the sdk receives ---------------------------------------------------------------


def _check_rpc_body(body: Any, request: dict[str, Any]) -> None:
    assert isinstance(body, dict), body
    assert body.get("id") == request["id"], (request, body)
    if "error" in body:
        assert_rpc_error(body, body["error"]["code"])
    else:
        assert_rpc_result(body, request["method"])


_REST_RESULTS = (
    (re.compile(r"^(/[^/]+)?/message:send$"), "SendMessageResponse"),
    (re.compile(r"^(/[^/]+)?/tasks/[^/:]+:cancel$"), "Task"),
    (re.compile(r"^(/[^/]+)?/tasks/[^/:]+$"), "Task"),
    (re.compile(r"^(/[^/]+)?/tasks$"), "ListTasksResponse"),
)


def _check_rest_body(path: str, status: int, body: Any) -> None:
    """A REST response: an AIP-193 error with ErrorInfo, or the route's v1.0 result type."""
    if status >= 400:
        error = body["error"]
        assert error["code"] == status and error["status"] and isinstance(error["message"], str)
        assert error["details"][0]["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
        return
    for pattern, message in _REST_RESULTS:
        if pattern.match(path):
            assert_proto(body, message)
            return
    raise AssertionError(f"unexpected REST path {path}")


class _StrictSSE(httpx.AsyncByteStream):
    """Passes an SSE body through unchanged, checking each event's payload as it goes by: a JSON-RPC response
    (``request`` given) or, on REST, a bare StreamResponse or an AIP-193 error."""

    def __init__(self, inner: Any, request: dict[str, Any] | None) -> None:
        self._inner = inner
        self._request = request
        self._buffer = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._buffer += chunk
            *events, self._buffer = self._buffer.replace(b"\r\n", b"\n").split(b"\n\n")
            for event in events:
                self._check(event)
            yield chunk
        self._check(self._buffer)

    def _check(self, event: bytes) -> None:
        data = [line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:")]
        if not data:
            return
        body = json.loads(b"\n".join(data))
        if self._request is not None:
            _check_rpc_body(body, self._request)
        elif "error" in body:
            _check_rest_body("", body["error"]["code"], body)
        else:
            assert_proto(body, "StreamResponse")

    async def aclose(self) -> None:
        await self._inner.aclose()


async def _strict_response_hook(response: httpx.Response) -> None:
    request = response.request
    if request.method == "GET" and request.url.path == CARD_PATH and response.status_code == 200:
        await response.aread()
        card = response.json()
        # The v1.0 members parse strictly; the v0.3 members beside them serve v0.3 clients.
        if "protocolVersion" in card:  # examples/tck leaves them off (the v1.0 suite's card schema is strict)
            assert card["protocolVersion"] == "0.3.0" and card["preferredTransport"] == "JSONRPC"
        assert_proto({k: v for k, v in card.items() if k not in V03_CARD_MEMBERS}, "AgentCard")
        return
    rest = request.url.path != "/"
    if request.method != "POST" and not rest:
        return
    rpc_request = None if rest else json.loads(request.content)
    if "text/event-stream" in response.headers.get("content-type", ""):
        response.stream = _StrictSSE(response.stream, rpc_request)
        return
    await response.aread()
    if rpc_request is not None:
        _check_rpc_body(response.json(), rpc_request)
    else:
        _check_rest_body(request.url.path, response.status_code, response.json())


# -- fixtures ----------------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return "memory://" if request.param == "memory" else f"sqlite:///{tmp_path}/t.db"


@pytest.fixture(params=["JSONRPC", "HTTP+JSON", "GRPC"])
def binding(request: pytest.FixtureRequest) -> str:
    """The transport the sdk client is restricted to."""
    return str(request.param)


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    """The httpx client the sdk uses, checking every response strictly (see the module docstring)."""
    async with httpx.AsyncClient(timeout=WAIT, event_hooks={"response": [_strict_response_hook]}) as client:
        yield client


@dataclass
class Peer:
    """A running server and sdk clients for it: ``streaming`` uses SSE, ``blocking`` plain SendMessage."""

    srv: RunningServer
    card: pb.AgentCard
    streaming: Client
    blocking: Client


@pytest.fixture
async def connect(
    serve: Callable[[Any], RunningServer], store: str, binding: str, http: httpx.AsyncClient
) -> AsyncIterator[Callable[[str], Awaitable[Peer]]]:
    clients: list[Client] = []

    async def _connect(example: str) -> Peer:
        grpc_port = 0 if binding == "GRPC" else None
        srv = serve(example_agent(example).asgi(store=store, grpc_port=grpc_port))
        card = await A2ACardResolver(http, srv.url).get_agent_card()
        bindings = [binding]

        def config(streaming: bool) -> ClientConfig:
            return ClientConfig(
                httpx_client=http,
                streaming=streaming,
                supported_protocol_bindings=bindings,
                grpc_channel_factory=grpc.aio.insecure_channel,
            )

        streaming = ClientFactory(config(True)).create(card)
        blocking = ClientFactory(config(False)).create(card)
        clients.extend([streaming, blocking])
        return Peer(srv, card, streaming, blocking)

    yield _connect
    for client in clients:
        await client.close()


# -- helpers -----------------------------------------------------------------------------------------------


def message(text: str, *, task_id: str = "", context_id: str = "", message_id: str = "") -> pb.Message:
    return pb.Message(
        message_id=message_id or str(uuid.uuid4()),
        role=pb.ROLE_USER,
        parts=[pb.Part(text=text)],
        task_id=task_id,
        context_id=context_id,
    )


def send_request(
    text: str, *, configuration: pb.SendMessageConfiguration | None = None, **fields: str
) -> pb.SendMessageRequest:
    request = pb.SendMessageRequest(message=message(text, **fields))
    if configuration is not None:
        request.configuration.CopyFrom(configuration)
    return request


def texts(parts: Any) -> list[str]:
    return [part.text for part in parts]


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, WAIT)


async def collect(events: AsyncIterator[pb.StreamResponse]) -> list[pb.StreamResponse]:
    """Every event of a stream, which must end by itself within ``WAIT`` seconds."""

    async def drain() -> list[pb.StreamResponse]:
        async with aclosing(events):  # type: ignore[type-var]
            return [event async for event in events]

    return await within(drain())


async def send_blocking(peer: Peer, request: pb.SendMessageRequest) -> pb.StreamResponse:
    """SendMessage through the non-streaming client: exactly one response."""
    (response,) = await collect(peer.blocking.send_message(request))
    return response


async def send_for_task(peer: Peer, request: pb.SendMessageRequest) -> pb.Task:
    response = await send_blocking(peer, request)
    assert response.WhichOneof("payload") == "task", response
    return response.task


def error_code(error: A2AError) -> int:
    return JSON_RPC_ERROR_CODE_MAP[type(error)]


def assert_error_names_task(error: A2AError, task_id: str) -> None:
    """The error carries the task id: in its ErrorInfo metadata (the sdk exposes it as ``data`` on the HTTP
    bindings; its gRPC transport keeps only the class and message), and in its message."""
    assert task_id in str(error)
    if error.data is not None:
        assert error.data["taskId"] == task_id


def kind(event: pb.StreamResponse) -> str:
    return str(event.WhichOneof("payload"))


# -- agent card --------------------------------------------------------------------------------------------


async def test_card_resolved_by_sdk_resolver(
    serve: Callable[[Any], RunningServer], store: str, http: httpx.AsyncClient
) -> None:
    srv = serve(example_agent("echo").asgi(store=store))
    card = await within(A2ACardResolver(http, srv.url).get_agent_card())

    assert card.name == "Echo"
    assert card.version == "1.0.0"
    assert card.capabilities.streaming is True
    assert card.capabilities.push_notifications is True
    assert list(card.default_input_modes) == ["text/plain", "application/json"]
    assert [skill.id for skill in card.skills] == ["echo"]
    assert list(card.skills[0].examples) == ["hello", "stream 10"]
    assert [
        (i.protocol_binding, i.protocol_version, i.url.rstrip("/")) for i in card.supported_interfaces
    ] == [
        ("JSONRPC", "1.0", srv.url),
        ("HTTP+JSON", "1.0", srv.url),
    ]

    with pytest.raises(AgentCardResolutionError) as missing:
        await within(A2ACardResolver(http, srv.url, "/no/such/card.json").get_agent_card())
    assert missing.value.status_code == 404


async def test_client_created_from_url_talks_to_the_server(
    serve: Callable[[Any], RunningServer], store: str, http: httpx.AsyncClient
) -> None:
    srv = serve(example_agent("echo").asgi(store=store))
    client = await within(create_client(srv.url, ClientConfig(httpx_client=http, streaming=False)))
    async with client:
        (response,) = await collect(client.send_message(send_request("from a url")))
    assert response.task.status.state == COMPLETED
    assert texts(response.task.artifacts[0].parts) == ["from a url"]
    # The factory pins the protocol version on the client it was given.
    assert http.headers["A2A-Version"] == "1.0"


# -- SendMessage -------------------------------------------------------------------------------------------


async def test_send_blocking_returns_completed_task_with_echo(
    connect: Callable[[str], Awaitable[Peer]],
) -> None:
    peer = await connect("echo")
    context_id = str(uuid.uuid4())
    request = send_request("hello interop", context_id=context_id)

    task = await send_for_task(peer, request)

    assert task.id
    assert task.context_id == context_id
    assert task.status.state == COMPLETED
    assert task.status.HasField("timestamp")
    (artifact,) = task.artifacts
    assert artifact.name == "echo"
    assert artifact.artifact_id
    assert texts(artifact.parts) == ["hello interop"]
    (sent,) = task.history
    assert sent.message_id == request.message.message_id
    assert sent.role == pb.ROLE_USER
    assert sent.task_id == task.id
    assert sent.context_id == context_id
    assert texts(sent.parts) == ["hello interop"]

    stored = await within(peer.blocking.get_task(pb.GetTaskRequest(id=task.id)))
    assert stored == task


async def test_send_blocking_honours_history_length(connect: Callable[[str], Awaitable[Peer]]) -> None:
    peer = await connect("echo")
    config = pb.SendMessageConfiguration(history_length=0)
    task = await send_for_task(peer, send_request("no history", configuration=config))
    assert task.status.state == COMPLETED
    assert list(task.history) == []
    assert texts(task.artifacts[0].parts) == ["no history"]


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_send_returns_direct_message(
    connect: Callable[[str], Awaitable[Peer]], streaming: bool
) -> None:
    peer = await connect("tck")
    client = peer.streaming if streaming else peer.blocking
    context_id = str(uuid.uuid4())
    request = send_request("hi", message_id=f"tck-message-response-{uuid.uuid4()}", context_id=context_id)

    events = await collect(client.send_message(request))

    assert [kind(e) for e in events] == ["message"]
    reply = events[0].message
    assert reply.role == pb.ROLE_AGENT
    assert texts(reply.parts) == ["Direct message response"]
    assert reply.message_id and reply.message_id != request.message.message_id
    assert reply.context_id == context_id
    assert reply.task_id == ""


# -- SendStreamingMessage ----------------------------------------------------------------------------------


async def test_streaming_send_delivers_task_then_chunks_in_order(
    connect: Callable[[str], Awaitable[Peer]],
) -> None:
    peer = await connect("echo")
    request = send_request("stream 5")

    events = await collect(peer.streaming.send_message(request))

    assert [kind(e) for e in events] == ["task", "status_update"] + ["artifact_update"] * 5 + [
        "status_update"
    ]
    task = events[0].task
    assert task.id and task.context_id
    assert task.status.state == SUBMITTED
    assert [m.message_id for m in task.history] == [request.message.message_id]
    for event in events[1:]:
        update = getattr(event, kind(event))
        assert (update.task_id, update.context_id) == (task.id, task.context_id)

    assert events[1].status_update.status.state == WORKING
    chunks = [e.artifact_update for e in events[2:7]]
    assert [texts(c.artifact.parts) for c in chunks] == [[f"chunk {i}"] for i in range(5)]
    assert {c.artifact.artifact_id for c in chunks} == {"stream"}
    assert {c.artifact.name for c in chunks} == {"stream"}
    assert [c.append for c in chunks] == [False, True, True, True, True]
    assert [c.last_chunk for c in chunks] == [False, False, False, False, True]
    assert events[-1].status_update.status.state == COMPLETED

    stored = await within(peer.streaming.get_task(pb.GetTaskRequest(id=task.id)))
    assert stored.status.state == COMPLETED
    (artifact,) = stored.artifacts
    assert artifact.artifact_id == "stream"
    assert texts(artifact.parts) == [f"chunk {i}" for i in range(5)]


async def test_streaming_send_of_plain_text_completes(connect: Callable[[str], Awaitable[Peer]]) -> None:
    peer = await connect("echo")
    events = await collect(peer.streaming.send_message(send_request("plain")))

    assert kind(events[0]) == "task"
    assert kind(events[-1]) == "status_update"
    assert events[-1].status_update.status.state == COMPLETED
    artifacts = [e.artifact_update.artifact for e in events if kind(e) == "artifact_update"]
    assert [texts(a.parts) for a in artifacts] == [["plain"]]


# -- GetTask -----------------------------------------------------------------------------------------------


async def test_get_task_with_history_length(connect: Callable[[str], Awaitable[Peer]]) -> None:
    peer = await connect("tck")
    first = send_request("tck-input-required")
    waiting = await send_for_task(peer, first)
    assert waiting.status.state == INPUT_REQUIRED
    follow_up = send_request("tck-complete-task", task_id=waiting.id, context_id=waiting.context_id)
    done = await send_for_task(peer, follow_up)
    assert done.id == waiting.id
    assert done.status.state == COMPLETED
    assert texts(done.status.message.parts) == ["Hello from TCK"]

    full = await within(peer.blocking.get_task(pb.GetTaskRequest(id=done.id)))
    ids = [m.message_id for m in full.history]
    assert len(ids) >= 2
    assert ids.index(first.message.message_id) < ids.index(follow_up.message.message_id)
    assert full.history[-1].message_id == done.status.message.message_id

    last_two = await within(peer.blocking.get_task(pb.GetTaskRequest(id=done.id, history_length=2)))
    assert list(last_two.history) == list(full.history[-2:])
    assert last_two.status == full.status

    none = await within(peer.blocking.get_task(pb.GetTaskRequest(id=done.id, history_length=0)))
    assert list(none.history) == []
    assert none.id == done.id


# -- ListTasks ---------------------------------------------------------------------------------------------


async def test_list_tasks_filters_by_context_and_pages(connect: Callable[[str], Awaitable[Peer]]) -> None:
    peer = await connect("echo")
    mine, other = str(uuid.uuid4()), str(uuid.uuid4())
    created = [(await send_for_task(peer, send_request(f"mine {i}", context_id=mine))).id for i in range(5)]
    others = [(await send_for_task(peer, send_request(f"other {i}", context_id=other))).id for i in range(2)]

    everything = await within(peer.blocking.list_tasks(pb.ListTasksRequest(context_id=mine)))
    assert everything.total_size == 5
    assert everything.next_page_token == ""
    assert {t.context_id for t in everything.tasks} == {mine}
    # Newest first: each task completed before the next was sent.
    assert [t.id for t in everything.tasks] == created[::-1]
    assert {t.status.state for t in everything.tasks} == {COMPLETED}

    pages: list[list[str]] = []
    token = ""
    while True:
        page = await within(
            peer.blocking.list_tasks(pb.ListTasksRequest(context_id=mine, page_size=2, page_token=token))
        )
        assert page.page_size == 2
        assert page.total_size == 5
        pages.append([t.id for t in page.tasks])
        token = page.next_page_token
        if not token:
            break
        assert len(pages) < 5, "pagination does not end"
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [task_id for p in pages for task_id in p] == created[::-1]

    theirs = await within(peer.blocking.list_tasks(pb.ListTasksRequest(context_id=other)))
    assert sorted(t.id for t in theirs.tasks) == sorted(others)


async def test_list_tasks_shapes_history_and_artifacts(connect: Callable[[str], Awaitable[Peer]]) -> None:
    peer = await connect("echo")
    context_id = str(uuid.uuid4())
    task = await send_for_task(peer, send_request("shape me", context_id=context_id))

    default = await within(peer.blocking.list_tasks(pb.ListTasksRequest(context_id=context_id)))
    (listed,) = default.tasks
    assert listed.id == task.id
    assert list(listed.artifacts) == []  # includeArtifacts defaults to false

    shaped = await within(
        peer.blocking.list_tasks(
            pb.ListTasksRequest(context_id=context_id, include_artifacts=True, history_length=0)
        )
    )
    (listed,) = shaped.tasks
    assert list(listed.history) == []
    assert texts(listed.artifacts[0].parts) == ["shape me"]

    working = await within(
        peer.blocking.list_tasks(pb.ListTasksRequest(context_id=context_id, status=WORKING))
    )
    assert list(working.tasks) == []
    assert working.total_size == 0


# -- CancelTask --------------------------------------------------------------------------------------------


async def test_cancel_long_running_task_while_streaming(connect: Callable[[str], Awaitable[Peer]]) -> None:
    peer = await connect("tck")
    events = peer.streaming.send_message(send_request("go", message_id=f"tck-long-running-{uuid.uuid4()}"))
    async with aclosing(events):  # type: ignore[type-var]
        first = await within(anext(events))
        assert kind(first) == "task"
        task_id = first.task.id
        working = await within(anext(events))
        assert working.status_update.status.state == WORKING
        assert texts(working.status_update.status.message.parts) == ["Working until canceled."]

        canceled = await within(peer.blocking.cancel_task(pb.CancelTaskRequest(id=task_id)))
        assert canceled.id == task_id
        assert canceled.status.state == CANCELED

        rest = await collect(events)
    assert [kind(e) for e in rest] == ["status_update"]
    assert rest[0].status_update.task_id == task_id
    assert rest[0].status_update.status.state == CANCELED

    stored = await within(peer.blocking.get_task(pb.GetTaskRequest(id=task_id)))
    assert stored.status.state == CANCELED


async def test_cancel_task_sent_with_return_immediately(connect: Callable[[str], Awaitable[Peer]]) -> None:
    peer = await connect("tck")
    config = pb.SendMessageConfiguration(return_immediately=True)
    task = await send_for_task(peer, send_request("tck-long-running", configuration=config))
    assert task.status.state in (SUBMITTED, WORKING)

    canceled = await within(peer.blocking.cancel_task(pb.CancelTaskRequest(id=task.id)))
    assert canceled.id == task.id
    assert canceled.context_id == task.context_id
    assert canceled.status.state == CANCELED

    with pytest.raises(TaskNotCancelableError) as again:
        await within(peer.blocking.cancel_task(pb.CancelTaskRequest(id=task.id)))
    assert error_code(again.value) == -32002


async def test_cancel_completed_task_is_not_cancelable(connect: Callable[[str], Awaitable[Peer]]) -> None:
    peer = await connect("echo")
    task = await send_for_task(peer, send_request("finished"))
    assert task.status.state == COMPLETED

    with pytest.raises(TaskNotCancelableError) as raised:
        await within(peer.blocking.cancel_task(pb.CancelTaskRequest(id=task.id)))
    assert error_code(raised.value) == -32002
    assert_error_names_task(raised.value, task.id)

    stored = await within(peer.blocking.get_task(pb.GetTaskRequest(id=task.id)))
    assert stored.status.state == COMPLETED


# -- SubscribeToTask ---------------------------------------------------------------------------------------


async def test_subscribe_then_follow_up_until_completed(connect: Callable[[str], Awaitable[Peer]]) -> None:
    peer = await connect("tck")
    waiting = await send_for_task(peer, send_request("tck-input-required"))
    assert waiting.status.state == INPUT_REQUIRED

    events = peer.streaming.subscribe(pb.SubscribeToTaskRequest(id=waiting.id))
    async with aclosing(events):  # type: ignore[type-var]
        snapshot = await within(anext(events))
        assert kind(snapshot) == "task"
        assert snapshot.task.id == waiting.id
        assert snapshot.task.status.state == INPUT_REQUIRED

        follow_up = send_request("tck-complete-task", task_id=waiting.id, context_id=waiting.context_id)
        reply = asyncio.create_task(send_for_task(peer, follow_up))
        updates = await collect(events)
        done = await within(reply)

    # The Task is only the first event of a stream: the follow-up shows as the run's status updates.
    assert [kind(e) for e in updates] == ["status_update", "status_update"]
    assert [e.status_update.status.state for e in updates] == [WORKING, COMPLETED]
    for event in updates:
        assert (event.status_update.task_id, event.status_update.context_id) == (
            waiting.id,
            waiting.context_id,
        )
    assert texts(updates[-1].status_update.status.message.parts) == ["Hello from TCK"]
    assert done.id == waiting.id
    assert done.status.state == COMPLETED
    assert follow_up.message.message_id in [m.message_id for m in done.history]


async def test_subscribe_to_finished_task_is_unsupported(connect: Callable[[str], Awaitable[Peer]]) -> None:
    peer = await connect("echo")
    task = await send_for_task(peer, send_request("over"))
    with pytest.raises(UnsupportedOperationError) as raised:
        await collect(peer.streaming.subscribe(pb.SubscribeToTaskRequest(id=task.id)))
    assert error_code(raised.value) == -32004
    assert_error_names_task(raised.value, task.id)


# -- errors ------------------------------------------------------------------------------------------------


async def _get(peer: Peer, task_id: str) -> object:
    return await peer.blocking.get_task(pb.GetTaskRequest(id=task_id))


async def _cancel(peer: Peer, task_id: str) -> object:
    return await peer.blocking.cancel_task(pb.CancelTaskRequest(id=task_id))


async def _subscribe(peer: Peer, task_id: str) -> object:
    return await collect(peer.streaming.subscribe(pb.SubscribeToTaskRequest(id=task_id)))


async def _send(peer: Peer, task_id: str) -> object:
    return await send_blocking(peer, send_request("hello?", task_id=task_id))


async def _stream(peer: Peer, task_id: str) -> object:
    return await collect(peer.streaming.send_message(send_request("hello?", task_id=task_id)))


@pytest.mark.parametrize(
    "operation",
    [_get, _cancel, _subscribe, _send, _stream],
    ids=["GetTask", "CancelTask", "SubscribeToTask", "SendMessage", "SendStreamingMessage"],
)
async def test_unknown_task_id_raises_task_not_found(
    connect: Callable[[str], Awaitable[Peer]], operation: Callable[[Peer, str], Awaitable[object]]
) -> None:
    peer = await connect("echo")
    task_id = f"no-such-task-{uuid.uuid4()}"
    with pytest.raises(TaskNotFoundError) as raised:
        await within(operation(peer, task_id))
    assert error_code(raised.value) == -32001
    assert task_id in raised.value.message
    assert_error_names_task(raised.value, task_id)
