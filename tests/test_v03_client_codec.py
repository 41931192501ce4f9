"""The client direction of the v0.3 codec (skillwire.wire.v03): v1.0 requests out, v0.3 results and cards in.

Round trips run against the server direction of the same codec (what ``encode_request`` writes,
``decode_request`` reads back to the same v1.0 request; what ``encode_result`` writes, ``decode_result``
reads back to the same v1.0 Struct), and every request the client writes is checked strictly against
a2a-sdk's v0.3 models (the pydantic JSON-RPC types and the v0.3 protobuf messages, as in
tests/test_v03_codec.py). Interop: results written by a2a-sdk's own v0.3 conversion code read back as the
v1.0 objects a2a-sdk started from, and v0.3 cards convert as a2a-sdk converts them.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import conversions, proto_utils
from a2a.compat.v0_3 import types as t03
from a2a.types import a2a_pb2 as pb10
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import assert_proto
from skillwire import A2AError, TaskState
from skillwire.errors import (
    ERRORS_BY_CODE,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from skillwire.protocol import models as m
from skillwire.types import Operation
from skillwire.wire import v03
from test_v03_codec import (
    AGENT_MSG,
    ARTIFACT_EVENT,
    BARE_PUSH,
    CARD,
    PUSH,
    REST_URL,
    RPC_URL,
    SEND_REQUEST,
    USER_MSG,
    V03_SCHEMES,
    assert_pb03,
    assert_v03_request,
    every_part,
    full_task,
    merged_card,
    messages,
    status_event,
)

Op = Operation
S = TaskState
to_builtins = msgspec.to_builtins
Json = dict[str, Any]


def params_bytes(params: Json) -> bytes:
    return msgspec.json.encode(params)


# -- JSON-RPC requests -------------------------------------------------------------------------------------

SEND_NO_CONFIG = m.SendMessageRequest(message=USER_MSG)
NON_BLOCKING = msgspec.structs.replace(
    SEND_REQUEST,
    configuration=m.SendMessageConfiguration(accepted_output_modes=["text/plain"], return_immediately=True),
)
PUSH_IN_SEND = msgspec.structs.replace(PUSH, task_id="")  # a send's push config names no task
SEND_WITH_PUSH = msgspec.structs.replace(
    SEND_REQUEST,
    configuration=msgspec.structs.replace(
        SEND_REQUEST.configuration, task_push_notification_config=PUSH_IN_SEND
    ),
)

# (operation, v1.0 request, v0.3 method, the v1.0 request decode_request gives back)
REQUESTS: list[tuple[Operation, msgspec.Struct, str, msgspec.Struct]] = [
    (Op.SEND_MESSAGE, SEND_WITH_PUSH, "message/send", SEND_WITH_PUSH),
    (Op.SEND_MESSAGE, NON_BLOCKING, "message/send", NON_BLOCKING),
    # No configuration is v1.0's default (blocking), which v0.3 says with blocking: true.
    (
        Op.SEND_MESSAGE,
        SEND_NO_CONFIG,
        "message/send",
        msgspec.structs.replace(SEND_NO_CONFIG, configuration=m.SendMessageConfiguration()),
    ),
    (Op.SEND_STREAMING_MESSAGE, SEND_WITH_PUSH, "message/stream", SEND_WITH_PUSH),
    (Op.GET_TASK, m.GetTaskRequest(id="t1", history_length=3), "tasks/get", None),
    (Op.GET_TASK, m.GetTaskRequest(id="t1"), "tasks/get", None),
    # v1.0 historyLength 0 ("no history") has no v0.3 form: it is left out (the transports trim the result).
    (Op.GET_TASK, m.GetTaskRequest(id="t1", history_length=0), "tasks/get", m.GetTaskRequest(id="t1")),
    (Op.CANCEL_TASK, m.CancelTaskRequest(id="t1", metadata={"why": "done"}), "tasks/cancel", None),
    (Op.SUBSCRIBE_TO_TASK, m.SubscribeToTaskRequest(id="t1"), "tasks/resubscribe", None),
    (Op.CREATE_PUSH_CONFIG, PUSH, "tasks/pushNotificationConfig/set", None),
    (
        Op.GET_PUSH_CONFIG,
        m.GetTaskPushNotificationConfigRequest(task_id="t1", id="p1"),
        "tasks/pushNotificationConfig/get",
        None,
    ),
    (
        Op.LIST_PUSH_CONFIGS,
        m.ListTaskPushNotificationConfigsRequest(task_id="t1"),
        "tasks/pushNotificationConfig/list",
        None,
    ),
    (
        Op.DELETE_PUSH_CONFIG,
        m.DeleteTaskPushNotificationConfigRequest(task_id="t1", id="p1"),
        "tasks/pushNotificationConfig/delete",
        None,
    ),
    (Op.GET_EXTENDED_AGENT_CARD, m.GetExtendedAgentCardRequest(), "agent/getAuthenticatedExtendedCard", None),
]


@pytest.mark.parametrize(
    ("operation", "request_", "method", "expected"),
    REQUESTS,
    ids=[f"{r[0].value}-{i}" for i, r in enumerate(REQUESTS)],
)
def test_encoded_requests_decode_back_to_the_same_v10_request(
    operation: Operation, request_: msgspec.Struct, method: str, expected: msgspec.Struct | None
) -> None:
    name, params = v03.encode_request(operation, request_)
    assert name == method
    if operation is Op.GET_EXTENDED_AGENT_CARD:
        assert params == {}  # v0.3 says this method has no params: the transport sends none
        assert_v03_request_without_params(name)
    else:
        assert_v03_request(name, params_bytes(params))
    decoded = v03.decode_request(name, params_bytes(params) if params else None)
    assert decoded == (operation, request_ if expected is None else expected)


def assert_v03_request_without_params(method: str) -> None:
    envelope = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method})
    parsed = t03.A2ARequest.model_validate_json(envelope, strict=True)
    assert parsed.model_dump(mode="json", by_alias=True, exclude_unset=True) == json.loads(envelope)


def test_blocking_is_always_sent() -> None:
    _, blocking = v03.encode_request(Op.SEND_MESSAGE, SEND_NO_CONFIG)
    assert blocking["configuration"] == {"blocking": True}
    _, non_blocking = v03.encode_request(Op.SEND_MESSAGE, NON_BLOCKING)
    assert non_blocking["configuration"] == {"acceptedOutputModes": ["text/plain"], "blocking": False}


def test_send_params_golden_vector() -> None:
    _, params = v03.encode_request(Op.SEND_MESSAGE, SEND_WITH_PUSH)
    assert params == {
        "message": {
            "kind": "message",
            "messageId": "m1",
            "contextId": "c1",
            "role": "user",
            "parts": [
                {"kind": "text", "text": "hi"},
                {"kind": "file", "file": {"name": "a.txt", "mimeType": "text/plain", "bytes": "aGk="}},
                {"kind": "file", "file": {"uri": "https://x.example/f"}},
                {"kind": "data", "data": {"a": 1}, "metadata": {"m": 2}},
            ],
            "metadata": {"mm": 1},
            "extensions": ["urn:e"],
            "referenceTaskIds": ["t0"],
        },
        "configuration": {
            "acceptedOutputModes": ["text/plain"],
            "historyLength": 3,
            "pushNotificationConfig": {
                "id": "p1",
                "url": "https://hook.example/",
                "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "secret"},
            },
            "blocking": True,
        },
        "metadata": {"rm": True},
    }


def test_what_v03_cannot_carry_is_left_out() -> None:
    _, params = v03.encode_request(
        Op.LIST_PUSH_CONFIGS, m.ListTaskPushNotificationConfigsRequest(tenant="x", task_id="t1", page_size=5)
    )
    assert params == {"id": "t1"}
    _, params = v03.encode_request(Op.GET_TASK, m.GetTaskRequest(tenant="x", id="t1"))
    assert params == {"id": "t1"}


def test_list_tasks_has_no_v03_form() -> None:
    with pytest.raises(UnsupportedOperationError, match="ListTasks"):
        v03.encode_request(Op.LIST_TASKS, m.ListTasksRequest())
    with pytest.raises(UnsupportedOperationError, match="ListTasks"):
        v03.encode_rest_request(Op.LIST_TASKS, m.ListTasksRequest())


@settings(max_examples=100, deadline=None)
@given(messages, st.booleans(), st.none() | st.integers(1, 50))
def test_every_representable_send_request_round_trips(
    message: m.Message, return_immediately: bool, history_length: int | None
) -> None:
    request = m.SendMessageRequest(
        message=message,
        configuration=m.SendMessageConfiguration(
            history_length=history_length, return_immediately=return_immediately
        ),
        metadata=message.metadata,
    )
    name, params = v03.encode_request(Op.SEND_MESSAGE, request)
    assert_v03_request(name, params_bytes(params))
    assert v03.decode_request(name, params_bytes(params)) == (Op.SEND_MESSAGE, request)


# -- JSON-RPC results --------------------------------------------------------------------------------------

TASK = full_task()
RESULTS: list[tuple[Operation, Any, Any]] = [
    (Op.SEND_MESSAGE, m.SendMessageResponse(task=TASK), m.SendMessageResponse(task=TASK)),
    (Op.SEND_MESSAGE, m.SendMessageResponse(message=AGENT_MSG), m.SendMessageResponse(message=AGENT_MSG)),
    (Op.GET_TASK, TASK, TASK),
    (Op.CANCEL_TASK, TASK, TASK),
    (Op.CREATE_PUSH_CONFIG, PUSH, PUSH),
    (Op.GET_PUSH_CONFIG, BARE_PUSH, BARE_PUSH),
    (
        Op.LIST_PUSH_CONFIGS,
        m.ListTaskPushNotificationConfigsResponse(configs=[PUSH, BARE_PUSH]),
        m.ListTaskPushNotificationConfigsResponse(configs=[PUSH, BARE_PUSH]),
    ),
    (
        Op.LIST_PUSH_CONFIGS,
        m.ListTaskPushNotificationConfigsResponse(),
        m.ListTaskPushNotificationConfigsResponse(),
    ),
    (Op.DELETE_PUSH_CONFIG, None, None),
]


@pytest.mark.parametrize(
    ("operation", "result", "expected"), RESULTS, ids=[f"{r[0].value}-{i}" for i, r in enumerate(RESULTS)]
)
def test_encoded_results_decode_back(operation: Operation, result: Any, expected: Any) -> None:
    assert v03.decode_result(operation, v03.encode_result(operation, result)) == expected


def test_extended_card_result_reads_as_the_v10_card() -> None:
    card = v03.decode_result(Op.GET_EXTENDED_AGENT_CARD, v03.encode_result(Op.GET_EXTENDED_AGENT_CARD, CARD))
    assert card == without_v10_only(CARD)


def test_push_config_without_id_is_the_task_default() -> None:
    body = b'{"taskId":"t1","pushNotificationConfig":{"url":"https://h.example/"}}'
    assert v03.decode_result(Op.GET_PUSH_CONFIG, body) == m.TaskPushNotificationConfig(
        id="t1", task_id="t1", url="https://h.example/"
    )


@pytest.mark.parametrize(
    ("operation", "body", "match"),
    [
        (
            Op.GET_TASK,
            b'{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"x"}]}',
            r"result\.kind",
        ),
        (
            Op.GET_TASK,
            b'{"kind":"task","id":"t","contextId":"c","status":{"state":"done"}}',
            r"result\.status\.state",
        ),
        (Op.SEND_MESSAGE, b'{"kind":"status-update"}', r"result\.kind"),
        (Op.GET_PUSH_CONFIG, b'{"taskId":"t"}', r"result\.pushNotificationConfig"),
        (Op.CANCEL_TASK, b"{", "not JSON"),
        (Op.GET_EXTENDED_AGENT_CARD, b'{"url":"https://a.example/"}', r"card\.name"),
        (Op.LIST_TASKS, b"{}", "ListTasks"),
    ],
)
def test_results_that_are_not_v03_raise_value_error(operation: Operation, body: bytes, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        v03.decode_result(operation, body)


def test_a2a_sdk_v03_results_read_back_as_the_v10_objects() -> None:
    """What a2a-sdk's v0.3 server code writes for a v1.0 object, the client reads back as that object."""

    def written(model: Any) -> bytes:
        return json.dumps(model.model_dump(mode="json", by_alias=True, exclude_none=True)).encode()

    def pb(struct: Any, cls: Any) -> Any:
        return json_format.ParseDict(to_builtins(struct), cls())

    assert v03.decode_result(Op.GET_TASK, written(conversions.to_compat_task(pb(TASK, pb10.Task)))) == TASK
    message = written(conversions.to_compat_message(pb(USER_MSG, pb10.Message)))
    assert v03.decode_result(Op.SEND_MESSAGE, message) == m.SendMessageResponse(message=USER_MSG)
    config = written(
        conversions.to_compat_task_push_notification_config(pb(PUSH, pb10.TaskPushNotificationConfig))
    )
    assert v03.decode_result(Op.CREATE_PUSH_CONFIG, config) == PUSH
    for event in (status_event(S.WORKING, metadata={"n": 1}), ARTIFACT_EVENT, m.StreamResponse(task=TASK)):
        compat = conversions.to_compat_stream_response(pb(event, pb10.StreamResponse), request_id=1)
        assert v03.decode_event(written(compat.result)) == event


