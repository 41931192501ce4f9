"""The gRPC binding against a real ``grpc.aio`` server on 127.0.0.1, on the test's event loop.

The server runs the TCK example agent over a real TaskRuntime and MemoryTaskStore. It is driven twice: by
the stub generated from the A2A proto (``a2a_pb2_grpc.A2AServiceStub``), which shows status codes and the
``grpc-status-details-bin`` trailer as they are on the wire, and by the official a2a-sdk 1.3 client over its
gRPC transport, which must understand every answer.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
import httpx
import msgspec
import pytest
from a2a.client import Client, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc
from a2a.utils import errors as sdk_errors
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from conftest import EXAMPLES, assert_proto
from skillwire import A2AError, BaseRequestHandler, CallContext, Limits, Task
from skillwire.cli.targets import load_agent
from skillwire.errors import UnsupportedOperationError, VersionNotSupportedError
from skillwire.protocol.models import AgentInterface, GetTaskRequest
from skillwire.protocol.operations import OPERATIONS, OperationSpec, spec_of
from skillwire.security import APIKey, Security
from skillwire.server.bindings.grpc import GRPC_STATUSES_V1_0_0, GrpcServer
from skillwire.server.bindings.grpc_limits import server_options
from skillwire.server.bindings.guard import Guard
from skillwire.server.handler import Dispatcher, RequestHandler
from skillwire.server.tasks.runtime import TaskRuntime
from skillwire.stores import MemoryTaskStore
from skillwire.types import AgentCapabilities, AgentCard, Operation, StreamResponse
from skillwire.wire.grpc_service import RPCS, STATUS_DETAILS_KEY, read_status, rich_status

WAIT = 10.0
V1 = (("a2a-version", "1.0"),)

T = TypeVar("T")

SUBMITTED = pb.TASK_STATE_SUBMITTED
WORKING = pb.TASK_STATE_WORKING
COMPLETED = pb.TASK_STATE_COMPLETED
CANCELED = pb.TASK_STATE_CANCELED
INPUT_REQUIRED = pb.TASK_STATE_INPUT_REQUIRED


# -- a handler that remembers what it was given and tells when a stream is closed -------------------------


class _Watched:
    """A stream from the runtime whose ``aclose`` is reported to the spy."""

    def __init__(self, inner: Any, closed: asyncio.Event) -> None:
        self._inner = inner
        self._closed = closed

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        return await self._inner.__anext__()

    async def aclose(self) -> None:
        self._closed.set()
        await self._inner.aclose()


@dataclass
class Spy:
    inner: RequestHandler
    calls: list[tuple[Operation, Any, CallContext]] = field(default_factory=list)
    stream_closed: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, operation: Operation, params: Any, context: CallContext) -> Any:
        self.calls.append((operation, params, context))
        result = await self.inner.handle(operation, params, context)
        return _Watched(result, self.stream_closed) if spec_of(operation).streaming else result


@dataclass
class Running:
    server: GrpcServer
    runtime: TaskRuntime
    spy: Spy
    card: AgentCard
    channel: grpc.aio.Channel
    stub: a2a_pb2_grpc.A2AServiceStub

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.port}"


Start = Callable[..., Awaitable[Running]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """``await start(...)`` serves the TCK agent over gRPC; everything started is stopped afterwards."""
    cleanups: list[Callable[[], Awaitable[None]]] = []

    async def _start(
        *,
        extended_card: AgentCard | None = None,
        extended_card_enabled: bool = False,
        handler: RequestHandler | None = None,
        agent_name: str = "tck",
        limits: Limits | None = None,
        channel_options: list[tuple[str, Any]] | None = None,
        status_overrides: Mapping[type[A2AError], str] = {},
        security: Security | None = None,
    ) -> Running:
        agent = load_agent(str(EXAMPLES / agent_name))
        agent.extended_card_enabled = extended_card_enabled
        card = agent.card()
        store = MemoryTaskStore()
        await store.open()
        runtime = TaskRuntime(agent._executor(), store, extended_card=extended_card)
        await runtime.start()
        spy = Spy(handler or runtime)
        server = GrpcServer(
            Dispatcher(spy, lambda: card.capabilities),
            limits=limits,
            status_overrides=status_overrides,
            guard=Guard(security) if security is not None else None,
        )
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}", options=channel_options)

        async def cleanup() -> None:
            await channel.close()
            await server.stop(0)
            await runtime.stop(0)
            await store.close()

        cleanups.append(cleanup)
        return Running(server, runtime, spy, card, channel, a2a_pb2_grpc.A2AServiceStub(channel))

    yield _start
    for cleanup in reversed(cleanups):
        await cleanup()


@pytest.fixture
async def srv(start: Start) -> Running:
    return await start()


# -- helpers -----------------------------------------------------------------------------------------------


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, WAIT)


def message(prefix: str = "tck-complete-task", *, text: str = "hello", **fields: Any) -> pb.Message:
    return pb.Message(
        message_id=f"{prefix}-{uuid.uuid4()}", role=pb.ROLE_USER, parts=[pb.Part(text=text)], **fields
    )


def send_request(prefix: str = "tck-complete-task", **fields: Any) -> pb.SendMessageRequest:
    return pb.SendMessageRequest(message=message(prefix, **fields))


async def collect(call: Any) -> list[pb.StreamResponse]:
    """Every event (left) of a server stream, which must end by itself within WAIT seconds."""

    async def drain() -> list[pb.StreamResponse]:
        events = []
        while (event := await call.read()) is not grpc.aio.EOF:
            events.append(event)
        return events

    return await within(drain())


def kind(event: pb.StreamResponse) -> str:
    return str(event.WhichOneof("payload"))


def texts(parts: Any) -> list[str]:
    return [part.text for part in parts]


@dataclass
class Failure:
    code: grpc.StatusCode
    message: str
    reason: str
    metadata: dict[str, str]
    violations: list[tuple[str, str]]


def failure_of(error: grpc.aio.AioRpcError) -> Failure:
    """The status of a failed call, with its ErrorInfo (and BadRequest) decoded from the trailer; a busy
    answer may also carry a RetryInfo."""
    trailers = dict(error.trailing_metadata() or ())
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    assert status.code == error.code().value[0]
    assert status.message == error.details()
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert info.domain == "a2a-protocol.org"
    violations: list[tuple[str, str]] = []
    for detail in status.details[1:]:
        if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            continue
        bad = error_details_pb2.BadRequest()
        assert detail.Unpack(bad)
        violations.extend((v.field, v.description) for v in bad.field_violations)
    return Failure(error.code(), error.details(), info.reason, dict(info.metadata), violations)


async def fails(call: Awaitable[Any]) -> Failure:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await within(call)
    return failure_of(caught.value)


async def stream_fails(call: Any) -> Failure:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await collect(call)
    return failure_of(caught.value)


async def complete_task(srv: Running) -> pb.Task:
    response = await within(srv.stub.SendMessage(send_request(), metadata=V1))
    assert response.task.status.state == COMPLETED
    return response.task


# -- SendMessage -------------------------------------------------------------------------------------------


async def test_send_blocking_returns_the_completed_task(srv: Running) -> None:
    context_id = str(uuid.uuid4())
    request = send_request(context_id=context_id)

    response = await within(srv.stub.SendMessage(request, metadata=V1))

    assert response.WhichOneof("payload") == "task"
    task = response.task
    assert task.id and task.context_id == context_id
    assert task.status.state == COMPLETED
    assert task.status.HasField("timestamp")
    assert texts(task.status.message.parts) == ["Hello from TCK"]
    assert task.history[0].message_id == request.message.message_id
    assert task.history[0].task_id == task.id
    (_, params, call) = srv.spy.calls[-1]
    assert call.binding == "GRPC"
    assert call.protocol_version == "1.0"
    assert params.message.message_id == request.message.message_id


async def test_send_returns_a_direct_message(srv: Running) -> None:
    context_id = str(uuid.uuid4())
    response = await within(
        srv.stub.SendMessage(send_request("tck-message-response", context_id=context_id), metadata=V1)
    )
    assert response.WhichOneof("payload") == "message"
    assert response.message.role == pb.ROLE_AGENT
    assert texts(response.message.parts) == ["Direct message response"]
    assert response.message.context_id == context_id


async def test_send_honours_history_length_and_return_immediately(srv: Running) -> None:
    request = send_request()
    request.configuration.history_length = 0
    response = await within(srv.stub.SendMessage(request, metadata=V1))
    assert response.task.status.state == COMPLETED
    assert list(response.task.history) == []

    request = send_request("tck-long-running")
    request.configuration.return_immediately = True
    response = await within(srv.stub.SendMessage(request, metadata=V1))
    assert response.task.status.state in (SUBMITTED, WORKING)


async def test_send_data_part_numbers_arrive_as_json_numbers(srv: Running) -> None:
    request = send_request()
    part = request.message.parts.add()
    part.data.struct_value.update({"count": 42, "ratio": 0.5, "nested": {"n": -3}})
    request.metadata.update({"retries": 2})

    await within(srv.stub.SendMessage(request, metadata=V1))

    (_, params, _) = srv.spy.calls[-1]
    data = params.message.parts[1].data
    assert data == {"count": 42, "ratio": 0.5, "nested": {"n": -3}}
    assert type(data["count"]) is int and type(data["nested"]["n"]) is int
    assert params.metadata == {"retries": 2} and type(params.metadata["retries"]) is int


async def test_send_artifacts_of_every_part_kind_survive_the_conversion(srv: Running) -> None:
    for prefix, check in [
        ("tck-artifact-text", lambda p: p.text == "Generated text content"),
        ("tck-artifact-file-url", lambda p: p.url == "https://example.com/output.txt"),
        ("tck-artifact-file", lambda p: p.raw == b"tck" and p.filename == "output.txt"),
        # Protobuf holds numbers as doubles: 42 comes back as 42.0.
        ("tck-artifact-data", lambda p: dict(p.data.struct_value) == {"key": "value", "count": 42.0}),
    ]:
        response = await within(srv.stub.SendMessage(send_request(prefix), metadata=V1))
        (artifact,) = response.task.artifacts
        (part,) = artifact.parts
        assert check(part), (prefix, part)


# -- SendStreamingMessage ----------------------------------------------------------------------------------


async def test_streaming_send_delivers_ordered_events(srv: Running) -> None:
    request = send_request("tck-stream-001")

    events = await collect(srv.stub.SendStreamingMessage(request, metadata=V1))

    assert [kind(e) for e in events] == ["task", "status_update", "artifact_update", "status_update"]
    task = events[0].task
    assert task.status.state == SUBMITTED
    assert [m.message_id for m in task.history] == [request.message.message_id]
    assert events[1].status_update.status.state == WORKING
    assert texts(events[2].artifact_update.artifact.parts) == ["Stream hello from TCK"]
    assert events[3].status_update.status.state == COMPLETED
    assert {e.status_update.task_id for e in (events[1], events[3])} == {task.id}
    assert srv.spy.stream_closed.is_set()


async def test_streaming_send_of_a_direct_reply_is_one_message(srv: Running) -> None:
    events = await collect(srv.stub.SendStreamingMessage(send_request("tck-message-response"), metadata=V1))
    assert [kind(e) for e in events] == ["message"]
    assert texts(events[0].message.parts) == ["Direct message response"]


async def test_streaming_send_chunks_keep_append_and_last_chunk(srv: Running) -> None:
    events = await collect(
        srv.stub.SendStreamingMessage(send_request("tck-stream-artifact-chunked"), metadata=V1)
    )
    chunks = [e.artifact_update for e in events if kind(e) == "artifact_update"]
    assert [(c.append, c.last_chunk) for c in chunks] == [(False, False), (True, True)]
    assert [texts(c.artifact.parts) for c in chunks] == [["chunk-1 "], ["chunk-2"]]


async def test_client_cancelling_a_stream_closes_it_but_not_the_task(srv: Running) -> None:
    call = srv.stub.SendStreamingMessage(send_request("tck-long-running"), metadata=V1)
    first = await within(call.read())
    second = await within(call.read())
    assert kind(first) == "task"
    assert second.status_update.status.state == WORKING
    task_id = first.task.id

    call.cancel()
    await within(srv.spy.stream_closed.wait())

    task = await within(srv.stub.GetTask(pb.GetTaskRequest(id=task_id), metadata=V1))
    assert task.status.state == WORKING
    canceled = await within(srv.stub.CancelTask(pb.CancelTaskRequest(id=task_id), metadata=V1))
    assert canceled.status.state == CANCELED


async def test_server_stop_ends_open_streams_and_leaves_the_task(srv: Running) -> None:
    call = srv.stub.SendStreamingMessage(send_request("tck-input-required"), metadata=V1)
    events = await collect(call)  # the stream ends at INPUT_REQUIRED, the client's turn
    task_id = events[0].task.id
    assert events[-1].status_update.status.state == INPUT_REQUIRED

    srv.spy.stream_closed.clear()
    follow = srv.stub.SubscribeToTask(pb.SubscribeToTaskRequest(id=task_id), metadata=V1)
    assert kind(await within(follow.read())) == "task"
    await within(srv.server.stop(0))
    await within(srv.spy.stream_closed.wait())
    with pytest.raises(grpc.aio.AioRpcError):
        await within(follow.read())
    stored = await srv.runtime.store.get(task_id)
    assert stored is not None and stored.task.status.state.value == "TASK_STATE_INPUT_REQUIRED"


# -- GetTask, ListTasks ------------------------------------------------------------------------------------


async def test_get_task_with_history_length(srv: Running) -> None:
    done = await complete_task(srv)
    assert len(done.history) == 2  # the user's message and the agent's status message

    full = await within(srv.stub.GetTask(pb.GetTaskRequest(id=done.id), metadata=V1))
    assert full == done
    none = await within(srv.stub.GetTask(pb.GetTaskRequest(id=done.id, history_length=0), metadata=V1))
    assert list(none.history) == []
    last = await within(srv.stub.GetTask(pb.GetTaskRequest(id=done.id, history_length=1), metadata=V1))
    assert [m.message_id for m in last.history] == [done.history[-1].message_id]


async def test_list_tasks_pages_through_a_context(srv: Running) -> None:
    context_id = str(uuid.uuid4())
    ids = set()
    for _ in range(3):
        request = send_request("tck-artifact-text", context_id=context_id)
        ids.add((await within(srv.stub.SendMessage(request, metadata=V1))).task.id)

    first = await within(
        srv.stub.ListTasks(pb.ListTasksRequest(context_id=context_id, page_size=2), metadata=V1)
    )
    assert (len(first.tasks), first.page_size, first.total_size) == (2, 2, 3)
    assert first.next_page_token
    assert all(not t.artifacts for t in first.tasks)  # includeArtifacts defaults to false
    second = await within(
        srv.stub.ListTasks(
            pb.ListTasksRequest(
                context_id=context_id, page_size=2, page_token=first.next_page_token, include_artifacts=True
            ),
            metadata=V1,
        )
    )
    assert len(second.tasks) == 1 and second.next_page_token == ""
    assert texts(second.tasks[0].artifacts[0].parts) == ["Generated text content"]
    assert {t.id for t in [*first.tasks, *second.tasks]} == ids

    filtered = await within(
        srv.stub.ListTasks(
            pb.ListTasksRequest(context_id=context_id, status=pb.TASK_STATE_CANCELED), metadata=V1
        )
    )
    assert (list(filtered.tasks), filtered.total_size) == ([], 0)


# -- CancelTask, SubscribeToTask ---------------------------------------------------------------------------


async def test_cancel_a_long_running_task_then_a_completed_one(srv: Running) -> None:
    request = send_request("tck-long-running")
    request.configuration.return_immediately = True
    task = (await within(srv.stub.SendMessage(request, metadata=V1))).task

    canceled = await within(srv.stub.CancelTask(pb.CancelTaskRequest(id=task.id), metadata=V1))
    assert canceled.id == task.id
    assert canceled.status.state == CANCELED

    again = await fails(srv.stub.CancelTask(pb.CancelTaskRequest(id=task.id), metadata=V1))
    assert (again.code, again.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "TASK_NOT_CANCELABLE")

    done = await complete_task(srv)
    failure = await fails(srv.stub.CancelTask(pb.CancelTaskRequest(id=done.id), metadata=V1))
    assert (failure.code, failure.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "TASK_NOT_CANCELABLE")
    assert failure.metadata == {"taskId": done.id}


async def test_subscribe_to_an_input_required_task_then_follow_up(srv: Running) -> None:
    asked = await within(srv.stub.SendMessage(send_request("tck-multi-turn"), metadata=V1))
    task = asked.task
    assert task.status.state == INPUT_REQUIRED

    call = srv.stub.SubscribeToTask(pb.SubscribeToTaskRequest(id=task.id), metadata=V1)
    snapshot = await within(call.read())
    assert kind(snapshot) == "task"
    assert snapshot.task.status.state == INPUT_REQUIRED

    follow_up = send_request("tck-multi-turn", task_id=task.id, context_id=task.context_id)
    answer = await within(srv.stub.SendMessage(follow_up, metadata=V1))
    assert answer.task.status.state == COMPLETED

    rest = await collect(call)  # the subscription ends by itself at the terminal state
    assert rest[-1].status_update.status.state == COMPLETED
    assert texts(rest[-1].status_update.status.message.parts) == ["Thanks, that completes the conversation."]


async def test_subscribe_errors(srv: Running) -> None:
    missing = await stream_fails(
        srv.stub.SubscribeToTask(pb.SubscribeToTaskRequest(id="no-such-task"), metadata=V1)
    )
    assert (missing.code, missing.reason) == (grpc.StatusCode.NOT_FOUND, "TASK_NOT_FOUND")

    done = await complete_task(srv)
    finished = await stream_fails(
        srv.stub.SubscribeToTask(pb.SubscribeToTaskRequest(id=done.id), metadata=V1)
    )
    assert (finished.code, finished.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "UNSUPPORTED_OPERATION")


# -- push notification configs, extended card --------------------------------------------------------------


PUSH_CALLS: list[tuple[str, Any]] = [
    (
        "CreateTaskPushNotificationConfig",
        pb.TaskPushNotificationConfig(task_id="t-1", url="https://example.com/hook"),
    ),
    ("GetTaskPushNotificationConfig", pb.GetTaskPushNotificationConfigRequest(task_id="t-1", id="c-1")),
    ("ListTaskPushNotificationConfigs", pb.ListTaskPushNotificationConfigsRequest(task_id="t-1")),
    ("DeleteTaskPushNotificationConfig", pb.DeleteTaskPushNotificationConfigRequest(task_id="t-1", id="c-1")),
]


@pytest.mark.parametrize(("rpc", "request_message"), PUSH_CALLS, ids=[rpc for rpc, _ in PUSH_CALLS])
async def test_push_config_rpcs_answer_push_not_supported(
    srv: Running, rpc: str, request_message: Any
) -> None:
    failure = await fails(getattr(srv.stub, rpc)(request_message, metadata=V1))
    assert failure.code == grpc.StatusCode.FAILED_PRECONDITION
    assert failure.reason == "PUSH_NOTIFICATION_NOT_SUPPORTED"


async def test_push_config_in_a_send_is_refused(srv: Running) -> None:
    request = send_request()
    request.configuration.task_push_notification_config.url = "https://example.com/hook"
    failure = await fails(srv.stub.SendMessage(request, metadata=V1))
    assert failure.reason == "PUSH_NOTIFICATION_NOT_SUPPORTED"


async def test_extended_card_unsupported_not_configured_and_served(start: Start) -> None:
    off = await start()
    unsupported = await fails(off.stub.GetExtendedAgentCard(pb.GetExtendedAgentCardRequest(), metadata=V1))
    assert (unsupported.code, unsupported.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "UNSUPPORTED_OPERATION",
    )

    empty = await start(extended_card_enabled=True)
    missing = await fails(empty.stub.GetExtendedAgentCard(pb.GetExtendedAgentCardRequest(), metadata=V1))
    assert (missing.code, missing.reason) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    )

    extended = msgspec.structs.replace(
        off.card,
        name="TCK agent (extended)",
        supported_interfaces=[
            AgentInterface(url="127.0.0.1:1", protocol_binding="GRPC", protocol_version="1.0")
        ],
    )
    # it is served to authenticated callers only
    keys = Security(APIKey(keys={"tester": "grpc-extended-key"}))
    served = await start(extended_card_enabled=True, extended_card=extended, security=keys)
    anonymous = await fails(served.stub.GetExtendedAgentCard(pb.GetExtendedAgentCardRequest(), metadata=V1))
    assert (anonymous.code, anonymous.reason) == (grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
    keyed = (*V1, ("x-api-key", "grpc-extended-key"))
    card = await within(served.stub.GetExtendedAgentCard(pb.GetExtendedAgentCardRequest(), metadata=keyed))
    assert card.name == "TCK agent (extended)"
    assert card.supported_interfaces[0].protocol_binding == "GRPC"
    assert [s.id for s in card.skills] == ["tck"]


# -- errors ------------------------------------------------------------------------------------------------


async def test_task_not_found_carries_error_info(srv: Running) -> None:
    failure = await fails(srv.stub.GetTask(pb.GetTaskRequest(id="no-such-task"), metadata=V1))
    assert failure.code == grpc.StatusCode.NOT_FOUND
    assert failure.reason == "TASK_NOT_FOUND"
    assert failure.metadata == {"taskId": "no-such-task"}
    assert "no-such-task" in failure.message


async def test_follow_up_to_a_terminal_task_is_unsupported(srv: Running) -> None:
    done = await complete_task(srv)
    failure = await fails(srv.stub.SendMessage(send_request(task_id=done.id), metadata=V1))
    assert (failure.code, failure.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "UNSUPPORTED_OPERATION")


@pytest.mark.parametrize(
    ("metadata", "requested"),
    [((), "0.3"), ((("a2a-version", "2.0"),), "2.0"), ((("a2a-version", "banana"),), "banana")],
    ids=["missing", "unsupported", "malformed"],
)
async def test_version_missing_or_unsupported_is_refused(
    srv: Running, metadata: tuple[tuple[str, str], ...], requested: str
) -> None:
    failure = await fails(srv.stub.GetTask(pb.GetTaskRequest(id="x"), metadata=metadata))
    assert failure.code == grpc.StatusCode.FAILED_PRECONDITION
    assert failure.reason == "VERSION_NOT_SUPPORTED"
    assert failure.metadata == {"requestedVersion": requested, "supportedVersions": "1.0, 1.1"}
    stream = await stream_fails(srv.stub.SendStreamingMessage(send_request(), metadata=metadata))
    assert stream.reason == "VERSION_NOT_SUPPORTED"
    assert srv.spy.calls == []


async def test_version_with_a_patch_part_is_served(srv: Running) -> None:
    response = await within(srv.stub.SendMessage(send_request(), metadata=(("a2a-version", "1.0.7"),)))
    assert response.task.status.state == COMPLETED


async def test_v1_0_0_status_overrides(start: Start) -> None:
    srv = await start(status_overrides=GRPC_STATUSES_V1_0_0)

    version = await fails(srv.stub.GetTask(pb.GetTaskRequest(id="x")))
    assert (version.code, version.reason) == (grpc.StatusCode.UNIMPLEMENTED, "VERSION_NOT_SUPPORTED")
    push = await fails(srv.stub.ListTaskPushNotificationConfigs(PUSH_CALLS[2][1], metadata=V1))
    assert (push.code, push.reason) == (grpc.StatusCode.UNIMPLEMENTED, "PUSH_NOTIFICATION_NOT_SUPPORTED")
    done = await complete_task(srv)
    unsupported = await stream_fails(
        srv.stub.SubscribeToTask(pb.SubscribeToTaskRequest(id=done.id), metadata=V1)
    )
    assert unsupported.code == grpc.StatusCode.UNIMPLEMENTED
    missing = await fails(srv.stub.GetTask(pb.GetTaskRequest(id="no-such-task"), metadata=V1))
    assert missing.code == grpc.StatusCode.NOT_FOUND  # the same in both tables


async def test_status_overrides_belong_to_their_server_alone(start: Start) -> None:
    overrides = dict(GRPC_STATUSES_V1_0_0)
    v1_0_0 = await start(status_overrides=overrides)
    overrides[VersionNotSupportedError] = "ABORTED"  # the server took a copy
    v1_0_1 = await start()  # in the same process, after the other one

    for _ in range(2):  # in turns: neither server's table leaks into the other's answers
        old = await fails(v1_0_0.stub.GetTask(pb.GetTaskRequest(id="x")))
        new = await fails(v1_0_1.stub.GetTask(pb.GetTaskRequest(id="x")))
        assert (old.code, old.reason) == (grpc.StatusCode.UNIMPLEMENTED, "VERSION_NOT_SUPPORTED")
        assert (new.code, new.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")


@pytest.mark.parametrize("name", ["NOPE", "OK"])
async def test_an_override_that_is_no_error_status_is_refused(srv: Running, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        GrpcServer(srv.server.dispatcher, status_overrides={UnsupportedOperationError: name})


def _without_parts() -> pb.SendMessageRequest:
    return pb.SendMessageRequest(message=pb.Message(message_id="m-1", role=pb.ROLE_USER))


def _empty_part() -> pb.SendMessageRequest:
    request = send_request()
    request.message.parts.add()
    return request


@pytest.mark.parametrize(
    ("rpc", "build", "field_path"),
    [
        ("GetTask", lambda: pb.GetTaskRequest(id=""), "id"),
        ("CancelTask", lambda: pb.CancelTaskRequest(), "id"),
        ("SendMessage", lambda: pb.SendMessageRequest(), "message"),
        ("SendMessage", _without_parts, "message.parts"),
        ("SendMessage", _empty_part, "message.parts[1]"),
        ("SendStreamingMessage", _without_parts, "message.parts"),
        ("SubscribeToTask", lambda: pb.SubscribeToTaskRequest(), "id"),
        ("ListTasks", lambda: pb.ListTasksRequest(page_size=0), "pageSize"),
        ("GetTaskPushNotificationConfig", lambda: pb.GetTaskPushNotificationConfigRequest(id="c"), "taskId"),
    ],
    ids=[
        "empty-id",
        "cancel-no-id",
        "no-message",
        "no-parts",
        "part-without-content",
        "stream-no-parts",
        "subscribe-no-id",
        "page-size-zero",
        "push-no-task-id",
    ],
)
async def test_invalid_arguments_name_the_field(
    srv: Running, rpc: str, build: Callable[[], Any], field_path: str
) -> None:
    call = getattr(srv.stub, rpc)(build(), metadata=V1)
    failure = await (
        stream_fails(call) if rpc in ("SendStreamingMessage", "SubscribeToTask") else fails(call)
    )
    assert failure.code == grpc.StatusCode.INVALID_ARGUMENT
    assert failure.reason == "INVALID_PARAMS"
    assert f": {field_path}: " in failure.message
    assert [path for path, _ in failure.violations] == [field_path]
    assert srv.spy.calls == []


async def test_undecodable_request_is_a_parse_error(srv: Running) -> None:
    get_task = srv.channel.unary_unary("/lf.a2a.v1.A2AService/GetTask")
    corrupt = await fails(get_task(b"\xff\xff\xff", metadata=V1))
    assert (corrupt.code, corrupt.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "PARSE_ERROR")
    assert "lf.a2a.v1.GetTaskRequest" in corrupt.message
    bad_utf8 = await fails(get_task(b"\x0a\x02\xff\xfe", metadata=()))  # parsed before the version
    assert (bad_utf8.code, bad_utf8.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "PARSE_ERROR")
    stream = srv.channel.unary_stream("/lf.a2a.v1.A2AService/SendStreamingMessage")
    streamed = await stream_fails(stream(b"\xff\xff", metadata=V1))
    assert streamed.reason == "PARSE_ERROR"
    assert srv.spy.calls == []


async def test_a_value_protojson_cannot_hold_is_invalid(srv: Running) -> None:
    request = send_request()
    request.metadata["x"] = float("nan")
    failure = await fails(srv.stub.SendMessage(request, metadata=V1))
    assert (failure.code, failure.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PARAMS")


async def test_unknown_method_is_method_not_found(srv: Running) -> None:
    unary = srv.channel.unary_unary("/lf.a2a.v1.A2AService/NoSuchThing")
    failure = await fails(unary(b"", metadata=V1))
    assert (failure.code, failure.reason) == (grpc.StatusCode.UNIMPLEMENTED, "METHOD_NOT_FOUND")
    assert "NoSuchThing" in failure.message
    streaming = srv.channel.unary_stream("/other.Service/Watch")
    watched = await stream_fails(streaming(b"", metadata=V1))
    assert watched.reason == "METHOD_NOT_FOUND"


async def test_request_over_the_size_limit_is_refused_by_grpc(srv: Running) -> None:
    server = GrpcServer(srv.server.dispatcher, limits=Limits(max_body_bytes=4096))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            small = await within(stub.SendMessage(send_request(), metadata=V1))
            assert small.task.status.state == COMPLETED
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await within(stub.SendMessage(send_request(text="x" * 8192), metadata=V1))
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        await server.stop(0)


# -- budgets -----------------------------------------------------------------------------------------------

MiB = 1024 * 1024
#: A client that takes answers of any size, so that only the server's limits are tested.
BIG_ANSWERS = [("grpc.max_receive_message_length", -1)]


def echo_request(text: str, **fields: Any) -> pb.SendMessageRequest:
    return pb.SendMessageRequest(message=message("echo", text=text), **fields)


async def test_a_6_mb_request_gets_its_12_mb_answer(start: Start) -> None:
    # Issue 9: the echo agent answers with the text as an artifact and in the history, about twice the
    # request; the send limit used to be the receive limit, so grpc refused to send what the task produced.
    running = await start(agent_name="echo", channel_options=BIG_ANSWERS)
    text = "x" * 6_000_000
    response = await within(running.stub.SendMessage(echo_request(text), metadata=V1))
    task = response.task
    assert task.status.state == COMPLETED
    assert task.artifacts[0].parts[0].text == text
    assert task.history[0].parts[0].text == text
    assert response.ByteSize() > 12_000_000


async def test_an_answer_over_the_send_limit_is_a_clear_error_and_the_task_stays_readable(
    start: Start,
) -> None:
    running = await start(
        agent_name="echo", limits=Limits(max_response_bytes=8 * MiB), channel_options=BIG_ANSWERS
    )
    text = "x" * 6_000_000
    failure = await fails(running.stub.SendMessage(echo_request(text), metadata=V1))
    # Not RESOURCE_EXHAUSTED, which callers retry: the same request cannot succeed.
    assert failure.code == grpc.StatusCode.FAILED_PRECONDITION
    assert failure.reason == "RESPONSE_TOO_LARGE"
    assert failure.metadata["limit"] == str(8 * MiB)
    assert int(failure.metadata["size"]) > 12_000_000
    assert "historyLength" in failure.message and "GetTask" in failure.message
    task_id = failure.metadata["taskId"]

    # The task was done and kept: read in parts, it fits.
    whole = await fails(running.stub.GetTask(pb.GetTaskRequest(id=task_id), metadata=V1))
    assert (whole.code, whole.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "RESPONSE_TOO_LARGE")
    assert "historyLength" in whole.message
    request = pb.GetTaskRequest(id=task_id, history_length=0)
    task = await within(running.stub.GetTask(request, metadata=V1))
    assert task.status.state == COMPLETED
    assert task.artifacts[0].parts[0].text == text


async def test_a_stream_event_over_the_send_limit_ends_the_stream_and_the_task_goes_on(
    start: Start,
) -> None:
    running = await start(
        agent_name="echo", limits=Limits(max_response_bytes=4 * MiB), channel_options=BIG_ANSWERS
    )
    call = running.stub.SendStreamingMessage(echo_request("x" * 5_000_000), metadata=V1)
    failure = await stream_fails(call)
    assert (failure.code, failure.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "RESPONSE_TOO_LARGE")
    assert "historyLength" in failure.message
    await within(running.spy.stream_closed.wait())
    listed = await within(running.stub.ListTasks(pb.ListTasksRequest(history_length=0), metadata=V1))
    assert [t.id for t in listed.tasks] == [failure.metadata["taskId"]]


async def test_a_stream_whose_client_stops_reading_is_dropped_and_the_task_goes_on(start: Start) -> None:
    # The client reads nothing: its flow-control window (64 KiB, not grown: no BDP probes) fills and the
    # server's write of the first event (the task, holding the 2 MB request) cannot complete.
    running = await start(
        agent_name="echo",
        limits=Limits(write_timeout=0.2),
        channel_options=[*BIG_ANSWERS, ("grpc.http2.bdp_probe", 0)],
    )
    text = "x" * 2_000_000
    call = running.stub.SendStreamingMessage(echo_request(text), metadata=V1)
    await within(running.spy.stream_closed.wait())  # the server gave up on the stream

    async with grpc.aio.insecure_channel(running.target, options=BIG_ANSWERS) as other:
        listed = await within(
            a2a_pb2_grpc.A2AServiceStub(other).ListTasks(pb.ListTasksRequest(history_length=0), metadata=V1)
        )
    assert [t.status.state for t in listed.tasks] == [COMPLETED]

    # Reading again, the client gets what was sent, then why the stream ended.
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await collect(call)
    failure = failure_of(caught.value)
    assert (failure.code, failure.reason) == (grpc.StatusCode.UNAVAILABLE, "STREAM_WRITE_TIMEOUT")
    assert "SubscribeToTask" in failure.message


class _Held(BaseRequestHandler):
    """GetTask waits until ``release`` is set; ``entered`` counts the calls that reached the handler."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.entered = 0
        self._entries = asyncio.Condition()

    async def on_get_task(self, request: GetTaskRequest, call: CallContext) -> Task:
        async with self._entries:
            self.entered += 1
            self._entries.notify_all()
        await self.release.wait()
        raise UnsupportedOperationError("held")

    async def reached(self, count: int) -> None:
        async with self._entries:
            await self._entries.wait_for(lambda: self.entered >= count)


