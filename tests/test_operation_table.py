"""The operation table drives every HTTP binding, both directions: a row's request, encoded by the client
codec of a binding, is decoded by the server side into the same operation and the same request Struct, and
a real server routes every row to the request handler (issue 10: one place for each operation)."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec
import pytest

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
        # the capability gate (the echo agent sends no push notifications) answers before the handler
        **{op: "PushNotificationNotSupportedError" for op in SAMPLES if "Push" in op.value},
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