# -- errors ------------------------------------------------------------------------------------------------


def error_object(error: A2AError) -> Json:
    """The v0.3 JSON-RPC error object the server side writes for ``error``."""
    return {"code": v03.error_code(error), "message": error.message, "data": v03.error_data(error)}


@pytest.mark.parametrize("cls", list(ERRORS_BY_CODE.values()), ids=lambda c: c.__name__)
def test_decode_error_inverts_the_server_side(cls: type[A2AError]) -> None:
    error = cls("went wrong", metadata={"taskId": "t1"}, field_violations=[("params.id", "required")])
    back = v03.decode_error(json.loads(json.dumps(error_object(error))))
    assert type(back) is cls  # v1.0-only errors too: -32600 with their reason picks their class
    assert (back.message, back.metadata, back.field_violations) == (
        "went wrong",
        {"taskId": "t1"},
        [("params.id", "required")],
    )


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        # a2a-sdk 0.3 servers: the v0.3 code, a message, no data (or data of their own)
        ({"code": -32001, "message": "Task not found"}, TaskNotFoundError),
        ({"code": -32002, "message": "no", "data": "free text"}, TaskNotCancelableError),
        ({"code": -32600, "message": "bad"}, InvalidRequestError),
        # a reason that does not travel under the code is not believed
        ({"code": -32001, "message": "x", "data": {"reason": "VERSION_NOT_SUPPORTED"}}, TaskNotFoundError),
        (
            {"code": -32600, "message": "x", "data": {"reason": "VERSION_NOT_SUPPORTED"}},
            VersionNotSupportedError,
        ),
        ({"code": -31999, "message": "custom"}, A2AError),
        ({"code": -31999, "message": "custom", "data": {"reason": "TASK_NOT_FOUND"}}, TaskNotFoundError),
        ("not an object", InternalError),
        ({"code": True, "message": "bool is no code"}, A2AError),
    ],
)
def test_decode_error_of_other_servers(error: Any, expected: type[A2AError]) -> None:
    assert type(v03.decode_error(error)) is expected


