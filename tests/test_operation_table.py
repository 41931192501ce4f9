"""The operation table drives every HTTP binding, both directions: a row's request, encoded by the client
codec of a binding, is decoded by the server side into the same operation and the same request Struct, and
a real server routes every row to the request handler (issue 10: one place for each operation)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

import skillwire
from conftest import STREAM_WAIT, RunningServer, example_agent
from skillwire.client import JsonRpcTransport, RestTransport
from skillwire.errors import MethodNotFoundError, PushNotificationNotSupportedError, TaskNotFoundError
from skillwire.protocol import models as m
from skillwire.protocol.operations import OPERATIONS, Operation, OperationSpec, spec_of
from skillwire.server.context import CallContext
from skillwire.server.handler import BaseRequestHandler
from skillwire.wire import rest
from skillwire.wire.codec import jsonrpc_codec, rest_codec
from skillwire.wire.jsonrpc import parse_request

_O = Operation
_MESSAGE = m.Message(message_id="m1", role=m.Role.USER, parts=[m.Part(text="hi")])

#: One request per operation, with a tenant and every path field set to a value that needs escaping.
SAMPLES: dict[Operation, msgspec.Struct] = {
    _O.SEND_MESSAGE: m.SendMessageRequest(tenant="acme co", message=_MESSAGE),
    _O.SEND_STREAMING_MESSAGE: m.SendMessageRequest(tenant="acme", message=_MESSAGE),
    _O.GET_TASK: m.GetTaskRequest(tenant="acme", id="t/1", history_length=2),
    _O.LIST_TASKS: m.ListTasksRequest(tenant="acme", context_id="c1", page_size=5),
    _O.CANCEL_TASK: m.CancelTaskRequest(tenant="acme", id="t:1", metadata={"why": "done"}),
    _O.SUBSCRIBE_TO_TASK: m.SubscribeToTaskRequest(tenant="acme", id="t1"),
    _O.CREATE_PUSH_CONFIG: m.TaskPushNotificationConfig(
        tenant="acme", task_id="t1", id="p1", url="https://example.com/hook"
    ),
    _O.GET_PUSH_CONFIG: m.GetTaskPushNotificationConfigRequest(tenant="acme", task_id="t1", id="p1"),
    _O.LIST_PUSH_CONFIGS: m.ListTaskPushNotificationConfigsRequest(tenant="acme", task_id="t1", page_size=3),
    _O.DELETE_PUSH_CONFIG: m.DeleteTaskPushNotificationConfigRequest(tenant="acme", task_id="t1", id="p1"),
    _O.GET_EXTENDED_AGENT_CARD: m.GetExtendedAgentCardRequest(tenant="acme"),
}

ROWS = [pytest.param(spec, id=spec.method) for spec in OPERATIONS]


def test_the_table_has_one_row_per_operation_and_every_row_is_complete() -> None:
    assert [spec.operation for spec in OPERATIONS] == list(Operation)
    assert set(SAMPLES) == set(Operation)
    for spec in OPERATIONS:
        assert spec_of(spec.operation) is spec
        assert isinstance(SAMPLES[spec.operation], spec.request_type)
        assert spec.routes and spec.handler.startswith("on_") and spec.grpc_response
        assert (spec.response_type is m.StreamResponse) is spec.streaming


@pytest.mark.parametrize("spec", ROWS)
def test_a_rest_request_encoded_by_the_client_decodes_to_the_same_request(spec: OperationSpec) -> None:
    request = SAMPLES[spec.operation]
    method, path, body, query = rest_codec("1.0").encode_call(spec.operation, request)
    assert (method, path.split("/")[1]) == (spec.routes[0].method, "acme%20co" if "co" in path else "acme")
    call = rest.match_route(method, path)  # the path as sent (the endpoint matches the raw path)
    assert call is not None and call.operation is spec.operation
    params = rest.parse_call(call, {k: [v] for k, v in query.items()}, body or b"")
    assert params == request


@pytest.mark.parametrize("spec", ROWS)
def test_a_jsonrpc_request_encoded_by_the_client_decodes_to_the_same_request(spec: OperationSpec) -> None:
    request = SAMPLES[spec.operation]
    decoded = parse_request(jsonrpc_codec("1.0").encode_call(7, spec.operation, request))
    assert (decoded.id, decoded.spec, decoded.params) == (7, spec, request)


@pytest.mark.parametrize("spec", ROWS)
async def test_a_handler_without_the_rows_method_answers_method_not_found(spec: OperationSpec) -> None:
    with pytest.raises(MethodNotFoundError, match=spec.method):
        await BaseRequestHandler().handle(spec.operation, SAMPLES[spec.operation], CallContext())


def _outcome_of(exc: BaseException | None) -> str:
    return "answered" if exc is None else type(exc).__name__


async def _call(transport: Any, spec: OperationSpec, request: Any) -> str:
    try:
        if spec.streaming:
            async for _ in transport.stream(spec.operation, request):
                break
        else:
            await transport.send(spec.operation, request)
    except (TaskNotFoundError, PushNotificationNotSupportedError) as exc:
        return _outcome_of(exc)
    return _outcome_of(None)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_a_real_server_routes_every_row_to_the_handler(serve: Any, binding: str) -> None:
    server: RunningServer = serve(example_agent("echo").asgi(store="memory://"))
    expected = {
        _O.SEND_MESSAGE: "answered",
        _O.SEND_STREAMING_MESSAGE: "answered",
        _O.GET_TASK: "TaskNotFoundError",
        _O.LIST_TASKS: "answered",
        _O.CANCEL_TASK: "TaskNotFoundError",
        _O.SUBSCRIBE_TO_TASK: "TaskNotFoundError",
        # push configs of a task that does not exist
        **{op: "TaskNotFoundError" for op in SAMPLES if "Push" in op.value},
        _O.GET_EXTENDED_AGENT_CARD: "UnsupportedOperationError",
    }
    seen: dict[Operation, str] = {}
    async with httpx.AsyncClient(timeout=STREAM_WAIT) as http:
        kind = JsonRpcTransport if binding == "JSONRPC" else RestTransport
        transport = kind(server.url + "/", http)
        for spec in OPERATIONS:
            request = msgspec.structs.replace(SAMPLES[spec.operation], tenant="")  # type: ignore[type-var]
            try:
                seen[spec.operation] = await _call(transport, spec, request)
            except Exception as exc:
                seen[spec.operation] = type(exc).__name__
    assert seen == expected


_EXTENSION_ROW = """
OPERATIONS = (
    *OPERATIONS,
    OperationSpec(_O.PING, m.GetTaskRequest, m.Task, "on_ping", (Route("POST", "/x-example/ping"),), "Task"),
)
"""

_EXTENSION_CALLER = """
import asyncio