async def test_calls_beyond_max_streams_per_connection_wait_for_a_free_one(start: Start) -> None:
    held = _Held()
    running = await start(handler=held, limits=Limits(max_streams_per_connection=2))
    calls = [running.stub.GetTask(pb.GetTaskRequest(id=f"t{i}"), metadata=V1) for i in range(3)]
    await within(held.reached(2))
    async with grpc.aio.insecure_channel(
        running.target, options=[("grpc.use_local_subchannel_pool", 1)]
    ) as other:  # another connection is not held up
        elsewhere = a2a_pb2_grpc.A2AServiceStub(other).ListTasks(pb.ListTasksRequest(), metadata=V1)
        assert (await fails(elsewhere)).reason == "METHOD_NOT_FOUND"
    assert held.entered == 2
    assert not any(call.done() for call in calls)
    held.release.set()
    for call in calls:
        assert (await fails(call)).reason == "UNSUPPORTED_OPERATION"
    assert held.entered == 3


async def test_connections_beyond_max_connections_are_refused(start: Start) -> None:
    running = await start(limits=Limits(max_connections=2, keepalive_timeout=60.0))
    own = [("grpc.use_local_subchannel_pool", 1)]  # one connection per channel
    async with (
        grpc.aio.insecure_channel(running.target, options=own) as first,
        grpc.aio.insecure_channel(running.target, options=own) as second,
        grpc.aio.insecure_channel(running.target, options=own) as third,
    ):
        for channel in (first, second):
            await within(a2a_pb2_grpc.A2AServiceStub(channel).SendMessage(send_request(), metadata=V1))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await within(a2a_pb2_grpc.A2AServiceStub(third).SendMessage(send_request(), metadata=V1))
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_an_idle_connection_is_closed_after_the_keepalive_timeout(start: Start) -> None:
    running = await start(limits=Limits(keepalive_timeout=0.2))
    await complete_task(running)
    assert running.channel.get_state() == grpc.ChannelConnectivity.READY
    # The server's GOAWAY takes the channel back to IDLE; it reconnects for the next call.
    await within(running.channel.wait_for_state_change(grpc.ChannelConnectivity.READY))
    assert running.channel.get_state() == grpc.ChannelConnectivity.IDLE
    await complete_task(running)