@pytest.mark.parametrize(
    ("operation", "status", "expected"),
    [
        (Op.GET_TASK, 404, TaskNotFoundError),
        (Op.GET_EXTENDED_AGENT_CARD, 404, ExtendedAgentCardNotConfiguredError),
        (Op.CANCEL_TASK, 409, TaskNotCancelableError),
        (Op.SEND_MESSAGE, 415, ContentTypeNotSupportedError),
        (Op.SEND_MESSAGE, 422, InvalidParamsError),
        (Op.SEND_MESSAGE, 400, InvalidRequestError),
        (Op.SEND_MESSAGE, 500, InternalError),
        (Op.SEND_STREAMING_MESSAGE, 501, UnsupportedOperationError),
        (Op.CREATE_PUSH_CONFIG, 501, PushNotificationNotSupportedError),
    ],
)
def test_rest_errors_of_the_v03_sdk_map_by_status(
    operation: Operation, status: int, expected: type[A2AError]
) -> None:
    error = v03.rest_error(operation, status, {"message": "said the server"})
    assert type(error) is expected
    assert error is not None and error.message == "said the server"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (404, {"detail": "Not Found"}),
        (404, None),
        (404, {"error": {"message": "x"}}),
        (418, {"message": "teapot"}),
    ],
)
def test_rest_error_is_none_for_other_bodies(status: int, body: Any) -> None:
    assert v03.rest_error(Op.GET_TASK, status, body) is None


