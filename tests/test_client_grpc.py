"""The client's gRPC transport against real skillwire servers with gRPC on 127.0.0.1.

``GrpcTransport`` is driven directly and under :class:`skillwire.client.Client`. Faults are real: a closed
port, a deadline, a TCP proxy that cuts the connection midway, and a bare ``grpc.aio`` server that answers
with chosen status codes (what a proxy or a foreign agent sends).
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any

import grpc
import msgspec
import pytest
from a2a.types import a2a_pb2 as pb
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2

from conftest import RunningServer, collect, example_agent, free_port, gated_agent, state_of
from skillwire import Agent, CallContext, Client, RequestContext, RetryPolicy, TaskEvents, TaskState
from skillwire.client import AgentConnectionError, HTTPStatusError, InvalidResponseError
from skillwire.client.client import select_interface
from skillwire.client.grpc import GrpcTransport, grpc_target
from skillwire.errors import (
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from skillwire.protocol import models as m
from skillwire.security import APIKey, Security
from skillwire.server.handler import RequestHandler
from skillwire.types import Operation

FAST = RetryPolicy(retries=3, base=0.0, cap=0.01)
WAIT = 10.0  # the cap on every wait in this module, in seconds
_O = Operation


def msg(prefix: str, text: str = "hi") -> m.Message:
    return m.Message(message_id=f"{prefix}-{uuid.uuid4()}", role=m.Role.USER, parts=[m.Part(text=text)])


def send_request(prefix: str, **fields: Any) -> m.SendMessageRequest:
    return m.SendMessageRequest(message=msg(prefix), **fields)


def grpc_client(srv: RunningServer, transport: GrpcTransport | None = None) -> Client:
    """A Client over the GRPC interface of ``srv``'s card (``transport`` replaces the one made for it)."""
    card = srv.app.card_for(srv.url)
    interface = select_interface(card, ["GRPC"])
    transport = transport or GrpcTransport(interface.url, timeout=WAIT)
    return Client(transport, card=card, interface=interface, retry=FAST)


@pytest.fixture
def tck(serve: Any) -> RunningServer:
    return serve(example_agent("tck").asgi(store="memory://", grpc_port=0))  # type: ignore[no-any-return]


@pytest.fixture
async def client(tck: RunningServer) -> AsyncIterator[Client]:
    """Discovered from the card, as users connect: the GRPC interface chosen by ``bindings``."""
    client = await Client.connect(tck.url, bindings=("GRPC",), timeout=WAIT, retries=FAST)
    assert isinstance(client.transport, GrpcTransport)
    assert client.interface is not None and client.interface.protocol_binding == "GRPC"
    yield client
    await client.aclose()
    await client.transport.aclose()  # idempotent: a no-op once the client closed it


# -- the url ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "target", "secure"),
    [
        ("127.0.0.1:50051", "127.0.0.1:50051", False),
        ("[::1]:50051", "[::1]:50051", False),
        ("grpc://agent.example:50051", "agent.example:50051", False),
        ("grpc://[::1]:50051/", "[::1]:50051", False),
        ("grpcs://agent.example:443", "agent.example:443", True),
        ("GRPCS://agent.example", "agent.example", True),
        ("https://agent.example:8443/a2a", "agent.example:8443", True),
        ("http://127.0.0.1:50051", "127.0.0.1:50051", False),
        ("dns:///agent.example:443", "dns:///agent.example:443", False),
        ("unix:///tmp/agent.sock", "unix:///tmp/agent.sock", False),
    ],
)
def test_url_gives_the_target_and_whether_tls(url: str, target: str, secure: bool) -> None:
    assert grpc_target(url) == (target, secure)
    transport = GrpcTransport(url)
    assert (transport.target, transport.secure) == (target, secure)


def test_headers_become_metadata_without_http_only_ones() -> None:
    headers = {
        "Authorization": "Bearer t",
        "A2A-Extensions": "urn:a",
        "A2A-Version": "0.3",
        "Content-Type": "application/json",
        "Host": "agent.example",
        "Connection": "keep-alive",
        "TE": "trailers",
        "grpc-timeout": "1S",
        "X-Trace-Bin": "abc",
    }
    assert dict(GrpcTransport("h:1", headers=headers).metadata) == {
        "authorization": "Bearer t",
        "a2a-extensions": "urn:a",
        "a2a-version": "1.0",
        "x-trace-bin": b"abc",
    }