import httpx

from skillwire import Agent, BaseRequestHandler, Operation
from skillwire.client import JsonRpcTransport, RestTransport
from skillwire.models import GetTaskRequest, Task, TaskState, TaskStatus


class Pings(BaseRequestHandler):
    async def on_ping(self, request, context):
        return Task(id=request.id, context_id=context.binding, status=TaskStatus(state=TaskState.COMPLETED))


async def main():
    app = Agent("x", "y", executor=lambda context, events: None).asgi(handler=Pings(), grpc_port=0)
    await app.startup()
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://agent") as http:
            for transport in (JsonRpcTransport, RestTransport):
                task = await transport("http://agent/", http).send(Operation.PING, GetTaskRequest(id="t1"))
                print(task.id, task.context_id, task.status.state.value)
        print("grpc", app.grpc_address is not None)
    finally:
        await app.shutdown()


asyncio.run(main())
"""


def test_an_extension_method_is_one_row_and_its_handler(tmp_path: Path) -> None:
    """The claim of the table, tested on a copy of the package: a new operation (here an extension method
    the gRPC service does not define) is an enum member, one row and an ``on_*`` method, and nothing else;
    JSON-RPC and HTTP+JSON serve it and the client calls it, gRPC still starts (without the rpc)."""
    package = Path(skillwire.__file__).parent
    shutil.copytree(package, tmp_path / "skillwire", ignore=shutil.ignore_patterns("__pycache__"))
    table = tmp_path / "skillwire" / "protocol" / "operations.py"
    source = table.read_text()
    source = source.replace(
        '    GET_EXTENDED_AGENT_CARD = "GetExtendedAgentCard"\n',
        '    GET_EXTENDED_AGENT_CARD = "GetExtendedAgentCard"\n    PING = "x-example/Ping"\n',
    )
    source = source.replace("OPERATIONS_BY_METHOD: dict", _EXTENSION_ROW + "\nOPERATIONS_BY_METHOD: dict")
    assert source.count("PING") == 2
    table.write_text(source)
    (tmp_path / "caller.py").write_text(_EXTENSION_CALLER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(tmp_path / "caller.py")], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "t1 JSONRPC TASK_STATE_COMPLETED",
        "t1 HTTP+JSON TASK_STATE_COMPLETED",
        "grpc True",
    ]