# -- REST requests and results -----------------------------------------------------------------------------

REST_SEND_REQUEST = msgspec.structs.replace(  # the v0.3 proto Message has no referenceTaskIds
    SEND_WITH_PUSH, message=msgspec.structs.replace(SEND_WITH_PUSH.message, reference_task_ids=[])
)
REST_REQUESTS: list[tuple[Operation, msgspec.Struct, tuple[str, str], msgspec.Struct | None]] = [
    (Op.SEND_MESSAGE, REST_SEND_REQUEST, ("POST", "/v1/message:send"), None),
    (
        Op.SEND_MESSAGE,
        NON_BLOCKING,
        ("POST", "/v1/message:send"),
        msgspec.structs.replace(
            NON_BLOCKING, message=msgspec.structs.replace(NON_BLOCKING.message, reference_task_ids=[])
        ),
    ),
    (Op.SEND_STREAMING_MESSAGE, REST_SEND_REQUEST, ("POST", "/v1/message:stream"), None),
    (Op.GET_TASK, m.GetTaskRequest(id="t1", history_length=2), ("GET", "/v1/tasks/t1"), None),
    (Op.GET_TASK, m.GetTaskRequest(id="t1"), ("GET", "/v1/tasks/t1"), None),
    (Op.CANCEL_TASK, m.CancelTaskRequest(id="t1"), ("POST", "/v1/tasks/t1:cancel"), None),
    (Op.SUBSCRIBE_TO_TASK, m.SubscribeToTaskRequest(id="t1"), ("GET", "/v1/tasks/t1:subscribe"), None),
    (Op.CREATE_PUSH_CONFIG, PUSH, ("POST", "/v1/tasks/t1/pushNotificationConfigs"), None),
    # without an id, the config is the task's default one (the v0.3 SDK convention)
    (
        Op.CREATE_PUSH_CONFIG,
        m.TaskPushNotificationConfig(task_id="t1", url="https://h.example/"),
        ("POST", "/v1/tasks/t1/pushNotificationConfigs"),
        m.TaskPushNotificationConfig(id="t1", task_id="t1", url="https://h.example/"),
    ),
    (
        Op.GET_PUSH_CONFIG,
        m.GetTaskPushNotificationConfigRequest(task_id="t1", id="p1"),
        ("GET", "/v1/tasks/t1/pushNotificationConfigs/p1"),
        None,
    ),
    (
        Op.LIST_PUSH_CONFIGS,
        m.ListTaskPushNotificationConfigsRequest(task_id="t1", page_size=5, page_token="x"),
        ("GET", "/v1/tasks/t1/pushNotificationConfigs"),
        None,
    ),
    (
        Op.DELETE_PUSH_CONFIG,
        m.DeleteTaskPushNotificationConfigRequest(task_id="t1", id="p1"),
        ("DELETE", "/v1/tasks/t1/pushNotificationConfigs/p1"),
        None,
    ),
    (Op.GET_EXTENDED_AGENT_CARD, m.GetExtendedAgentCardRequest(), ("GET", "/v1/card"), None),
]
REST_BODY_TYPES = {
    Op.SEND_MESSAGE: pb03.SendMessageRequest,
    Op.SEND_STREAMING_MESSAGE: pb03.SendMessageRequest,
    Op.CANCEL_TASK: pb03.CancelTaskRequest,
    Op.CREATE_PUSH_CONFIG: pb03.CreateTaskPushNotificationConfigRequest,
}