async def test_a_connection_that_never_speaks_http2_is_closed(start: Start) -> None:
    running = await start(limits=Limits(header_timeout=0.2, keepalive_timeout=60.0))
    reader, writer = await asyncio.open_connection("127.0.0.1", running.server.port)
    try:
        # The server's own SETTINGS come first; then, without a client preface, the connection is closed.
        while await within(reader.read(65536)):
            pass
    except ConnectionResetError:
        pass
    finally:
        writer.close()
    await complete_task(running)


def test_server_options_follow_the_limits() -> None:
    limits = Limits(
        max_body_bytes=1000,
        max_response_bytes=2000,
        max_header_bytes=300,
        max_streams_per_connection=7,
        max_connections=9,
        keepalive_timeout=1.5,
        header_timeout=2.5,
    )
    options = dict(server_options(limits))
    assert options["grpc.max_receive_message_length"] == 1000
    assert options["grpc.max_send_message_length"] == 2000
    assert options["grpc.max_metadata_size"] == 300
    assert options["grpc.max_concurrent_streams"] == 7
    assert options["grpc.max_allowed_incoming_connections"] == 9
    assert options["grpc.max_connection_idle_ms"] == 1500
    assert options["grpc.server_handshake_timeout_ms"] == 2500


def test_address_brackets_ipv6_hosts() -> None:
    dispatcher = Dispatcher(BaseRequestHandler(), AgentCapabilities)
    assert GrpcServer(dispatcher, "::1", 50051).address == "[::1]:50051"
    assert GrpcServer(dispatcher, "localhost").address == "localhost:0"