# -- what only gRPC has to get right (the shared behaviour tests are in test_client.py) ---------------------------------------------------------------------------


async def test_integral_numbers_in_data_come_back_as_ints(client: Client) -> None:
    sent = await client.send(msg("tck-artifact-data"), metadata={"n": 7, "ratio": 0.5})
    assert isinstance(sent, m.Task)
    task = await client.get_task(sent.id, history_length=0)
    assert task.id == sent.id and task.history == []
    data = task.artifacts[0].parts[0].data
    assert data == {"key": "value", "count": 42} and type(data["count"]) is int


async def test_list_tasks_has_every_field_even_when_empty(client: Client) -> None:
    first = await client.send(msg("tck-complete-task"))
    assert isinstance(first, m.Task)
    again = await client.send(msg("tck-complete-task"), context_id=first.context_id)
    assert isinstance(again, m.Task)
    page = await client.list_tasks(context_id=first.context_id, page_size=10, include_artifacts=False)
    assert {t.id for t in page.tasks} == {first.id, again.id}
    assert page.total_size == 2 and page.next_page_token == ""
    nothing = await client.list_tasks(context_id="no-such-context")
    assert nothing.tasks == [] and nothing.total_size == 0 and nothing.next_page_token == ""


async def test_unknown_task_is_task_not_found_with_metadata(client: Client) -> None:
    with pytest.raises(TaskNotFoundError) as caught:
        await client.get_task("no-such-task")
    assert caught.value.reason == "TASK_NOT_FOUND"
    assert caught.value.metadata.get("taskId") == "no-such-task"
    assert "no-such-task" in caught.value.message
    assert isinstance(caught.value.__cause__, grpc.aio.AioRpcError)
    assert caught.value.__cause__.code() is grpc.StatusCode.NOT_FOUND
    with pytest.raises(TaskNotFoundError):
        await client.cancel_task("no-such-task")


async def test_invalid_params_carry_the_field_violations(client: Client) -> None:
    transport = client.transport
    with pytest.raises(InvalidParamsError) as caught:
        await transport.send(_O.GET_TASK, m.GetTaskRequest(id=""))
    assert caught.value.field_violations == [("id", "required field is missing")]
    with pytest.raises(InvalidParamsError) as caught:
        await client.list_tasks(page_size=500)
    [(field, description)] = caught.value.field_violations
    assert field == "pageSize" and "100" in description


async def test_a_request_protobuf_cannot_hold_is_refused_before_sending() -> None:
    transport = GrpcTransport(f"127.0.0.1:{free_port()}", timeout=WAIT)  # nothing listens there
    request = m.ListTaskPushNotificationConfigsRequest(task_id="t", page_size=2**40)  # int32 field
    with pytest.raises(InvalidParamsError, match="ListTaskPushNotificationConfigsRequest"):
        await transport.send(_O.LIST_PUSH_CONFIGS, request)
    await transport.aclose()


async def test_stream_errors_are_typed(client: Client) -> None:
    task = await client.send(msg("tck-complete-task"))
    assert isinstance(task, m.Task)
    with pytest.raises(UnsupportedOperationError):
        await collect(client.subscribe(task.id))
    with pytest.raises(TaskNotFoundError) as caught:
        await collect(client.subscribe("no-such-task"))
    assert caught.value.metadata.get("taskId") == "no-such-task"


async def test_extended_card_is_served(serve: Any) -> None:
    agent = example_agent("tck")
    agent.extended_card = msgspec.structs.replace(agent.card(), name="TCK agent (extended)")
    agent.extended_card_enabled = True
    agent.security = Security(APIKey(keys={"tester": "grpc-client-key"}))  # it needs authentication
    srv = serve(agent.asgi(store="memory://", grpc_port=0))
    interface = select_interface(srv.app.card_for(srv.url), ["GRPC"])
    keyed = GrpcTransport(interface.url, timeout=WAIT, headers={"x-api-key": "grpc-client-key"})
    async with grpc_client(srv, keyed) as client:
        assert client.card.capabilities.extended_agent_card
        card = await client.get_extended_card()
    assert card.name == "TCK agent (extended)" and card.skills