@pytest.mark.parametrize(
    ("operation", "request_", "route", "expected"),
    REST_REQUESTS,
    ids=[f"{r[0].value}-{i}" for i, r in enumerate(REST_REQUESTS)],
)
def test_rest_requests_match_back_to_the_same_v10_request(
    operation: Operation, request_: msgspec.Struct, route: tuple[str, str], expected: msgspec.Struct | None
) -> None:
    verb, path, body, query = v03.encode_rest_request(operation, request_)
    assert (verb, path) == route
    if operation in REST_BODY_TYPES:
        assert body is not None
        assert_pb03_with_blocking(REST_BODY_TYPES[operation], body)
    else:
        assert body is None
    matched = v03.match_rest(verb, path, {k: [v] for k, v in query.items()}, body or b"")
    assert matched == (operation, request_ if expected is None else expected)


def assert_pb03_with_blocking(cls: Any, body: bytes) -> None:
    """``body`` is strict ProtoJSON of ``cls``; ``blocking: false``, the proto3 default, is sent anyway."""
    sent = json.loads(body)
    if sent.get("configuration", {}).get("blocking") is False:
        del sent["configuration"]["blocking"]
    assert_pb03(cls, json.dumps(sent).encode())
    json_format.Parse(body, cls())  # and as sent: no unknown member


def test_rest_send_body_always_says_blocking() -> None:
    _, _, body, _ = v03.encode_rest_request(Op.SEND_MESSAGE, SEND_NO_CONFIG)
    assert body is not None and json.loads(body)["configuration"] == {"blocking": True}
    _, _, body, _ = v03.encode_rest_request(Op.SEND_MESSAGE, NON_BLOCKING)
    assert body is not None
    assert json.loads(body)["configuration"] == {"acceptedOutputModes": ["text/plain"], "blocking": False}


def test_rest_path_segments_are_escaped() -> None:
    _, path, _, _ = v03.encode_rest_request(Op.GET_TASK, m.GetTaskRequest(id="a/b c"))
    assert path == "/v1/tasks/a%2Fb%20c"