async def test_unexpected_exception_is_internal_without_details(
    start: Start, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(BaseRequestHandler):
        async def on_get_task(self, request: GetTaskRequest, call: CallContext) -> Task:
            raise RuntimeError("secret database password in a traceback")

    running = await start(handler=Broken())
    with caplog.at_level(logging.ERROR, logger="skillwire.grpc"):
        failure = await fails(running.stub.GetTask(pb.GetTaskRequest(id="x"), metadata=V1))
    assert failure.code == grpc.StatusCode.INTERNAL
    assert failure.reason == "INTERNAL_ERROR"
    assert failure.message == "Internal error"
    assert "secret" in caplog.text  # the traceback is in the log, and only there


async def test_not_implemented_operation_is_method_not_found(start: Start) -> None:
    running = await start(handler=BaseRequestHandler())
    failure = await fails(running.stub.GetTask(pb.GetTaskRequest(id="x"), metadata=V1))
    assert (failure.code, failure.reason) == (grpc.StatusCode.UNIMPLEMENTED, "METHOD_NOT_FOUND")


async def test_a2a_error_raised_mid_stream_ends_it_with_a_status(start: Start) -> None:
    class Failing(BaseRequestHandler):
        async def on_subscribe_to_task(self, request: Any, call: CallContext) -> AsyncIterator[Any]:
            async def events() -> AsyncIterator[Any]:
                task = await running.runtime.on_get_task(GetTaskRequest(id=task_id), call)
                yield StreamResponse(task=task)
                raise UnsupportedOperationError("gone away", metadata={"why": 1})

            return events()

    running = await start()
    task_id = (await complete_task(running)).id
    running.spy.inner = Failing()

    call = running.stub.SubscribeToTask(pb.SubscribeToTaskRequest(id=task_id), metadata=V1)
    first = await within(call.read())
    assert first.task.id == task_id
    failure = await stream_fails(call)
    assert (failure.code, failure.reason, failure.metadata) == (
        grpc.StatusCode.FAILED_PRECONDITION,
        "UNSUPPORTED_OPERATION",
        {"why": "1"},
    )


# -- service parameters ------------------------------------------------------------------------------------


async def test_extensions_and_tenant_reach_the_handler(srv: Running) -> None:
    metadata = (*V1, ("a2a-extensions", "urn:a:v1, urn:b:v2"), ("x-trace", "t-1"))
    request = send_request()
    request.tenant = "acme"
    call = srv.stub.SendMessage(request, metadata=metadata)
    response = await within(call)
    assert response.task.status.state == COMPLETED
    assert ("a2a-extensions", "urn:a:v1,urn:b:v2") in tuple(await call.initial_metadata())

    (_, params, context) = srv.spy.calls[-1]
    assert context.extensions == {"urn:a:v1", "urn:b:v2"}
    assert context.tenant == params.tenant == "acme"
    assert context.headers["x-trace"] == "t-1"
    assert context.headers["a2a-version"] == "1.0"

    # The tenant scopes the task: without it, the task is not found.
    missing = await fails(srv.stub.GetTask(pb.GetTaskRequest(id=response.task.id), metadata=V1))
    assert missing.reason == "TASK_NOT_FOUND"
    found = await within(srv.stub.GetTask(pb.GetTaskRequest(id=response.task.id, tenant="acme"), metadata=V1))
    assert found.id == response.task.id


async def test_activate_filters_the_requested_extensions(srv: Running) -> None:
    declared = frozenset({"urn:a:v1"})
    server = GrpcServer(srv.server.dispatcher, activate=lambda requested: requested & declared)
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            metadata = (*V1, ("a2a-extensions", "urn:a:v1,urn:unknown"))
            call = stub.GetTask(pb.GetTaskRequest(id="no-such-task"), metadata=metadata)
            with pytest.raises(grpc.aio.AioRpcError):
                await within(call)
            assert ("a2a-extensions", "urn:a:v1") in tuple(await call.initial_metadata())
    finally:
        await server.stop(0)
    (_, _, context) = srv.spy.calls[-1]
    assert context.extensions == {"urn:a:v1"}


# -- the official a2a-sdk client over gRPC -----------------------------------------------------------------


def sdk_card(running: Running) -> pb.AgentCard:
    """The agent's card with one gRPC interface, as the sdk's ClientFactory reads it."""
    card = msgspec.structs.replace(
        running.card,
        supported_interfaces=[
            AgentInterface(url=running.target, protocol_binding="GRPC", protocol_version="1.0")
        ],
    )
    parsed: pb.AgentCard = assert_proto(msgspec.json.encode(card), "AgentCard")
    return parsed


@pytest.fixture
async def sdk(srv: Running) -> AsyncIterator[tuple[Client, Client]]:
    """(streaming, blocking) a2a-sdk clients for ``srv`` over its gRPC transport."""
    clients = [
        ClientFactory(
            ClientConfig(
                streaming=streaming,
                supported_protocol_bindings=["GRPC"],
                grpc_channel_factory=grpc.aio.insecure_channel,
            )
        ).create(sdk_card(srv))
        for streaming in (True, False)
    ]
    yield clients[0], clients[1]
    for client in clients:
        await client.close()


async def sdk_collect(events: AsyncIterator[pb.StreamResponse]) -> list[pb.StreamResponse]:
    async def drain() -> list[pb.StreamResponse]:
        async with aclosing(events):  # type: ignore[type-var]
            return [event async for event in events]

    return await within(drain())


async def test_sdk_send_get_list_and_cancel(srv: Running, sdk: tuple[Client, Client]) -> None:
    streaming, blocking = sdk
    context_id = str(uuid.uuid4())
    (response,) = await sdk_collect(blocking.send_message(send_request(context_id=context_id)))
    task = response.task
    assert task.status.state == COMPLETED

    assert await within(blocking.get_task(pb.GetTaskRequest(id=task.id))) == task
    listed = await within(blocking.list_tasks(pb.ListTasksRequest(context_id=context_id)))
    assert [t.id for t in listed.tasks] == [task.id] and listed.next_page_token == ""

    (reply,) = await sdk_collect(streaming.send_message(send_request("tck-message-response")))
    assert texts(reply.message.parts) == ["Direct message response"]

    request = send_request("tck-long-running")
    request.configuration.return_immediately = True
    (started,) = await sdk_collect(blocking.send_message(request))
    canceled = await within(blocking.cancel_task(pb.CancelTaskRequest(id=started.task.id)))
    assert canceled.status.state == CANCELED
    with pytest.raises(sdk_errors.TaskNotCancelableError):
        await within(blocking.cancel_task(pb.CancelTaskRequest(id=started.task.id)))


async def test_sdk_streams_and_subscribes(srv: Running, sdk: tuple[Client, Client]) -> None:
    streaming, blocking = sdk
    events = await sdk_collect(streaming.send_message(send_request("tck-stream-001")))
    assert [kind(e) for e in events] == ["task", "status_update", "artifact_update", "status_update"]
    assert events[-1].status_update.status.state == COMPLETED

    (asked,) = await sdk_collect(blocking.send_message(send_request("tck-multi-turn")))
    task = asked.task
    assert task.status.state == INPUT_REQUIRED
    subscription = streaming.subscribe(pb.SubscribeToTaskRequest(id=task.id))
    snapshot = await within(anext(subscription))
    assert snapshot.task.status.state == INPUT_REQUIRED
    follow_up = send_request("tck-multi-turn", task_id=task.id, context_id=task.context_id)
    (answer,) = await sdk_collect(blocking.send_message(follow_up))
    assert answer.task.status.state == COMPLETED
    rest = await sdk_collect(subscription)
    assert rest[-1].status_update.status.state == COMPLETED


async def test_sdk_maps_errors_back_to_its_classes(srv: Running, sdk: tuple[Client, Client]) -> None:
    streaming, blocking = sdk
    with pytest.raises(sdk_errors.TaskNotFoundError):
        await within(blocking.get_task(pb.GetTaskRequest(id="no-such-task")))
    with pytest.raises(sdk_errors.TaskNotFoundError):
        await sdk_collect(streaming.subscribe(pb.SubscribeToTaskRequest(id="no-such-task")))
    with pytest.raises(sdk_errors.PushNotificationNotSupportedError):
        await within(blocking.create_task_push_notification_config(PUSH_CALLS[0][1]))
    with pytest.raises(sdk_errors.PushNotificationNotSupportedError):
        await within(blocking.get_task_push_notification_config(PUSH_CALLS[1][1]))
    with pytest.raises(sdk_errors.PushNotificationNotSupportedError):
        await within(blocking.list_task_push_notification_configs(PUSH_CALLS[2][1]))
    with pytest.raises(sdk_errors.PushNotificationNotSupportedError):
        await within(blocking.delete_task_push_notification_config(PUSH_CALLS[3][1]))
    with pytest.raises(sdk_errors.InvalidParamsError):
        await within(blocking.get_task(pb.GetTaskRequest(id="")))
    done = await complete_task(srv)
    with pytest.raises(sdk_errors.UnsupportedOperationError):
        await sdk_collect(streaming.subscribe(pb.SubscribeToTaskRequest(id=done.id)))


async def test_sdk_extended_card(start: Start) -> None:
    running = await start(extended_card_enabled=True)
    async with ClientFactory(
        ClientConfig(supported_protocol_bindings=["GRPC"], grpc_channel_factory=grpc.aio.insecure_channel)
    ).create(sdk_card(running)) as client:
        with pytest.raises(sdk_errors.ExtendedAgentCardNotConfiguredError):
            await within(client.get_extended_agent_card(pb.GetExtendedAgentCardRequest()))

    extended = msgspec.structs.replace(running.card, name="extended")
    keys = Security(APIKey(keys={"sdk": "sdk-extended-key"}))
    served = await start(extended_card_enabled=True, extended_card=extended, security=keys)
    async with ClientFactory(
        ClientConfig(supported_protocol_bindings=["GRPC"], grpc_channel_factory=grpc.aio.insecure_channel)
    ).create(sdk_card(served)) as client:
        # the a2a-sdk client passes the key as a service parameter (gRPC metadata)
        keyed = ClientCallContext(service_parameters={"X-API-Key": "sdk-extended-key"})
        got = await within(client.get_extended_agent_card(pb.GetExtendedAgentCardRequest(), context=keyed))
    assert got.name == "extended"


# -- the conversion, directly ------------------------------------------------------------------------------


def test_the_rpc_table_agrees_with_the_proto_service() -> None:
    service = pb.DESCRIPTOR.services_by_name["A2AService"]
    assert {method.name for method in service.methods} == {spec.method for spec in OPERATIONS}
    for spec in OPERATIONS:
        method, rpc = service.methods_by_name[spec.method], RPCS[spec.operation]
        assert rpc.spec is spec
        assert rpc.request.DESCRIPTOR is method.input_type
        assert rpc.response.DESCRIPTOR is method.output_type
        assert rpc.request.DESCRIPTOR.name == spec.request_type.__name__
        assert rpc.response.DESCRIPTOR.name == spec.grpc_response
        assert (method.server_streaming, method.client_streaming) == (spec.streaming, False)


@pytest.mark.parametrize("spec", OPERATIONS, ids=[spec.method for spec in OPERATIONS])
async def test_every_operation_of_the_table_is_served(srv: Running, spec: OperationSpec) -> None:
    path = f"/lf.a2a.v1.A2AService/{spec.method}"
    call = srv.channel.unary_stream(path) if spec.streaming else srv.channel.unary_unary(path)
    # Reaching the servicer: the request is parsed as the row's message first, then the version negotiated.
    refuse = stream_fails if spec.streaming else fails
    corrupt = await refuse(call(b"\xff\xff", metadata=V1))
    assert (corrupt.code, corrupt.reason) == (grpc.StatusCode.INVALID_ARGUMENT, "PARSE_ERROR")
    assert f"lf.a2a.v1.{spec.request_type.__name__}" in corrupt.message
    version = await refuse(call(b"", metadata=()))
    assert (version.code, version.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "VERSION_NOT_SUPPORTED")
    assert srv.spy.calls == []
    unknown = await fails(srv.channel.unary_unary(path + "s")(b"", metadata=V1))
    assert (unknown.code, unknown.reason) == (grpc.StatusCode.UNIMPLEMENTED, "METHOD_NOT_FOUND")


def test_rich_status_of_every_error_round_trips() -> None:
    from skillwire.errors import ERRORS_BY_CODE

    for cls in ERRORS_BY_CODE.values():
        error: A2AError = cls(metadata={"n": 1}, field_violations=[("a.b", "bad")])
        code, raw = rich_status(error, {})
        assert code.name == cls.grpc_status
        status = status_pb2.Status.FromString(raw)
        info = error_details_pb2.ErrorInfo()
        assert status.details[0].Unpack(info)
        assert (info.reason, dict(info.metadata)) == (cls.reason, {"n": "1"})
        assert json_format.MessageToDict(status)["message"] == error.message
        read = read_status(((STATUS_DETAILS_KEY, raw),))
        assert read is not None
        assert (read.message, read.reason, read.metadata) == (error.message, cls.reason, {"n": "1"})
        assert (read.violations, read.retry_after) == ([("a.b", "bad")], None)
        overridden, _ = rich_status(error, {A2AError: "ABORTED"})  # a base class's override applies
        assert overridden == grpc.StatusCode.ABORTED


def test_the_app_serves_grpc_beside_http_and_lists_it_on_the_card(serve: Any) -> None:
    from conftest import example_agent

    srv = serve(example_agent("tck").asgi(store="memory://", grpc_port=0))
    card = httpx.get(srv.url + "/.well-known/agent-card.json", timeout=10).json()
    bindings = [(i["protocolBinding"], i["url"]) for i in card["supportedInterfaces"]]
    assert [b for b, _ in bindings] == ["JSONRPC", "HTTP+JSON", "GRPC"]
    address = bindings[2][1]
    assert address.startswith("127.0.0.1:") and address == srv.app.grpc_address

    async def call() -> str:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = a2a_pb2_grpc.A2AServiceStub(channel)
            sent = await stub.SendMessage(
                pb.SendMessageRequest(
                    message=pb.Message(
                        message_id="tck-complete-task-app", role=pb.ROLE_USER, parts=[pb.Part(text="hi")]
                    )
                ),
                metadata=(("a2a-version", "1.0"),),
                timeout=10,
            )
            assert sent.task.status.state == pb.TASK_STATE_COMPLETED
        return sent.task.id

    task_id = asyncio.run(call())
    # the same task through JSON-RPC: one runtime behind every binding
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}
    got = httpx.post(srv.rpc_url, json=body, headers={"A2A-Version": "1.0"}, timeout=10).json()
    assert got["result"]["status"]["state"] == "TASK_STATE_COMPLETED"
    srv.stop()