async def test_ipv6_target(serve: Any) -> None:
    srv = serve(example_agent("tck").asgi(store="memory://", grpc_port=0, grpc_host="::1"))
    address = srv.app.grpc_address
    assert address.startswith("[::1]:")
    async with GrpcTransport(f"grpc://{address}", timeout=WAIT) as transport:
        response = await transport.send(_O.SEND_MESSAGE, send_request("tck-complete-task"))
    assert response.task is not None and response.task.status.state is TaskState.COMPLETED


# -- metadata --------------------------------------------------------------------------------------------


def header_echo_agent() -> Agent:
    """Replies with what the agent saw of the call: binding, activated extensions, headers."""

    async def run(context: RequestContext, events: TaskEvents) -> None:
        call = context.call
        seen = {"binding": call.binding, "extensions": sorted(call.extensions), "headers": dict(call.headers)}
        await events.reply(json.dumps(seen))

    extension = m.AgentExtension(uri="urn:skillwire:test:v1")
    return Agent("echo-headers", "Shows the call it got.", executor=run, extensions=[extension])


async def test_headers_reach_the_agent_as_metadata(serve: Any) -> None:
    srv = serve(header_echo_agent().asgi(store="memory://", grpc_port=0))
    headers = {
        "Authorization": "Bearer s3cret",
        "A2A-Extensions": "urn:skillwire:test:v1, urn:unknown",
        "Content-Type": "text/plain",
        "Host": "evil.example",
        "Connection": "close",
    }
    transport = GrpcTransport(srv.app.grpc_address, timeout=WAIT, headers=headers)
    async with grpc_client(srv, transport) as client:
        reply = await client.send("who am I?")
    await transport.aclose()
    assert isinstance(reply, m.Message)
    seen = json.loads(reply.text())
    assert seen["binding"] == "GRPC"
    assert seen["extensions"] == ["urn:skillwire:test:v1"]  # the declared one is activated
    assert seen["headers"]["authorization"] == "Bearer s3cret"
    assert seen["headers"]["a2a-version"] == "1.0"
    assert "host" not in seen["headers"] and seen["headers"].get("content-type") != "text/plain"


# -- connection faults -----------------------------------------------------------------------------------


async def test_unreachable_agent_is_a_connection_error() -> None:
    async with GrpcTransport(f"127.0.0.1:{free_port()}", timeout=WAIT) as transport:
        with pytest.raises(AgentConnectionError, match="UNAVAILABLE"):
            await transport.send(_O.GET_TASK, m.GetTaskRequest(id="t"))
        with pytest.raises(AgentConnectionError):
            await collect(transport.stream(_O.SUBSCRIBE_TO_TASK, m.SubscribeToTaskRequest(id="t")))
        client = Client(transport, retry=FAST)
        with pytest.raises(AgentConnectionError):
            await client.get_task("t")  # retried, then given up


async def test_deadline_is_a_connection_error(tck: RunningServer) -> None:
    async with GrpcTransport(tck.app.grpc_address, timeout=0.5) as transport:
        with pytest.raises(AgentConnectionError, match="DEADLINE_EXCEEDED"):
            await transport.send(_O.SEND_MESSAGE, send_request("tck-long-running"))  # blocks for minutes
    async with GrpcTransport(tck.app.grpc_address, timeout=WAIT) as transport:  # the task goes on: end it
        working = await transport.send(_O.LIST_TASKS, m.ListTasksRequest(status=TaskState.WORKING))
        assert len(working.tasks) == 1
        await transport.send(_O.CANCEL_TASK, m.CancelTaskRequest(id=working.tasks[0].id))


async def test_closed_transport_refuses_calls_and_leaves_a_given_channel_open(tck: RunningServer) -> None:
    channel = grpc.aio.insecure_channel(tck.app.grpc_address)
    try:
        async with GrpcTransport("ignored:1", channel=channel, timeout=WAIT) as transport:
            first = await transport.send(_O.SEND_MESSAGE, send_request("tck-complete-task"))
        with pytest.raises(RuntimeError, match="closed"):
            await transport.send(_O.GET_TASK, m.GetTaskRequest(id="t"))
        again = GrpcTransport("ignored:1", channel=channel, timeout=WAIT)
        assert first.task is not None
        task = await again.send(_O.GET_TASK, m.GetTaskRequest(id=first.task.id))
        assert task.id == first.task.id
    finally:
        await channel.close()