REST_TASK = full_task(  # ProtoJSON v0.3: no referenceTaskIds
    history=[msgspec.structs.replace(USER_MSG, reference_task_ids=[]), AGENT_MSG]
)
REST_RESULTS: list[tuple[Operation, Any]] = [
    (Op.SEND_MESSAGE, m.SendMessageResponse(task=REST_TASK)),
    (Op.SEND_MESSAGE, m.SendMessageResponse(message=AGENT_MSG)),
    (Op.GET_TASK, REST_TASK),
    (Op.CANCEL_TASK, msgspec.structs.replace(REST_TASK, status=m.TaskStatus(state=S.CANCELED))),
    (Op.CREATE_PUSH_CONFIG, PUSH),
    (Op.GET_PUSH_CONFIG, BARE_PUSH),
    (Op.LIST_PUSH_CONFIGS, m.ListTaskPushNotificationConfigsResponse(configs=[PUSH, BARE_PUSH])),
    (Op.DELETE_PUSH_CONFIG, None),
]


@pytest.mark.parametrize(
    ("operation", "result"), REST_RESULTS, ids=[f"{r[0].value}-{i}" for i, r in enumerate(REST_RESULTS)]
)
def test_rest_results_decode_back(operation: Operation, result: Any) -> None:
    assert v03.decode_rest_result(operation, v03.encode_rest_result(operation, result)) == result


def test_rest_card_result_reads_as_the_v10_card() -> None:
    body = v03.encode_rest_result(Op.GET_EXTENDED_AGENT_CARD, CARD)
    assert v03.decode_rest_result(Op.GET_EXTENDED_AGENT_CARD, body) == without_v10_only(CARD)


@pytest.mark.parametrize(
    "event",
    [
        status_event(S.WORKING, metadata={"n": 1}),
        status_event(S.CANCELED),
        ARTIFACT_EVENT,
        m.StreamResponse(task=REST_TASK),
        m.StreamResponse(message=AGENT_MSG),
    ],
)
def test_rest_stream_events_decode_back(event: m.StreamResponse) -> None:
    data = v03.encode_rest_stream_event(event, final=v03.is_final(event))
    assert v03.decode_rest_event(data) == event


def test_a2a_sdk_rest_results_read_back_as_the_v10_objects() -> None:
    """ProtoJSON written by a2a-sdk's v0.3 REST server code (MessageToJson of its v0.3 protos)."""
    task = full_task(
        parts=[p for p in every_part() if not isinstance(p.raw, bytes)],  # a2a-sdk encodes bytes twice
        history=[msgspec.structs.replace(USER_MSG, reference_task_ids=[]), AGENT_MSG],
    )
    compat_task = conversions.to_compat_task(json_format.ParseDict(to_builtins(task), pb10.Task()))
    body = json_format.MessageToJson(proto_utils.ToProto.task(compat_task)).encode()
    assert v03.decode_rest_result(Op.GET_TASK, body) == task
    wrapped = json_format.MessageToJson(proto_utils.ToProto.task_or_message(compat_task)).encode()
    assert v03.decode_rest_result(Op.SEND_MESSAGE, wrapped) == m.SendMessageResponse(task=task)
    event = json_format.MessageToJson(proto_utils.ToProto.stream_response(compat_task)).encode()
    assert v03.decode_rest_event(event) == m.StreamResponse(task=task)
    compat_push = conversions.to_compat_task_push_notification_config(
        json_format.ParseDict(to_builtins(PUSH), pb10.TaskPushNotificationConfig())
    )
    body = json_format.MessageToJson(proto_utils.ToProto.task_push_notification_config(compat_push)).encode()
    assert v03.decode_rest_result(Op.GET_PUSH_CONFIG, body) == PUSH


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"{}", "exactly one member"),
        (b'{"task":{"id":"t"},"message":{"messageId":"m","content":[{"text":"x"}]}}', "exactly one member"),
        (b'{"task":{"id":"t","status":{"state":"TASK_STATE_DONE"}}}', "unknown task state"),
        (b'{"artifactUpdate":{"taskId":"t"}}', "artifact"),
        (b"{", "not JSON"),
    ],
)
def test_bad_rest_events_raise_value_error(data: bytes, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        v03.decode_rest_event(data)


def test_bad_rest_results_raise_value_error() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        v03.decode_rest_result(Op.SEND_MESSAGE, b"{}")
    with pytest.raises(ValueError, match="pushNotificationConfig"):
        v03.decode_rest_result(Op.GET_PUSH_CONFIG, b'{"name":"tasks/t/pushNotificationConfigs/p"}')
    with pytest.raises(ValueError, match="ListTasks"):
        v03.decode_rest_result(Op.LIST_TASKS, b"{}")


# -- agent cards -------------------------------------------------------------------------------------------


def without_v10_only(card: m.AgentCard) -> m.AgentCard:
    """``card`` as it comes back through its v0.3 form: the 0.3 interfaces only, no pkceRequired."""
    schemes = json.loads(json.dumps(card.security_schemes))
    schemes["oauth"]["oauth2SecurityScheme"]["flows"]["authorizationCode"].pop("pkceRequired")
    return msgspec.structs.replace(
        card,
        supported_interfaces=[i for i in card.supported_interfaces if i.protocol_version == "0.3"],
        security_schemes=schemes,
    )


SDK_STYLE_CARD: Json = {  # a v0.3 card as a2a-sdk 0.3 serves it (model_dump, exclude_none)
    "protocolVersion": "0.3.0",
    "name": "Currency",
    "description": "Converts currencies",
    "url": "https://agent.example/a2a",
    "preferredTransport": "JSONRPC",
    "additionalInterfaces": [
        {"url": "https://agent.example/a2a", "transport": "JSONRPC"},
        {"url": "https://agent.example/rest", "transport": "HTTP+JSON"},
        {"url": "agent.example:50051", "transport": "GRPC"},
    ],
    "version": "2.0.0",
    "provider": {"organization": "Org", "url": "https://org.example"},
    "capabilities": {"streaming": True, "pushNotifications": True, "stateTransitionHistory": False},
    "securitySchemes": {
        "key": {"type": "apiKey", "in": "header", "name": "X-Key"},
        "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "a JWT"},
        "oauth": {
            "type": "oauth2",
            "flows": {
                "clientCredentials": {
                    "tokenUrl": "https://id.example/token",
                    "scopes": {"convert": "Convert"},
                },
                "password": {"tokenUrl": "https://id.example/token", "scopes": {}},
            },
        },
        "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://id.example/.well-known/openid"},
        "tls": {"type": "mutualTLS"},
        "future": {"type": "quantumKey", "strength": 11},
    },
    "security": [{"bearer": []}, {"oauth": ["convert"]}],
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain", "application/json"],
    "skills": [
        {
            "id": "convert",
            "name": "Convert",
            "description": "Converts an amount",
            "tags": ["fx"],
            "examples": ["10 USD in EUR"],
            "inputModes": ["text/plain"],
            "security": [{"key": []}],
        }
    ],
    "supportsAuthenticatedExtendedCard": True,
    "signatures": [{"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "c2ln"}],
}
SDK_STYLE_V10 = m.AgentCard(
    name="Currency",
    description="Converts currencies",
    supported_interfaces=[
        m.AgentInterface(url="https://agent.example/a2a", protocol_binding="JSONRPC", protocol_version="0.3"),
        m.AgentInterface(
            url="https://agent.example/rest", protocol_binding="HTTP+JSON", protocol_version="0.3"
        ),
        m.AgentInterface(url="agent.example:50051", protocol_binding="GRPC", protocol_version="0.3"),
    ],
    provider=m.AgentProvider(url="https://org.example", organization="Org"),
    version="2.0.0",
    capabilities=m.AgentCapabilities(streaming=True, push_notifications=True, extended_agent_card=True),
    security_schemes={
        "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}},
        "bearer": {
            "httpAuthSecurityScheme": {"description": "a JWT", "scheme": "bearer", "bearerFormat": "JWT"}
        },
        # v1.0 OAuthFlows is a oneof: the first flow is kept
        "oauth": {
            "oauth2SecurityScheme": {
                "flows": {
                    "clientCredentials": {
                        "tokenUrl": "https://id.example/token",
                        "scopes": {"convert": "Convert"},
                    }
                }
            }
        },
        "oidc": {
            "openIdConnectSecurityScheme": {"openIdConnectUrl": "https://id.example/.well-known/openid"}
        },
        "tls": {"mtlsSecurityScheme": {}},
    },
    security_requirements=[
        m.SecurityRequirement(schemes={"bearer": m.StringList()}),
        m.SecurityRequirement(schemes={"oauth": m.StringList(list=["convert"])}),
    ],
    default_input_modes=["text/plain"],
    default_output_modes=["text/plain", "application/json"],
    skills=[
        m.AgentSkill(
            id="convert",
            name="Convert",
            description="Converts an amount",
            tags=["fx"],
            examples=["10 USD in EUR"],
            input_modes=["text/plain"],
            security_requirements=[m.SecurityRequirement(schemes={"key": m.StringList()})],
        )
    ],
    signatures=[m.AgentCardSignature(protected="eyJhbGciOiJFUzI1NiJ9", signature="c2ln")],
)


def test_v03_card_golden_vector() -> None:
    assert v03.is_v03_card(SDK_STYLE_CARD)
    card = v03.card_from_v03(SDK_STYLE_CARD)
    assert card == SDK_STYLE_V10
    assert_proto(to_builtins(card), "AgentCard")  # strict v1.0 ProtoJSON


def test_v03_card_converts_as_a2a_sdk_converts_it() -> None:
    """a2a-sdk 1.x's own v0.3 -> v1.0 card conversion agrees, bar the interfaces it repeats and the oneof
    flows it overwrites (its last flow wins, ours is the first) and unknown scheme types."""
    card = {**SDK_STYLE_CARD, "securitySchemes": dict(SDK_STYLE_CARD["securitySchemes"])}
    del card["securitySchemes"]["future"]
    card["securitySchemes"]["oauth"] = {
        "type": "oauth2",
        "flows": {
            "clientCredentials": {"tokenUrl": "https://id.example/token", "scopes": {"convert": "Convert"}}
        },
    }
    theirs = json_format.MessageToDict(conversions.to_core_agent_card(t03.AgentCard.model_validate(card)))
    ours = json_format.MessageToDict(
        json_format.ParseDict(to_builtins(v03.card_from_v03(card)), pb10.AgentCard())
    )
    assert {k: v for k, v in ours.items() if k != "supportedInterfaces"} == {
        k: v for k, v in theirs.items() if k != "supportedInterfaces"
    }
    pairs = [(i["url"], i["protocolBinding"]) for i in theirs["supportedInterfaces"]]
    assert [(i["url"], i["protocolBinding"]) for i in ours["supportedInterfaces"]] == list(
        dict.fromkeys(pairs)
    )


def test_our_v03_card_reads_back_as_the_v10_card() -> None:
    assert v03.card_from_v03(v03.v03_card(CARD)) == without_v10_only(CARD)


def test_a_card_for_both_versions_reads_as_its_v10_self() -> None:
    merged = json.loads(json.dumps(merged_card()))
    assert v03.is_v03_card(merged)  # it says protocolVersion 0.3.0 ...
    card = v03.card_from_v03(merged)  # ... and carries its v1.0 self, which wins
    assert card == CARD  # its 0.3 endpoints are listed already; the schemes keep their v1.0 form only
    assert_proto(to_builtins(card), "AgentCard")


def test_a_card_for_both_versions_gets_its_v03_endpoints() -> None:
    v10_only = msgspec.structs.replace(
        CARD, supported_interfaces=[i for i in CARD.supported_interfaces if i.protocol_version == "1.0"]
    )
    merged = to_builtins(v10_only) | v03.v03_card_fields(
        v10_only, jsonrpc_url=RPC_URL, interfaces=[(REST_URL, "HTTP+JSON")]
    )
    assert v03.card_from_v03(merged).supported_interfaces == CARD.supported_interfaces


def test_a_v10_card_is_not_a_v03_card() -> None:
    v10 = to_builtins(CARD)
    assert not v03.is_v03_card(v10)
    assert v03.card_from_v03(v10) == CARD  # and reads as itself anyway


def test_a_minimal_v03_card_reads() -> None:
    card = v03.card_from_v03({"name": "n", "url": "http://a.example/", "protocolVersion": "0.3.1"})
    assert card.supported_interfaces == [
        m.AgentInterface(url="http://a.example/", protocol_binding="JSONRPC", protocol_version="0.3")
    ]
    assert (card.skills, card.default_input_modes, card.capabilities) == ([], [], m.AgentCapabilities())


def test_interfaces_keep_the_cards_minor_version_and_lower_case_bindings_are_read() -> None:
    card = v03.card_from_v03(
        {
            "name": "n",
            "url": "http://a.example/",
            "protocolVersion": "0.2.5",
            "preferredTransport": "jsonrpc",
            "additionalInterfaces": [{"url": "http://a.example/", "transport": "JSONRPC"}],
        }
    )
    assert card.supported_interfaces == [
        m.AgentInterface(url="http://a.example/", protocol_binding="JSONRPC", protocol_version="0.2")
    ]


@pytest.mark.parametrize(
    ("card", "match"),
    [
        ({"url": "http://a.example/"}, r"card\.name"),
        ({"name": "n"}, r"card\.url"),
        ({"name": "n", "url": "u", "skills": [{"name": "s"}]}, r"card\.skills\[0\]\.id"),
        ({"name": "n", "url": "u", "supportedInterfaces": []}, r"card\.description"),
    ],
)
def test_cards_that_do_not_read_name_the_field(card: Json, match: str) -> None:
    with pytest.raises(msgspec.ValidationError, match=match):
        v03.card_from_v03(card)


def test_v03_schemes_of_our_own_card_convert_back() -> None:
    schemes = v03.card_from_v03({"name": "n", "url": "u", "securitySchemes": V03_SCHEMES}).security_schemes
    expected = without_v10_only(CARD).security_schemes
    assert schemes == expected