class Cutter:
    """A TCP proxy to ``upstream`` on 127.0.0.1 whose ``cut()`` aborts every open connection: the server
    seems to have died, while new connections still get through."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.connections = 0
        self._open: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        self.connections += 1
        self._open += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except OSError:
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        for writer in self._open:
            writer.transport.abort()
        self._open.clear()

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@pytest.fixture
async def cutter_for() -> AsyncIterator[Callable[[RunningServer], Awaitable[Cutter]]]:
    cutters: list[Cutter] = []

    async def start(srv: RunningServer) -> Cutter:
        assert srv.app.grpc_address is not None
        cutter = Cutter(int(srv.app.grpc_address.rpartition(":")[2]))
        await cutter.start()
        cutters.append(cutter)
        return cutter

    yield start
    for cutter in cutters:
        await cutter.stop()


async def test_stream_broken_midway_is_a_connection_error(
    tck: RunningServer, cutter_for: Callable[[RunningServer], Awaitable[Cutter]]
) -> None:
    cutter = await cutter_for(tck)
    events: list[m.StreamResponse] = []
    async with GrpcTransport(f"127.0.0.1:{cutter.port}", timeout=WAIT) as transport:
        with pytest.raises(AgentConnectionError, match="UNAVAILABLE"):
            async with asyncio.timeout(WAIT):
                async for event in transport.stream(
                    _O.SEND_STREAMING_MESSAGE, send_request("tck-long-running")
                ):
                    events.append(event)
                    if state_of(event) is TaskState.WORKING:
                        cutter.cut()
        # The task goes on, and the channel connects again. grpc may first try the connection it has not yet
        # seen die (UNAVAILABLE, "Stream removed"): a connection error, which a client's retry policy retries.
        assert events[0].task is not None
        task_id = events[0].task.id
        patient = RetryPolicy(retries=5, base=0.05, cap=0.5)
        task = await patient.call(lambda: transport.send(_O.GET_TASK, m.GetTaskRequest(id=task_id)))
        assert task.status.state is TaskState.WORKING
        await patient.call(lambda: transport.send(_O.CANCEL_TASK, m.CancelTaskRequest(id=task_id)))
    assert cutter.connections >= 2


class Watch:
    """A request handler around the runtime that tells (across threads) when a subscription starts and
    when a stream the server gave out is closed."""

    def __init__(self, inner: RequestHandler) -> None:
        self.inner = inner
        self.subscribed = threading.Event()
        self.stream_closed = threading.Event()

    async def handle(self, operation: Operation, params: Any, context: CallContext) -> Any:
        result = await self.inner.handle(operation, params, context)
        if operation is _O.SUBSCRIBE_TO_TASK:
            self.subscribed.set()
        if operation in (_O.SEND_STREAMING_MESSAGE, _O.SUBSCRIBE_TO_TASK):
            return self._watched(result)
        return result

    async def _watched(self, events: AsyncIterator[Any]) -> AsyncIterator[Any]:
        try:
            async for event in events:
                yield event
        finally:
            self.stream_closed.set()
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()


async def test_client_resumes_a_broken_stream_without_repeats(
    serve: Any, gate: threading.Event, cutter_for: Callable[[RunningServer], Awaitable[Cutter]]
) -> None:
    watches: list[Watch] = []

    def watched(runtime: RequestHandler) -> Watch:
        watches.append(Watch(runtime))
        return watches[-1]

    srv = serve(gated_agent(gate).asgi(store="memory://", grpc_port=0, wrap=watched))
    cutter = await cutter_for(srv)

    async def open_gate_once_resubscribed() -> None:
        assert await asyncio.to_thread(watches[0].subscribed.wait, WAIT)
        gate.set()

    events: list[m.StreamResponse] = []
    transport = GrpcTransport(f"127.0.0.1:{cutter.port}", timeout=WAIT)
    async with grpc_client(srv, transport) as client, asyncio.timeout(WAIT), asyncio.TaskGroup() as group:
        async for event in client.stream(msg("gated")):
            events.append(event)
            if event.artifact_update is not None and event.artifact_update.artifact.artifact_id == "a1":
                cutter.cut()
                group.create_task(open_gate_once_resubscribed())
    await transport.aclose()
    assert cutter.connections == 2  # the original stream, then SubscribeToTask on a new connection
    assert events[0].task is not None and sum(e.task is not None for e in events) == 1
    artifacts = [e.artifact_update.artifact for e in events if e.artifact_update]
    assert [(a.artifact_id, a.parts[0].text) for a in artifacts] == [("a1", "one"), ("a2", "two")]
    states = [s for s in map(state_of, events) if s is not None]
    assert states[-1] is TaskState.COMPLETED and states.count(TaskState.COMPLETED) == 1


async def test_consumer_stopping_early_cancels_the_call_not_the_task(serve: Any) -> None:
    watches: list[Watch] = []

    def watched(runtime: RequestHandler) -> Watch:
        watches.append(Watch(runtime))
        return watches[-1]

    srv = serve(example_agent("tck").asgi(store="memory://", grpc_port=0, wrap=watched))
    async with GrpcTransport(srv.app.grpc_address, timeout=WAIT) as transport:
        stream = transport.stream(_O.SEND_STREAMING_MESSAGE, send_request("tck-long-running"))
        async with aclosing(stream), asyncio.timeout(WAIT):
            first = await anext(stream)
        assert first.task is not None
        assert await asyncio.to_thread(watches[0].stream_closed.wait, WAIT)  # the server saw the cancel
        task = await transport.send(_O.GET_TASK, m.GetTaskRequest(id=first.task.id))
        assert task.status.state is TaskState.WORKING
        await transport.send(_O.CANCEL_TASK, m.CancelTaskRequest(id=task.id))


# -- statuses from a server that is not a skillwire agent ------------------------------------------------


def rich(code: grpc.StatusCode, message: str, *details: Any) -> bytes:
    packed = []
    for detail in details:
        box = any_pb2.Any()
        box.Pack(detail)
        packed.append(box)
    return status_pb2.Status(code=code.value[0], message=message, details=packed).SerializeToString()


class Answer:
    """What the bare server answers every A2A call with: a status, maybe rich details, maybe an event
    first (for streams), maybe a reply (for unary calls)."""

    def __init__(self) -> None:
        self.code = grpc.StatusCode.OK
        self.message = ""
        self.details: bytes | None = None
        self.event: pb.StreamResponse | None = None
        self.reply: Any = None


@pytest.fixture
async def bare() -> AsyncIterator[tuple[Answer, str]]:
    """A grpc.aio server on this loop that serves ``lf.a2a.v1.A2AService`` with canned answers."""
    answer = Answer()

    async def fail(context: Any) -> None:
        trailers = (("grpc-status-details-bin", answer.details),) if answer.details is not None else ()
        await context.abort(answer.code, answer.message, trailing_metadata=trailers)

    async def unary(request: Any, context: Any) -> Any:
        if answer.reply is not None:
            return answer.reply
        await fail(context)

    async def streaming(request: Any, context: Any) -> None:
        if answer.event is not None:
            await context.write(answer.event)
        await fail(context)

    handlers = {
        "GetTask": grpc.unary_unary_rpc_method_handler(
            unary, pb.GetTaskRequest.FromString, pb.Task.SerializeToString
        ),
        "SubscribeToTask": grpc.unary_stream_rpc_method_handler(
            streaming, pb.SubscribeToTaskRequest.FromString, pb.StreamResponse.SerializeToString
        ),
    }
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("lf.a2a.v1.A2AService", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield answer, f"127.0.0.1:{port}"
    await server.stop(0)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidParamsError),
        (grpc.StatusCode.NOT_FOUND, TaskNotFoundError),
        (grpc.StatusCode.UNIMPLEMENTED, MethodNotFoundError),
        (grpc.StatusCode.INTERNAL, InternalError),
        (grpc.StatusCode.FAILED_PRECONDITION, InternalError),
        (grpc.StatusCode.UNAVAILABLE, AgentConnectionError),
        (grpc.StatusCode.CANCELLED, AgentConnectionError),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, HTTPStatusError),
        (grpc.StatusCode.UNAUTHENTICATED, HTTPStatusError),
        (grpc.StatusCode.PERMISSION_DENIED, HTTPStatusError),
    ],
)
async def test_a_status_without_details_is_mapped_by_its_code(
    bare: tuple[Answer, str], code: grpc.StatusCode, expected: type[Exception]
) -> None:
    answer, address = bare
    answer.code, answer.message = code, "the proxy says no"
    async with GrpcTransport(address, timeout=WAIT) as transport:
        with pytest.raises(expected) as caught:
            await transport.send(_O.GET_TASK, m.GetTaskRequest(id="t"))
    error = caught.value
    assert "the proxy says no" in str(error)
    if isinstance(error, HTTPStatusError):
        statuses = {"RESOURCE_EXHAUSTED": 429, "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403}
        assert error.status_code == statuses[code.name] and error.retry_after is None
    if expected is InternalError:
        assert code.name in str(error)


async def test_a_service_that_is_not_there_is_method_not_found(bare: tuple[Answer, str]) -> None:
    _, address = bare  # the bare server has no ListTasks
    async with GrpcTransport(address, timeout=WAIT) as transport:
        with pytest.raises(MethodNotFoundError):
            await transport.send(_O.LIST_TASKS, m.ListTasksRequest())


async def test_rich_details_pick_the_class_and_keep_what_they_carry(bare: tuple[Answer, str]) -> None:
    answer, address = bare
    info = error_details_pb2.ErrorInfo(
        reason="TASK_NOT_CANCELABLE", domain="a2a-protocol.org", metadata={"taskId": "t", "state": "done"}
    )
    violation = error_details_pb2.BadRequest.FieldViolation(field="id", description="bad id")
    code = grpc.StatusCode.FAILED_PRECONDITION
    answer.code, answer.message = code, "cannot cancel t"
    answer.details = rich(
        code, "cannot cancel t", info, error_details_pb2.BadRequest(field_violations=[violation])
    )
    async with GrpcTransport(address, timeout=WAIT) as transport:
        with pytest.raises(TaskNotCancelableError) as caught:
            await transport.send(_O.GET_TASK, m.GetTaskRequest(id="t"))
    assert caught.value.message == "cannot cancel t"
    assert caught.value.metadata == {"taskId": "t", "state": "done"}
    assert caught.value.field_violations == [("id", "bad id")]


async def test_an_unknown_reason_falls_back_on_the_code_keeping_metadata(bare: tuple[Answer, str]) -> None:
    answer, address = bare
    info = error_details_pb2.ErrorInfo(reason="QUOTA_GONE", domain="example.com", metadata={"k": "v"})
    answer.code, answer.message = grpc.StatusCode.INVALID_ARGUMENT, "nope"
    answer.details = rich(answer.code, "nope", info)
    async with GrpcTransport(address, timeout=WAIT) as transport:
        with pytest.raises(InvalidParamsError) as caught:
            await transport.send(_O.GET_TASK, m.GetTaskRequest(id="t"))
    assert caught.value.message == "nope" and caught.value.metadata == {"k": "v"}


async def test_resource_exhausted_honours_retry_info(bare: tuple[Answer, str]) -> None:
    answer, address = bare
    retry = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(seconds=2, nanos=500_000_000))
    answer.code, answer.message = grpc.StatusCode.RESOURCE_EXHAUSTED, "slow down"
    answer.details = rich(answer.code, "slow down", retry)
    async with GrpcTransport(address, timeout=WAIT) as transport:
        with pytest.raises(HTTPStatusError) as caught:
            await transport.send(_O.GET_TASK, m.GetTaskRequest(id="t"))
    assert caught.value.status_code == 429 and caught.value.retry_after == 2.5


async def test_an_error_after_events_ends_the_stream_typed(bare: tuple[Answer, str]) -> None:
    answer, address = bare
    answer.event = pb.StreamResponse(
        task=pb.Task(id="t", context_id="c", status=pb.TaskStatus(state=pb.TASK_STATE_WORKING))
    )
    info = error_details_pb2.ErrorInfo(reason="INTERNAL_ERROR", domain="a2a-protocol.org")
    answer.code, answer.message = grpc.StatusCode.INTERNAL, "it broke"
    answer.details = rich(answer.code, "it broke", info)
    events: list[m.StreamResponse] = []
    async with GrpcTransport(address, timeout=WAIT) as transport:
        with pytest.raises(InternalError, match="it broke"):
            async with asyncio.timeout(WAIT):
                async for event in transport.stream(_O.SUBSCRIBE_TO_TASK, m.SubscribeToTaskRequest(id="t")):
                    events.append(event)
    assert len(events) == 1 and events[0].task is not None and events[0].task.id == "t"


async def test_a_reply_that_is_not_v1_is_an_invalid_response(bare: tuple[Answer, str]) -> None:
    answer, address = bare
    answer.reply = pb.Task(id="t")  # no status: a required field of a v1.0 Task
    async with GrpcTransport(address, timeout=WAIT) as transport:
        with pytest.raises(InvalidResponseError, match="Task"):
            await transport.send(_O.GET_TASK, m.GetTaskRequest(id="t"))
