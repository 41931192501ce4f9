"""The A2A v0.3 <-> v1.0 codec (skillwire.wire.v03): golden vectors, strict checks, round trips, interop.

Strictness. Every v0.3 JSON-RPC value the codec emits is wrapped in its JSON-RPC success response and
validated by a2a-sdk's v0.3 pydantic models (``a2a.compat.v0_3.types``, generated from the v0.3 JSON schema)
in strict mode; re-dumping the model (``exclude_unset``) must give back exactly what was emitted, which
rejects unknown members and any value the model would coerce or drop. Every v0.3 REST body is parsed by
protobuf's ``json_format.Parse`` into the v0.3 gRPC messages (``a2a_v0_3_pb2``) without
``ignore_unknown_fields``, and ``MessageToDict`` of the result must equal the body (ProtoJSON defaults
omitted, names camelCase). The v0.3 request inputs used as golden vectors are themselves validated the same
way, so they are real v0.3.

Interop. a2a-sdk's own v0.3 client code paths (``conversions`` and ``proto_utils``) read what the codec
writes, and write what it reads: a v1.0 task that goes out through the codec and back in through a2a-sdk
is the same task.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import a2a_v0_3_pb2 as pb03
from a2a.compat.v0_3 import conversions, proto_utils
from a2a.compat.v0_3 import types as t03
from a2a.types import a2a_pb2 as pb10
from google.protobuf import empty_pb2, json_format
from google.protobuf.message import Message as PbMessage
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from skillwire import A2AError, Message, Task, TaskState
from skillwire.errors import (
    ERRORS_BY_CODE,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequiredError,
    InvalidParamsError,
    JSONParseError,
    MethodNotFoundError,
    TaskGenerationMismatchError,
    TaskNotFoundError,
    VersionNotSupportedError,
)
from skillwire.protocol import models as m
from skillwire.protocol.models import (
    AgentCardSignature,
    AgentInterface,
    AuthenticationInfo,
    SecurityRequirement,
    SendMessageRequest,
    SendMessageResponse,
    StringList,
    TaskPushNotificationConfig,
)
from skillwire.protocol.states import INTERRUPTED_STATES, TERMINAL_STATES
from skillwire.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentProvider,
    AgentSkill,
    Artifact,
    Operation,
    Part,
    Role,
    SendMessageConfiguration,
    StreamResponse,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from skillwire.wire import v03

Op = Operation
S = TaskState
T0 = datetime(2026, 11, 29, 12, 30, 5, 123000, tzinfo=UTC)
to_builtins = msgspec.to_builtins


# -- strict checks -----------------------------------------------------------------------------------------


def assert_v03(model: type[BaseModel], result: bytes) -> BaseModel:
    """``result`` is exactly a valid v0.3 JSON-RPC ``result`` for ``model`` (a *SuccessResponse class)."""
    envelope = b'{"jsonrpc":"2.0","id":1,"result":' + result + b"}"
    parsed = model.model_validate_json(envelope, strict=True)
    assert parsed.model_dump(mode="json", by_alias=True, exclude_unset=True) == json.loads(envelope)
    return parsed


def assert_v03_request(method: str, params: bytes) -> None:
    """``params`` are exactly valid v0.3 params for ``method`` (checked as a whole JSON-RPC request)."""
    envelope = b'{"jsonrpc":"2.0","id":1,"method":"' + method.encode() + b'","params":' + params + b"}"
    parsed = t03.A2ARequest.model_validate_json(envelope, strict=True)
    assert parsed.model_dump(mode="json", by_alias=True, exclude_unset=True) == json.loads(envelope)


def _norm(value: Any) -> Any:
    """Timestamps as datetimes (ProtoJSON may print 3, 6 or 9 fractional digits)."""
    if isinstance(value, dict):
        return {
            k: datetime.fromisoformat(v) if k == "timestamp" and isinstance(v, str) else _norm(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_norm(v) for v in value]
    return value


def assert_pb03(cls: type[PbMessage], body: bytes) -> PbMessage:
    """``body`` is exactly the ProtoJSON of a v0.3 gRPC message ``cls``: no unknown field, no default."""
    msg = json_format.Parse(body, cls())
    assert _norm(json_format.MessageToDict(msg)) == _norm(json.loads(body))
    return msg


# -- fixtures ----------------------------------------------------------------------------------------------

USER_MSG = Message(
    message_id="m1",
    context_id="c1",
    task_id="t1",
    role=Role.USER,
    parts=[Part(text="hi", metadata={"lang": "en"})],
    metadata={"k": "v"},
    extensions=["urn:ext"],
    reference_task_ids=["t0"],
)
AGENT_MSG = Message(
    message_id="m2", context_id="c1", task_id="t1", role=Role.AGENT, parts=[Part(text="need more")]
)


def every_part() -> list[Part]:
    return [
        Part(text="t", metadata={"x": 1}),
        Part(raw=b"\x00\x01\xff", filename="b.bin", media_type="application/octet-stream"),
        Part(url="https://x.example/y.png", filename="y.png", media_type="image/png"),
        Part(data={"k": [1, None]}),
        Part(data=[1, 2]),
        Part(data="s", metadata={"m": 1}),
    ]


def full_task(parts: list[Part] | None = None, history: list[Message] | None = None) -> Task:
    return Task(
        id="t1",
        context_id="c1",
        status=TaskStatus(state=S.INPUT_REQUIRED, message=AGENT_MSG, timestamp=T0),
        artifacts=[
            Artifact(
                artifact_id="a1",
                name="out",
                description="d",
                parts=every_part() if parts is None else parts,
                metadata={"am": True},
                extensions=["urn:e"],
            )
        ],
        history=[USER_MSG, AGENT_MSG] if history is None else history,
        metadata={"tm": {"nested": 1}},
    )


USER_MSG_V03 = (
    b'{"kind":"message","messageId":"m1","contextId":"c1","taskId":"t1","role":"user",'
    b'"parts":[{"kind":"text","text":"hi","metadata":{"lang":"en"}}],"metadata":{"k":"v"},'
    b'"extensions":["urn:ext"],"referenceTaskIds":["t0"]}'
)
AGENT_MSG_V03 = (
    b'{"kind":"message","messageId":"m2","contextId":"c1","taskId":"t1","role":"agent",'
    b'"parts":[{"kind":"text","text":"need more"}]}'
)
EVERY_PART_V03 = (
    b'[{"kind":"text","text":"t","metadata":{"x":1}},'
    b'{"kind":"file","file":{"name":"b.bin","mimeType":"application/octet-stream","bytes":"AAH/"}},'
    b'{"kind":"file","file":{"name":"y.png","mimeType":"image/png","uri":"https://x.example/y.png"}},'
    b'{"kind":"data","data":{"k":[1,null]}},'
    b'{"kind":"data","data":{"value":[1,2]},"metadata":{"data_part_compat":true}},'
    b'{"kind":"data","data":{"value":"s"},"metadata":{"m":1,"data_part_compat":true}}]'
)
FULL_TASK_V03 = (
    b'{"kind":"task","id":"t1","contextId":"c1","status":{"state":"input-required","message":'
    + AGENT_MSG_V03
    + b',"timestamp":"2026-11-29T12:30:05.123000Z"},"artifacts":[{"artifactId":"a1","name":"out",'
    b'"description":"d","parts":'
    + EVERY_PART_V03
    + b',"metadata":{"am":true},"extensions":["urn:e"]}],"history":['
    + USER_MSG_V03
    + b","
    + AGENT_MSG_V03
    + b'],"metadata":{"tm":{"nested":1}}}'
)


# -- JSON-RPC requests -------------------------------------------------------------------------------------

V03_METHODS = {
    "message/send": Op.SEND_MESSAGE,
    "message/stream": Op.SEND_STREAMING_MESSAGE,
    "tasks/get": Op.GET_TASK,
    "tasks/cancel": Op.CANCEL_TASK,
    "tasks/resubscribe": Op.SUBSCRIBE_TO_TASK,
    "tasks/pushNotificationConfig/set": Op.CREATE_PUSH_CONFIG,
    "tasks/pushNotificationConfig/get": Op.GET_PUSH_CONFIG,
    "tasks/pushNotificationConfig/list": Op.LIST_PUSH_CONFIGS,
    "tasks/pushNotificationConfig/delete": Op.DELETE_PUSH_CONFIG,
    "agent/getAuthenticatedExtendedCard": Op.GET_EXTENDED_AGENT_CARD,
}


def test_every_v03_method_maps_to_its_v10_operation() -> None:
    assert dict(v03.METHODS) == V03_METHODS


SEND_PARAMS = (
    b'{"message":{"kind":"message","messageId":"m1","role":"user","contextId":"c1",'
    b'"parts":[{"kind":"text","text":"hi"},'
    b'{"kind":"file","file":{"bytes":"aGk=","mimeType":"text/plain","name":"a.txt"}},'
    b'{"kind":"file","file":{"uri":"https://x.example/f"}},'
    b'{"kind":"data","data":{"a":1},"metadata":{"m":2}}],'
    b'"referenceTaskIds":["t0"],"extensions":["urn:e"],"metadata":{"mm":1}},'
    b'"configuration":{"acceptedOutputModes":["text/plain"],"historyLength":3,"blocking":true,'
    b'"pushNotificationConfig":{"id":"p1","url":"https://hook.example/","token":"tok",'
    b'"authentication":{"schemes":["Bearer","Basic"],"credentials":"secret"}}},'
    b'"metadata":{"rm":true}}'
)
SEND_REQUEST = SendMessageRequest(
    message=Message(
        message_id="m1",
        context_id="c1",
        role=Role.USER,
        parts=[
            Part(text="hi"),
            Part(raw=b"hi", filename="a.txt", media_type="text/plain"),
            Part(url="https://x.example/f"),
            Part(data={"a": 1}, metadata={"m": 2}),
        ],
        metadata={"mm": 1},
        extensions=["urn:e"],
        reference_task_ids=["t0"],
    ),
    configuration=SendMessageConfiguration(
        accepted_output_modes=["text/plain"],
        task_push_notification_config=TaskPushNotificationConfig(
            id="p1",
            url="https://hook.example/",
            token="tok",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="secret"),
        ),
        history_length=3,
        return_immediately=False,
    ),
    metadata={"rm": True},
)
MINIMAL_SEND = (
    b'{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"q"}]}}'
)
MINIMAL_MESSAGE = Message(message_id="m1", role=Role.USER, parts=[Part(text="q")])
#: What a v0.3 send without `configuration.blocking` decodes to: blocking, as the v0.3 SDKs read it.
ABSENT_BLOCKING = SendMessageConfiguration(return_immediately=False)

DECODE_VECTORS: list[tuple[str, bytes, Operation, msgspec.Struct]] = [
    ("message/send", SEND_PARAMS, Op.SEND_MESSAGE, SEND_REQUEST),
    ("message/stream", SEND_PARAMS, Op.SEND_STREAMING_MESSAGE, SEND_REQUEST),
    (
        "message/send",
        MINIMAL_SEND,
        Op.SEND_MESSAGE,
        SendMessageRequest(message=MINIMAL_MESSAGE, configuration=ABSENT_BLOCKING),
    ),
    (
        "tasks/get",
        b'{"id":"t1","historyLength":2,"metadata":{"ignored":1}}',
        Op.GET_TASK,
        m.GetTaskRequest(id="t1", history_length=2),
    ),
    ("tasks/get", b'{"id":"t1"}', Op.GET_TASK, m.GetTaskRequest(id="t1")),
    (
        "tasks/cancel",
        b'{"id":"t1","metadata":{"why":"done"}}',
        Op.CANCEL_TASK,
        m.CancelTaskRequest(id="t1", metadata={"why": "done"}),
    ),
    ("tasks/resubscribe", b'{"id":"t1"}', Op.SUBSCRIBE_TO_TASK, m.SubscribeToTaskRequest(id="t1")),
    (
        "tasks/pushNotificationConfig/set",
        b'{"taskId":"t1","pushNotificationConfig":{"id":"p1","url":"https://hook.example/","token":"tok",'
        b'"authentication":{"schemes":["Basic"],"credentials":"u:p"}}}',
        Op.CREATE_PUSH_CONFIG,
        TaskPushNotificationConfig(
            id="p1",
            task_id="t1",
            url="https://hook.example/",
            token="tok",
            authentication=AuthenticationInfo(scheme="Basic", credentials="u:p"),
        ),
    ),
    (
        "tasks/pushNotificationConfig/set",
        b'{"taskId":"t1","pushNotificationConfig":{"url":"https://hook.example/","authentication":{"schemes":[]}}}',
        Op.CREATE_PUSH_CONFIG,
        TaskPushNotificationConfig(id="t1", task_id="t1", url="https://hook.example/"),
    ),
    (
        "tasks/pushNotificationConfig/get",
        b'{"id":"t1","pushNotificationConfigId":"p1"}',
        Op.GET_PUSH_CONFIG,
        m.GetTaskPushNotificationConfigRequest(task_id="t1", id="p1"),
    ),
    (
        "tasks/pushNotificationConfig/get",
        b'{"id":"t1"}',
        Op.GET_PUSH_CONFIG,
        m.GetTaskPushNotificationConfigRequest(task_id="t1", id="t1"),
    ),
    (
        "tasks/pushNotificationConfig/list",
        b'{"id":"t1"}',
        Op.LIST_PUSH_CONFIGS,
        m.ListTaskPushNotificationConfigsRequest(task_id="t1"),
    ),
    (
        "tasks/pushNotificationConfig/delete",
        b'{"id":"t1","pushNotificationConfigId":"p1"}',
        Op.DELETE_PUSH_CONFIG,
        m.DeleteTaskPushNotificationConfigRequest(task_id="t1", id="p1"),
    ),
]


@pytest.mark.parametrize(("method", "params", "operation", "expected"), DECODE_VECTORS)
def test_request_golden_vectors(
    method: str, params: bytes, operation: Operation, expected: msgspec.Struct
) -> None:
    assert_v03_request(method, params)
    assert v03.decode_request(method, params) == (operation, expected)
    assert v03.decode_request(method, msgspec.Raw(params)) == (operation, expected)


@pytest.mark.parametrize("params", [None, b"{}", b"null", b"[1]"])
def test_extended_card_request_ignores_params(params: bytes | None) -> None:
    assert v03.decode_request("agent/getAuthenticatedExtendedCard", params) == (
        Op.GET_EXTENDED_AGENT_CARD,
        m.GetExtendedAgentCardRequest(),
    )


@pytest.mark.parametrize("method", ["SendMessage", "tasks/list", "message/sendStream", "", "tasks/get/"])
def test_unknown_method_is_method_not_found(method: str) -> None:
    with pytest.raises(MethodNotFoundError):
        v03.decode_request(method, b"{}")


def _send(message: str = '"parts":[{"kind":"text","text":"q"}]', extra: str = "") -> bytes:
    return ('{"message":{"messageId":"m1","role":"user",' + message + "}" + extra + "}").encode()


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("message/send", None, "params.message"),
        ("message/send", b"[]", "params"),
        ("message/send", b'"x"', "params"),
        ("message/send", _send('"parts":[]'), "params.message.parts"),
        ("message/send", _send('"parts":[{"text":"q"}]'), "params.message.parts[0].kind"),
        ("message/send", _send('"parts":[{"kind":"video","v":1}]'), "params.message.parts[0].kind"),
        ("message/send", _send('"parts":[{"kind":"file","file":{}}]'), "params.message.parts[0].file"),
        (
            "message/send",
            _send('"parts":[{"kind":"file","file":{"uri":"u","bytes":"aGk="}}]'),
            "params.message.parts[0].file",
        ),
        (
            "message/send",
            _send('"parts":[{"kind":"file","file":{"bytes":"not base64!"}}]'),
            "params.message.parts[0].file.bytes",
        ),
        ("message/send", _send('"parts":[{"kind":"data","data":[1]}]'), "params.message.parts[0].data"),
        ("message/send", _send('"role":"bot","parts":[{"kind":"text","text":"q"}]'), "params.message.role"),
        ("message/send", b'{"message":{"kind":"task","messageId":"m"}}', "params.message.kind"),
        (
            "message/send",
            _send(extra=',"configuration":{"historyLength":-1}'),
            "params.configuration.historyLength",
        ),
        ("message/send", _send(extra=',"configuration":{"blocking":"yes"}'), "params.configuration.blocking"),
        (
            "message/send",
            _send(extra=',"configuration":{"pushNotificationConfig":{"token":"t"}}'),
            "params.configuration.pushNotificationConfig.url",
        ),
        ("tasks/get", b"{}", "params.id"),
        ("tasks/get", b'{"id":""}', "params.id"),
        ("tasks/get", b'{"id":"t","historyLength":"2"}', "params.historyLength"),
        ("tasks/cancel", b'{"id":7}', "params.id"),
        ("tasks/resubscribe", b'{"metadata":{}}', "params.id"),
        ("tasks/pushNotificationConfig/set", b'{"taskId":"t"}', "params.pushNotificationConfig"),
        (
            "tasks/pushNotificationConfig/set",
            b'{"taskId":"t","pushNotificationConfig":{"url":"u","authentication":{"schemes":[],"credentials":"c"}}}',
            "params.pushNotificationConfig.authentication",
        ),
        ("tasks/pushNotificationConfig/delete", b'{"id":"t"}', "params.pushNotificationConfigId"),
        ("tasks/pushNotificationConfig/list", b"{}", "params.id"),
    ],
)
def test_bad_params_name_the_field(method: str, params: bytes | None, field: str) -> None:
    with pytest.raises(InvalidParamsError) as info:
        v03.decode_request(method, params)
    assert info.value.field_violations[0][0] == field
    assert f"Invalid params: {field}: " in info.value.message


def test_params_that_are_not_json_are_a_parse_error() -> None:
    with pytest.raises(JSONParseError):
        v03.decode_request("tasks/get", b"{not json")


@pytest.mark.parametrize(
    ("configuration", "return_immediately"),
    [
        ("", False),  # no `blocking`: blocking, as the v0.3 SDK servers and clients read it
        (',"configuration":{}', False),
        (',"configuration":{"historyLength":2}', False),
        (',"configuration":{"blocking":true}', False),
        (',"configuration":{"blocking":false}', True),
    ],
)
def test_absent_blocking_is_blocking(configuration: str, return_immediately: bool) -> None:
    params = _send(extra=configuration)
    for method in ("message/send", "message/stream"):
        _, request = v03.decode_request(method, params)
        assert isinstance(request, SendMessageRequest) and request.configuration is not None
        assert request.configuration.return_immediately is return_immediately


@pytest.mark.parametrize(
    ("configuration", "return_immediately"),
    [
        ("", False),  # no configuration at all: blocking, as over JSON-RPC
        (',"configuration":{"blocking":true}', False),
        # proto3 JSON leaves a false bool out: the v0.3 SDK's REST client sends blocking=False as {}
        (',"configuration":{}', True),
        (',"configuration":{"historyLength":2}', True),
        (',"configuration":{"blocking":false}', True),
    ],
)
def test_rest_blocking_reads_proto3_json(configuration: str, return_immediately: bool) -> None:
    for path in ("/v1/message:send", "/v1/message:stream"):
        rest = v03.match_rest("POST", path, {}, _rest_body(configuration))
        assert rest is not None and isinstance(rest[1], SendMessageRequest)
        assert rest[1].configuration is not None
        assert rest[1].configuration.return_immediately is return_immediately


@pytest.mark.parametrize(
    ("configuration", "return_immediately"),
    [
        ("", True),  # the literal reading of v0.3: an absent boolean is false
        (',"configuration":{"blocking":true}', False),
        (',"configuration":{"blocking":false}', True),
    ],
)
def test_blocking_when_absent_false_is_the_literal_reading(
    configuration: str, return_immediately: bool
) -> None:
    _, request = v03.decode_request("message/send", _send(extra=configuration), blocking_when_absent=False)
    assert isinstance(request, SendMessageRequest) and request.configuration is not None
    assert request.configuration.return_immediately is return_immediately
    rest = v03.match_rest(
        "POST", "/v1/message:send", {}, _rest_body(configuration), blocking_when_absent=False
    )
    assert rest is not None and isinstance(rest[1], SendMessageRequest) and rest[1].configuration is not None
    assert rest[1].configuration.return_immediately is return_immediately


def _rest_body(configuration: str = "") -> bytes:
    message = '"message":{"messageId":"m1","role":"ROLE_USER","content":[{"text":"q"}]}'
    return ("{" + message + configuration + "}").encode()


@pytest.mark.parametrize(("sent", "decoded"), [(0, None), (1, 1), (50, 50)])
def test_history_length_zero_means_no_limit(sent: int, decoded: int | None) -> None:
    """v0.3 (proto comment, a2a-python and a2a-js 0.3) reads historyLength 0 as "no limit"."""
    _, get = v03.decode_request("tasks/get", f'{{"id":"t","historyLength":{sent}}}'.encode())
    assert get == m.GetTaskRequest(id="t", history_length=decoded)
    _, send = v03.decode_request("message/send", _send(extra=f',"configuration":{{"historyLength":{sent}}}'))
    assert isinstance(send, SendMessageRequest) and send.configuration is not None
    assert send.configuration.history_length == decoded
    assert v03.match_rest("GET", "/v1/tasks/t", {"historyLength": [str(sent)]}, b"") == (Op.GET_TASK, get)


def test_decoded_requests_are_valid_v10() -> None:
    """What the codec builds re-encodes as v1.0 ProtoJSON that a2a-sdk's v1.0 types parse strictly."""
    for method, params, _, _ in DECODE_VECTORS:
        operation, request = v03.decode_request(method, params)
        body = msgspec.json.encode(request)
        cls = {
            Op.SEND_MESSAGE: pb10.SendMessageRequest,
            Op.SEND_STREAMING_MESSAGE: pb10.SendMessageRequest,
            Op.GET_TASK: pb10.GetTaskRequest,
            Op.CANCEL_TASK: pb10.CancelTaskRequest,
            Op.SUBSCRIBE_TO_TASK: pb10.SubscribeToTaskRequest,
            Op.CREATE_PUSH_CONFIG: pb10.TaskPushNotificationConfig,
            Op.GET_PUSH_CONFIG: pb10.GetTaskPushNotificationConfigRequest,
            Op.LIST_PUSH_CONFIGS: pb10.ListTaskPushNotificationConfigsRequest,
            Op.DELETE_PUSH_CONFIG: pb10.DeleteTaskPushNotificationConfigRequest,
        }[operation]
        json_format.Parse(body, cls())
        assert msgspec.json.decode(body, type=type(request)) == request


# -- JSON-RPC results --------------------------------------------------------------------------------------


def test_task_golden_vector() -> None:
    body = v03.encode_result(Op.GET_TASK, full_task())
    assert body == FULL_TASK_V03
    assert_v03(t03.GetTaskSuccessResponse, body)
    assert v03.encode_result(Op.CANCEL_TASK, full_task()) == body
    assert_v03(t03.CancelTaskSuccessResponse, body)


def test_minimal_task_has_kind_and_required_members_only() -> None:
    task = Task(id="t1", status=TaskStatus(state=S.SUBMITTED))
    body = v03.encode_result(Op.GET_TASK, task)
    # contextId is REQUIRED in v0.3 and printed even when the v1.0 task has none.
    assert body == b'{"kind":"task","id":"t1","contextId":"","status":{"state":"submitted"}}'
    assert_v03(t03.GetTaskSuccessResponse, body)


@pytest.mark.parametrize(
    "result",
    [SendMessageResponse(task=full_task()), full_task()],
    ids=["wrapped", "bare"],
)
def test_send_message_returns_the_bare_task(result: Any) -> None:
    body = v03.encode_result(Op.SEND_MESSAGE, result)
    assert body == FULL_TASK_V03
    assert_v03(t03.SendMessageSuccessResponse, body)


@pytest.mark.parametrize("result", [SendMessageResponse(message=USER_MSG), USER_MSG], ids=["wrapped", "bare"])
def test_send_message_returns_the_bare_message(result: Any) -> None:
    body = v03.encode_result(Op.SEND_MESSAGE, result)
    assert body == USER_MSG_V03
    assert_v03(t03.SendMessageSuccessResponse, body)


def test_send_message_result_must_be_a_task_or_message() -> None:
    with pytest.raises(ValueError, match="task"):
        v03.encode_result(Op.SEND_MESSAGE, SendMessageResponse())
    with pytest.raises(TypeError):
        v03.encode_result(Op.SEND_MESSAGE, {"task": {}})


V03_STATES = {
    S.SUBMITTED: "submitted",
    S.WORKING: "working",
    S.INPUT_REQUIRED: "input-required",
    S.COMPLETED: "completed",
    S.CANCELED: "canceled",
    S.FAILED: "failed",
    S.REJECTED: "rejected",
    S.AUTH_REQUIRED: "auth-required",
    S.UNSPECIFIED: "unknown",
}


@pytest.mark.parametrize(("state", "name"), V03_STATES.items())
def test_states_are_lowercase_with_hyphens(state: TaskState, name: str) -> None:
    task = Task(id="t", context_id="c", status=TaskStatus(state=state))
    body = v03.encode_result(Op.GET_TASK, task)
    assert json.loads(body)["status"] == {"state": name}
    assert_v03(t03.GetTaskSuccessResponse, body)
    assert v03.decode_event(body) == StreamResponse(task=task)


def test_every_state_has_a_v03_name() -> None:
    assert set(V03_STATES) == set(TaskState)
    assert {s.value for s in t03.TaskState} == set(V03_STATES.values())


@pytest.mark.parametrize(
    ("part", "v03_part"),
    list(zip(every_part(), json.loads(EVERY_PART_V03), strict=True)),
    ids=["text", "raw", "url", "data-object", "data-array", "data-string"],
)
def test_part_golden_vectors(part: Part, v03_part: dict[str, Any]) -> None:
    msg = Message(message_id="m", role=Role.AGENT, parts=[part])
    body = v03.encode_result(Op.SEND_MESSAGE, msg)
    assert json.loads(body)["parts"] == [v03_part]
    assert_v03(t03.SendMessageSuccessResponse, body)
    assert v03.decode_event(body) == StreamResponse(message=msg)


@pytest.mark.parametrize("value", [None, True, 0, 2.5, "s", [], [{"a": 1}], {"value": 1}])
def test_data_that_is_not_an_object_is_wrapped_and_round_trips(value: Any) -> None:
    msg = Message(message_id="m", role=Role.AGENT, parts=[Part(data=value)])
    body = v03.encode_result(Op.SEND_MESSAGE, msg)
    part = json.loads(body)["parts"][0]
    if isinstance(value, dict):
        assert part == {"kind": "data", "data": value}
    else:
        assert part == {"kind": "data", "data": {"value": value}, "metadata": {v03.DATA_PART_COMPAT: True}}
    assert_v03(t03.SendMessageSuccessResponse, body)
    assert v03.decode_event(body) == StreamResponse(message=msg)


def test_fields_v03_cannot_carry_are_dropped() -> None:
    """mediaType/filename exist on every v1.0 part but only on v0.3 file parts; ROLE_UNSPECIFIED has no v0.3
    name and goes out as `agent`."""
    msg = Message(
        message_id="m",
        role=Role.UNSPECIFIED,
        parts=[Part(text="# t", media_type="text/markdown"), Part(data={"a": 1}, filename="a.json")],
    )
    body = v03.encode_result(Op.SEND_MESSAGE, msg)
    assert body == (
        b'{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"# t"},'
        b'{"kind":"data","data":{"a":1}}]}'
    )
    assert_v03(t03.SendMessageSuccessResponse, body)


PUSH = TaskPushNotificationConfig(
    id="p1",
    task_id="t1",
    url="https://hook.example/",
    token="tok",
    authentication=AuthenticationInfo(scheme="Bearer", credentials="secret"),
)
PUSH_V03 = (
    b'{"taskId":"t1","pushNotificationConfig":{"id":"p1","url":"https://hook.example/","token":"tok",'
    b'"authentication":{"schemes":["Bearer"],"credentials":"secret"}}}'
)
BARE_PUSH = TaskPushNotificationConfig(id="p2", task_id="t1", url="https://h.example/")
BARE_PUSH_V03 = b'{"taskId":"t1","pushNotificationConfig":{"id":"p2","url":"https://h.example/"}}'


def test_push_config_results() -> None:
    assert v03.encode_result(Op.CREATE_PUSH_CONFIG, PUSH) == PUSH_V03
    assert_v03(t03.SetTaskPushNotificationConfigSuccessResponse, PUSH_V03)
    assert v03.encode_result(Op.GET_PUSH_CONFIG, BARE_PUSH) == BARE_PUSH_V03
    assert_v03(t03.GetTaskPushNotificationConfigSuccessResponse, BARE_PUSH_V03)

    listed = m.ListTaskPushNotificationConfigsResponse(configs=[PUSH, BARE_PUSH])
    body = v03.encode_result(Op.LIST_PUSH_CONFIGS, listed)
    assert body == b"[" + PUSH_V03 + b"," + BARE_PUSH_V03 + b"]"
    assert_v03(t03.ListTaskPushNotificationConfigSuccessResponse, body)
    assert v03.encode_result(Op.LIST_PUSH_CONFIGS, [PUSH, BARE_PUSH]) == body
    assert v03.encode_result(Op.LIST_PUSH_CONFIGS, m.ListTaskPushNotificationConfigsResponse()) == b"[]"

    assert v03.encode_result(Op.DELETE_PUSH_CONFIG, None) == b"null"
    assert_v03(t03.DeleteTaskPushNotificationConfigSuccessResponse, b"null")


def test_push_config_set_then_get_round_trips() -> None:
    _, created = v03.decode_request("tasks/pushNotificationConfig/set", PUSH_V03)
    assert created == PUSH
    assert v03.encode_result(Op.CREATE_PUSH_CONFIG, created) == PUSH_V03


@pytest.mark.parametrize("operation", [Op.SEND_STREAMING_MESSAGE, Op.SUBSCRIBE_TO_TASK, Op.LIST_TASKS])
def test_operations_without_a_v03_result_refuse(operation: Operation) -> None:
    with pytest.raises(ValueError, match=operation.value):
        v03.encode_result(operation, None)
    with pytest.raises(ValueError, match=operation.value):
        v03.encode_rest_result(operation, None)


# -- streams -----------------------------------------------------------------------------------------------


def status_event(state: TaskState, **kw: Any) -> StreamResponse:
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id="t1", context_id="c1", status=TaskStatus(state=state, timestamp=T0), **kw
        )
    )


ARTIFACT_EVENT = StreamResponse(
    artifact_update=TaskArtifactUpdateEvent(
        task_id="t1",
        context_id="c1",
        artifact=Artifact(artifact_id="a1", parts=[Part(text="chunk")]),
        append=True,
        last_chunk=True,
        metadata={"seq": 2},
    )
)


def test_stream_event_golden_vectors() -> None:
    working = v03.encode_stream_event(status_event(S.WORKING, metadata={"n": 1}), final=False)
    assert working == (
        b'{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"working",'
        b'"timestamp":"2026-11-29T12:30:05.123000Z"},"final":false,"metadata":{"n":1}}'
    )
    done = v03.encode_stream_event(status_event(S.COMPLETED), final=True)
    assert done == (
        b'{"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"completed",'
        b'"timestamp":"2026-11-29T12:30:05.123000Z"},"final":true}'
    )
    artifact = v03.encode_stream_event(ARTIFACT_EVENT, final=False)
    assert artifact == (
        b'{"kind":"artifact-update","taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1",'
        b'"parts":[{"kind":"text","text":"chunk"}]},"append":true,"lastChunk":true,"metadata":{"seq":2}}'
    )
    first_chunk = StreamResponse(
        artifact_update=TaskArtifactUpdateEvent(
            task_id="t1", context_id="c1", artifact=Artifact(artifact_id="a1", parts=[Part(text="c")])
        )
    )
    assert b"append" not in v03.encode_stream_event(first_chunk, final=False)
    assert v03.encode_stream_event(StreamResponse(task=full_task()), final=False) == FULL_TASK_V03
    assert v03.encode_stream_event(StreamResponse(message=USER_MSG), final=True) == USER_MSG_V03
    for body in (working, done, artifact, FULL_TASK_V03, USER_MSG_V03):
        assert_v03(t03.SendStreamingMessageSuccessResponse, body)
    for event in (status_event(S.WORKING, metadata={"n": 1}), ARTIFACT_EVENT, first_chunk):
        assert v03.decode_event(v03.encode_stream_event(event, final=False)) == event


@pytest.mark.parametrize("state", list(TaskState))
def test_final_marks_terminal_and_interrupted_status_updates(state: TaskState) -> None:
    event = status_event(state)
    expected = state in TERMINAL_STATES or state in INTERRUPTED_STATES
    assert v03.is_final(event) is expected
    assert json.loads(v03.encode_stream_event(event, final=v03.is_final(event)))["final"] is expected


def test_final_for_messages_but_not_tasks_or_artifacts() -> None:
    assert v03.is_final(StreamResponse(message=AGENT_MSG))
    assert not v03.is_final(StreamResponse(task=full_task()))
    assert not v03.is_final(ARTIFACT_EVENT)


def test_an_empty_stream_response_is_refused() -> None:
    with pytest.raises(ValueError, match="one member"):
        v03.encode_stream_event(StreamResponse(), final=False)
    with pytest.raises(ValueError, match="one member"):
        v03.encode_rest_stream_event(StreamResponse(), final=False)


def test_decode_event_names_bad_fields() -> None:
    with pytest.raises(InvalidParamsError, match=r"result\.kind"):
        v03.decode_event(b'{"kind":"nope"}')
    with pytest.raises(InvalidParamsError, match=r"result\.status"):
        v03.decode_event(b'{"kind":"task","id":"t","contextId":"c"}')
    with pytest.raises(JSONParseError):
        v03.decode_event(b"{")


# -- round trips -------------------------------------------------------------------------------------------


def test_v03_task_round_trips_through_v10() -> None:
    """v0.3 -> v1.0 (storage) -> v0.3 gives back the same bytes."""
    event = v03.decode_event(FULL_TASK_V03)
    assert event.task == full_task()
    assert v03.encode_result(Op.GET_TASK, event.task) == FULL_TASK_V03


def test_v03_message_round_trips_through_v10() -> None:
    for body in (USER_MSG_V03, AGENT_MSG_V03):
        event = v03.decode_event(body)
        assert event.message is not None
        assert v03.encode_result(Op.SEND_MESSAGE, event.message) == body


def test_a_sent_v03_message_is_stored_as_v10_and_read_back_as_v03() -> None:
    """A message sent by a v0.3 client, stored in a v1.0 task, reads back unchanged through tasks/get."""
    _, request = v03.decode_request("message/send", SEND_PARAMS)
    assert isinstance(request, SendMessageRequest)
    stored = Task(id="t1", context_id="c1", status=TaskStatus(state=S.WORKING), history=[request.message])
    stored = msgspec.json.decode(msgspec.json.encode(stored), type=Task)  # through v1.0 storage
    history = json.loads(v03.encode_result(Op.GET_TASK, stored))["history"]
    assert history == [json.loads(SEND_PARAMS)["message"]]


def test_v03_timestamps_without_offset_are_utc() -> None:
    body = b'{"kind":"task","id":"t","contextId":"c","status":{"state":"working","timestamp":"2026-01-02T03:04:05"}}'
    task = v03.decode_event(body).task
    assert task is not None and task.status.timestamp == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
# Empty metadata ({}) is left out: on a wrapped non-object data part it comes back absent (None), the one
# place where the data_part_compat marker cannot tell "{}" from "not set".
metadata = st.none() | st.dictionaries(
    texts.filter(lambda k: k != v03.DATA_PART_COMPAT), json_values, min_size=1, max_size=2
)
parts = st.one_of(
    st.builds(lambda t, md: Part(text=t, metadata=md), texts, metadata),
    st.builds(
        lambda b, f, mt, md: Part(raw=b, filename=f, media_type=mt, metadata=md),
        st.binary(max_size=16),
        texts,
        texts,
        metadata,
    ),
    st.builds(lambda u, f, md: Part(url=u, filename=f, metadata=md), texts, texts, metadata),
    st.builds(lambda d, md: Part(data=d, metadata=md), json_values, metadata),
)
messages = st.builds(
    lambda mid, ctx, role, ps, md, ext: Message(
        message_id=mid, context_id=ctx, role=role, parts=ps, metadata=md, extensions=ext
    ),
    texts.filter(bool),
    texts,
    st.sampled_from([Role.USER, Role.AGENT]),
    st.lists(parts, min_size=1, max_size=4),
    metadata,
    st.lists(texts, max_size=2),
)


@settings(max_examples=150, deadline=None)
@given(messages, st.sampled_from(list(TaskState)))
def test_every_representable_v10_task_round_trips(message: Message, state: TaskState) -> None:
    task = Task(
        id="t",
        context_id=message.context_id,
        status=TaskStatus(state=state, message=message, timestamp=T0),
        artifacts=[Artifact(artifact_id="a", parts=message.parts, metadata=message.metadata)],
        history=[message],
        metadata=message.metadata,
    )
    body = v03.encode_result(Op.GET_TASK, task)
    assert_v03(t03.GetTaskSuccessResponse, body)
    assert v03.decode_event(body) == StreamResponse(task=task)
    rest = v03.encode_rest_result(Op.GET_TASK, task)
    assert_pb03(pb03.Task, rest)


# -- errors ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", list(ERRORS_BY_CODE.values()), ids=lambda c: c.__name__)
def test_error_codes(cls: type[A2AError]) -> None:
    v10_only = (ExtensionSupportRequiredError, VersionNotSupportedError, TaskGenerationMismatchError)
    expected = -32600 if cls in v10_only else cls.code
    error = cls()
    assert v03.error_code(error) == expected
    response = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": v03.error_code(error), "message": error.message, "data": v03.error_data(error)},
        }
    )
    parsed = t03.JSONRPCErrorResponse.model_validate_json(response, strict=True)
    assert parsed.model_dump(mode="json", by_alias=True, exclude_unset=True) == json.loads(response)


def test_v03_error_codes_are_the_v03_ones() -> None:
    """-32001..-32007 keep their codes (v0.3 names -32007 AuthenticatedExtendedCardNotConfiguredError), and
    so do skillwire's own -32040/-32041 (credentials missing or short, the same at both versions)."""
    v03_codes = {
        -32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003, -32004, -32005, -32006, -32007,
        -32040, -32041,
    }  # fmt: skip
    assert {v03.error_code(cls()) for cls in ERRORS_BY_CODE.values()} == v03_codes
    assert ExtendedAgentCardNotConfiguredError.code == t03.AuthenticatedExtendedCardNotConfiguredError().code


def test_error_data_is_a_small_object() -> None:
    assert v03.error_data(TaskNotFoundError()) == {"reason": "TASK_NOT_FOUND"}
    assert v03.error_data(VersionNotSupportedError(metadata={"requestedVersion": "2.0"})) == {
        "reason": "VERSION_NOT_SUPPORTED",
        "metadata": {"requestedVersion": "2.0"},
    }
    with pytest.raises(InvalidParamsError) as info:
        v03.decode_request("tasks/get", b"{}")
    assert v03.error_data(info.value) == {
        "reason": "INVALID_PARAMS",
        "fieldViolations": [{"field": "params.id", "description": "required field is missing"}],
    }
    assert v03.error_code(ContentTypeNotSupportedError()) == -32005


# -- agent card --------------------------------------------------------------------------------------------

RPC_URL = "https://agent.example/"
REST_URL = "https://agent.example/rest"
CARD = AgentCard(
    name="Echo",
    description="Says it back",
    supported_interfaces=[
        AgentInterface(url=RPC_URL, protocol_binding="JSONRPC", protocol_version="1.0"),
        AgentInterface(url=REST_URL, protocol_binding="HTTP+JSON", protocol_version="1.0"),
        AgentInterface(url=RPC_URL, protocol_binding="JSONRPC", protocol_version="0.3"),
        AgentInterface(url=REST_URL, protocol_binding="HTTP+JSON", protocol_version="0.3"),
    ],
    provider=AgentProvider(url="https://org.example", organization="Org"),
    version="1.2.3",
    documentation_url="https://agent.example/docs",
    capabilities=AgentCapabilities(
        streaming=True,
        push_notifications=False,
        extensions=[AgentExtension(uri="urn:ext", required=True)],
        extended_agent_card=True,
    ),
    security_schemes={
        "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}},
        "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key", "description": "k"}},
        "oauth": {
            "oauth2SecurityScheme": {
                "flows": {
                    "authorizationCode": {
                        "authorizationUrl": "https://id.example/auth",
                        "tokenUrl": "https://id.example/token",
                        "scopes": {"read": "Read"},
                        "pkceRequired": True,
                    }
                },
                "oauth2MetadataUrl": "https://id.example/.well-known/oauth-authorization-server",
            }
        },
        "oidc": {
            "openIdConnectSecurityScheme": {"openIdConnectUrl": "https://id.example/.well-known/openid"}
        },
        "mtls": {"mtlsSecurityScheme": {}},
    },
    security_requirements=[SecurityRequirement(schemes={"oauth": StringList(list=["read"])})],
    default_input_modes=["text/plain"],
    default_output_modes=["application/json"],
    skills=[
        AgentSkill(
            id="echo",
            name="Echo",
            description="Echoes",
            tags=["t"],
            examples=["hi"],
            security_requirements=[SecurityRequirement(schemes={"key": StringList()})],
        ),
        AgentSkill(id="plain", name="Plain", description="No auth", tags=[]),
    ],
    signatures=[AgentCardSignature(protected="eyJhbGciOiJFUzI1NiJ9", signature="c2ln")],
    icon_url="https://agent.example/icon.png",
)
V03_SCHEMES = {
    "bearer": {"type": "http", "scheme": "Bearer", "bearerFormat": "JWT"},
    "key": {"type": "apiKey", "description": "k", "in": "header", "name": "X-Key"},
    "oauth": {
        "type": "oauth2",
        "oauth2MetadataUrl": "https://id.example/.well-known/oauth-authorization-server",
        "flows": {
            "authorizationCode": {
                "scopes": {"read": "Read"},
                "authorizationUrl": "https://id.example/auth",
                "tokenUrl": "https://id.example/token",
            }
        },
    },
    "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://id.example/.well-known/openid"},
    "mtls": {"type": "mutualTLS"},
}


def test_card_fields_golden_vector() -> None:
    fields = v03.v03_card_fields(CARD, jsonrpc_url=RPC_URL, interfaces=[(REST_URL, "HTTP+JSON")])
    assert {k: v for k, v in fields.items() if k not in ("securitySchemes", "skills")} == {
        "protocolVersion": "0.3.0",
        "url": RPC_URL,
        "preferredTransport": "JSONRPC",
        # v0.3 section 5.6.2: additionalInterfaces SHOULD repeat the main url and transport.
        "additionalInterfaces": [
            {"url": RPC_URL, "transport": "JSONRPC"},
            {"url": REST_URL, "transport": "HTTP+JSON"},
        ],
        "supportsAuthenticatedExtendedCard": True,
        "security": [{"oauth": ["read"]}],
    }
    # Shared members carry both shapes.
    v10 = to_builtins(CARD)
    assert fields["securitySchemes"]["bearer"] == {
        **v10["securitySchemes"]["bearer"],
        **V03_SCHEMES["bearer"],
    }
    assert (
        fields["securitySchemes"]["oauth"]["flows"]
        == v10["securitySchemes"]["oauth"]["oauth2SecurityScheme"]["flows"]
    )
    assert fields["skills"] == [{**v10["skills"][0], "security": [{"key": []}]}, v10["skills"][1]]


def test_card_fields_without_security_are_few() -> None:
    card = AgentCard(
        name="n",
        description="d",
        supported_interfaces=[
            AgentInterface(url=RPC_URL, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        version="1",
        capabilities=AgentCapabilities(),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="s", name="s", description="s", tags=[])],
    )
    assert v03.v03_card_fields(card, jsonrpc_url=RPC_URL, interfaces=[(RPC_URL, "JSONRPC")]) == {
        "protocolVersion": "0.3.0",
        "url": RPC_URL,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": RPC_URL, "transport": "JSONRPC"}],
    }


def merged_card() -> dict[str, Any]:
    card = to_builtins(CARD)
    card.update(v03.v03_card_fields(CARD, jsonrpc_url=RPC_URL, interfaces=[(REST_URL, "HTTP+JSON")]))
    return card


def test_merged_card_reads_as_v10() -> None:
    merged = merged_card()
    v10 = json_format.MessageToDict(json_format.ParseDict(to_builtins(CARD), pb10.AgentCard()))
    lenient = json_format.ParseDict(merged, pb10.AgentCard(), ignore_unknown_fields=True)
    assert json_format.MessageToDict(lenient) == v10
    # a2a-sdk's card parser rebuilds security schemes from their v0.3 members: nothing may be lost.
    assert json_format.MessageToDict(parse_agent_card(json.loads(json.dumps(merged)))) == v10
    # skillwire keeps security schemes as raw JSON, so a merged scheme shows its v0.3 members too.
    ours = msgspec.json.decode(msgspec.json.encode(merged), type=AgentCard)
    assert msgspec.structs.replace(ours, security_schemes=CARD.security_schemes) == CARD
    for name, scheme in CARD.security_schemes.items():
        assert ours.security_schemes[name].items() >= scheme.items()


def test_merged_card_reads_as_v03_and_matches_the_v03_card() -> None:
    merged = merged_card()
    seen = t03.AgentCard.model_validate_json(json.dumps(merged), strict=True)
    view = seen.model_dump(mode="json", by_alias=True, exclude_unset=True)
    assert view == v03.v03_card(CARD, jsonrpc_url=RPC_URL, interfaces=[(REST_URL, "HTTP+JSON")])


def test_v03_card_golden_vector() -> None:
    card = v03.v03_card(CARD)  # endpoints read from the card's 0.3 interfaces
    assert card == {
        "protocolVersion": "0.3.0",
        "name": "Echo",
        "description": "Says it back",
        "url": RPC_URL,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": [
            {"url": RPC_URL, "transport": "JSONRPC"},
            {"url": REST_URL, "transport": "HTTP+JSON"},
        ],
        "iconUrl": "https://agent.example/icon.png",
        "provider": {"url": "https://org.example", "organization": "Org"},
        "version": "1.2.3",
        "documentationUrl": "https://agent.example/docs",
        "capabilities": {
            "streaming": True,
            "pushNotifications": False,
            "extensions": [{"uri": "urn:ext", "required": True}],
        },
        "securitySchemes": V03_SCHEMES,
        "security": [{"oauth": ["read"]}],
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["application/json"],
        "skills": [
            {
                "id": "echo",
                "name": "Echo",
                "description": "Echoes",
                "tags": ["t"],
                "examples": ["hi"],
                "security": [{"key": []}],
            },
            {"id": "plain", "name": "Plain", "description": "No auth", "tags": []},
        ],
        "supportsAuthenticatedExtendedCard": True,
        "signatures": [{"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "c2ln"}],
    }
    body = v03.encode_result(Op.GET_EXTENDED_AGENT_CARD, CARD)
    assert json.loads(body) == card
    assert_v03(t03.GetAuthenticatedExtendedCardSuccessResponse, body)
    assert v03.encode_result(Op.GET_EXTENDED_AGENT_CARD, card) == body
    assert json.loads(v03.encode_rest_result(Op.GET_EXTENDED_AGENT_CARD, CARD)) == card


def test_v03_card_reads_back_as_the_v10_card_in_a2a_sdk() -> None:
    """a2a-sdk's v0.3 -> v1.0 card conversion recovers the card, bar what v0.3 cannot say (pkceRequired)."""
    body = v03.encode_result(Op.GET_EXTENDED_AGENT_CARD, CARD)
    core = json_format.MessageToDict(conversions.to_core_agent_card(t03.AgentCard.model_validate_json(body)))
    expected = json_format.MessageToDict(json_format.ParseDict(to_builtins(CARD), pb10.AgentCard()))
    del expected["securitySchemes"]["oauth"]["oauth2SecurityScheme"]["flows"]["authorizationCode"][
        "pkceRequired"
    ]
    for key in (
        "securitySchemes",
        "securityRequirements",
        "skills",
        "capabilities",
        "provider",
        "signatures",
    ):
        assert core[key] == expected[key], key
    assert [(i["url"], i["protocolBinding"]) for i in core["supportedInterfaces"]] == [
        (RPC_URL, "JSONRPC"),
        (RPC_URL, "JSONRPC"),
        (REST_URL, "HTTP+JSON"),
    ]


def test_v03_card_with_explicit_endpoints() -> None:
    card = v03.v03_card(CARD, jsonrpc_url="https://other.example/rpc", interfaces=[])
    assert card["url"] == "https://other.example/rpc"
    assert card["additionalInterfaces"] == [{"url": "https://other.example/rpc", "transport": "JSONRPC"}]


# -- REST (v0.3 HTTP+JSON) ---------------------------------------------------------------------------------

REST_SEND = (
    b'{"message":{"messageId":"m1","contextId":"c1","role":"ROLE_USER","content":[{"text":"hi"},'
    b'{"file":{"fileWithBytes":"aGk=","mimeType":"text/plain","name":"a.txt"}},'
    b'{"file":{"fileWithUri":"https://x.example/f"}},{"data":{"data":{"a":1}},"metadata":{"m":2}}],'
    b'"metadata":{"mm":1},"extensions":["urn:e"]},'
    b'"configuration":{"acceptedOutputModes":["text/plain"],"historyLength":3,"blocking":true,'
    b'"pushNotification":{"id":"p1","url":"https://hook.example/","token":"tok",'
    b'"authentication":{"schemes":["Bearer","Basic"],"credentials":"secret"}}},'
    b'"metadata":{"rm":true}}'
)
REST_SEND_REQUEST = msgspec.structs.replace(
    SEND_REQUEST, message=msgspec.structs.replace(SEND_REQUEST.message, reference_task_ids=[])
)

REST_VECTORS: list[tuple[str, str, dict[str, list[str]], bytes, Operation, msgspec.Struct]] = [
    ("POST", "/v1/message:send", {}, REST_SEND, Op.SEND_MESSAGE, REST_SEND_REQUEST),
    ("POST", "/v1/message:stream", {}, REST_SEND, Op.SEND_STREAMING_MESSAGE, REST_SEND_REQUEST),
    ("GET", "/v1/tasks/t1", {}, b"", Op.GET_TASK, m.GetTaskRequest(id="t1")),
    (
        "GET",
        "/v1/tasks/t1",
        {"historyLength": ["4"]},
        b"",
        Op.GET_TASK,
        m.GetTaskRequest(id="t1", history_length=4),
    ),
    (
        "GET",
        "/v1/tasks/t1",
        {"history_length": ["4"]},
        b"",
        Op.GET_TASK,
        m.GetTaskRequest(id="t1", history_length=4),
    ),
    ("POST", "/v1/tasks/t1:cancel", {}, b"", Op.CANCEL_TASK, m.CancelTaskRequest(id="t1")),
    ("POST", "/v1/tasks/t1:cancel", {}, b'{"name":"tasks/t1"}', Op.CANCEL_TASK, m.CancelTaskRequest(id="t1")),
    ("GET", "/v1/tasks/t1:subscribe", {}, b"", Op.SUBSCRIBE_TO_TASK, m.SubscribeToTaskRequest(id="t1")),
    ("POST", "/v1/tasks/t1:subscribe", {}, b"", Op.SUBSCRIBE_TO_TASK, m.SubscribeToTaskRequest(id="t1")),
    (
        "POST",
        "/v1/tasks/t1/pushNotificationConfigs",
        {},
        # CreateTaskPushNotificationConfigRequest, as a2a-sdk's v0.3 REST client sends it (proto names).
        b'{"parent":"tasks/t1","config_id":"p1","config":{"name":"tasks/t1/pushNotificationConfigs/p1",'
        b'"push_notification_config":{"id":"p1","url":"https://hook.example/","token":"tok",'
        b'"authentication":{"schemes":["Bearer"],"credentials":"secret"}}}}',
        Op.CREATE_PUSH_CONFIG,
        PUSH,
    ),
    (
        "POST",
        "/v1/tasks/t1/pushNotificationConfigs",
        {},
        # The bare `config` the proto's HTTP rule (body: "config") names.
        b'{"name":"tasks/t1/pushNotificationConfigs/p9","pushNotificationConfig":{"url":"https://h.example/"}}',
        Op.CREATE_PUSH_CONFIG,
        TaskPushNotificationConfig(id="p9", task_id="t1", url="https://h.example/"),
    ),
    (
        "POST",
        "/v1/tasks/t1/pushNotificationConfigs",
        {},
        b'{"config":{"pushNotificationConfig":{"url":"https://h.example/"}}}',
        Op.CREATE_PUSH_CONFIG,
        TaskPushNotificationConfig(id="t1", task_id="t1", url="https://h.example/"),
    ),
    (
        "GET",
        "/v1/tasks/t1/pushNotificationConfigs",
        {"pageSize": ["5"], "pageToken": ["x"]},
        b"",
        Op.LIST_PUSH_CONFIGS,
        m.ListTaskPushNotificationConfigsRequest(task_id="t1", page_size=5, page_token="x"),
    ),
    (
        "GET",
        "/v1/tasks/t1/pushNotificationConfigs/p1",
        {},
        b"",
        Op.GET_PUSH_CONFIG,
        m.GetTaskPushNotificationConfigRequest(task_id="t1", id="p1"),
    ),
    (
        "DELETE",
        "/v1/tasks/t1/pushNotificationConfigs/p1",
        {},
        b"",
        Op.DELETE_PUSH_CONFIG,
        m.DeleteTaskPushNotificationConfigRequest(task_id="t1", id="p1"),
    ),
    ("GET", "/v1/card", {}, b"", Op.GET_EXTENDED_AGENT_CARD, m.GetExtendedAgentCardRequest()),
]


@pytest.mark.parametrize(("verb", "path", "query", "body", "operation", "expected"), REST_VECTORS)
def test_rest_routes(
    verb: str,
    path: str,
    query: dict[str, list[str]],
    body: bytes,
    operation: Operation,
    expected: msgspec.Struct,
) -> None:
    assert v03.match_rest(verb, path, query, body) == (operation, expected)


def test_rest_bodies_are_v03_protojson() -> None:
    assert_pb03(pb03.SendMessageRequest, REST_SEND)
    for _, _, _, body, operation, _ in REST_VECTORS:
        if operation is Op.CREATE_PUSH_CONFIG and b'"config"' in body:
            json_format.Parse(body, pb03.CreateTaskPushNotificationConfigRequest())
        elif operation is Op.CREATE_PUSH_CONFIG:
            json_format.Parse(body, pb03.TaskPushNotificationConfig())


@pytest.mark.parametrize(
    ("verb", "path"),
    [
        ("GET", "/v1/message:send"),
        ("PUT", "/v1/message:send"),
        ("POST", "/message:send"),
        ("POST", "/v1/message:send/x"),
        ("GET", "/v1/tasks"),
        ("GET", "/v1/tasks/"),
        ("DELETE", "/v1/tasks/t1"),
        ("GET", "/v1/tasks/t1:cancel"),
        ("POST", "/v1/tasks/:cancel"),
        ("DELETE", "/v1/tasks/t1:subscribe"),
        ("GET", "/v1/tasks/t1/history"),
        ("PUT", "/v1/tasks/t1/pushNotificationConfigs"),
        ("POST", "/v1/tasks/t1/pushNotificationConfigs/p1"),
        ("GET", "/v1/tasks/t1/pushNotificationConfigs/"),
        ("GET", "/v1/tasks/t1/pushNotificationConfigs/p1/x"),
        ("POST", "/v1/card"),
        ("GET", "/v1/extendedAgentCard"),
        ("GET", "/v1"),
    ],
)
def test_rest_non_routes_do_not_match(verb: str, path: str) -> None:
    assert v03.match_rest(verb, path, {}, b"{}") is None


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/message:send", b"{}", "body.message"),
        ("/v1/message:send", b'{"message":{"messageId":"m","content":[]}}', "body.message.content"),
        (
            "/v1/message:send",
            b'{"message":{"messageId":"m","role":"ROLE_X","content":[{"text":"q"}]}}',
            "body.message",
        ),
        ("/v1/message:send", b'{"message":{"messageId":"m","content":[{}]}}', "body.message.content[0]"),
        (
            "/v1/message:send",
            b'{"message":{"messageId":"m","content":[{"text":"a","data":{}}]}}',
            "body.message.content[0]",
        ),
        (
            "/v1/message:send",
            b'{"message":{"messageId":"m","content":[{"file":{"name":"n"}}]}}',
            "body.message.content[0].file",
        ),
        ("/v1/tasks/t/pushNotificationConfigs", b"{}", "body.config.pushNotificationConfig"),
        (
            "/v1/tasks/t/pushNotificationConfigs",
            b'{"config":{"pushNotificationConfig":{}}}',
            "body.config.pushNotificationConfig.url",
        ),
    ],
)
def test_rest_bad_bodies_name_the_field(path: str, body: bytes, field: str) -> None:
    with pytest.raises(InvalidParamsError) as info:
        v03.match_rest("POST", path, {}, body)
    assert info.value.field_violations[0][0] == field


@pytest.mark.parametrize("body", [b"", b"{", b"not json"])
def test_rest_body_that_is_not_json_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(JSONParseError):
        v03.match_rest("POST", "/v1/message:send", {}, body)


@pytest.mark.parametrize("value", ["-1", "x", "1.5", ""])
def test_rest_bad_history_length(value: str) -> None:
    with pytest.raises(InvalidParamsError, match="historyLength"):
        v03.match_rest("GET", "/v1/tasks/t1", {"historyLength": [value]}, b"")


def test_rest_accepts_numeric_enums_and_camel_or_proto_names() -> None:
    body = b'{"request":{"message_id":"m1","role":1,"content":[{"file":{"file_with_uri":"u","mime_type":"a/b"}}]}}'
    found = v03.match_rest("POST", "/v1/message:send", {}, body)
    assert found is not None
    assert found[1] == SendMessageRequest(
        message=Message(message_id="m1", role=Role.USER, parts=[Part(url="u", media_type="a/b")]),
        configuration=ABSENT_BLOCKING,
    )


REST_TASK_PB03 = {
    "id": "t1",
    "contextId": "c1",
    "status": {
        "state": "TASK_STATE_INPUT_REQUIRED",
        "message": {
            "messageId": "m2",
            "contextId": "c1",
            "taskId": "t1",
            "role": "ROLE_AGENT",
            "content": [{"text": "need more"}],
        },
        "timestamp": "2026-11-29T12:30:05.123000Z",
    },
    "artifacts": [
        {
            "artifactId": "a1",
            "name": "out",
            "description": "d",
            "parts": [
                {"text": "t", "metadata": {"x": 1}},
                {"file": {"fileWithBytes": "AAH/", "mimeType": "application/octet-stream", "name": "b.bin"}},
                {
                    "file": {
                        "fileWithUri": "https://x.example/y.png",
                        "mimeType": "image/png",
                        "name": "y.png",
                    }
                },
                {"data": {"data": {"k": [1, None]}}},
                {"data": {"data": {"value": [1, 2]}}, "metadata": {"data_part_compat": True}},
                {"data": {"data": {"value": "s"}}, "metadata": {"m": 1, "data_part_compat": True}},
            ],
            "metadata": {"am": True},
            "extensions": ["urn:e"],
        }
    ],
    "history": [
        {
            "messageId": "m1",
            "contextId": "c1",
            "taskId": "t1",
            "role": "ROLE_USER",
            "content": [{"text": "hi", "metadata": {"lang": "en"}}],
            "metadata": {"k": "v"},
            "extensions": ["urn:ext"],
        },
        {
            "messageId": "m2",
            "contextId": "c1",
            "taskId": "t1",
            "role": "ROLE_AGENT",
            "content": [{"text": "need more"}],
        },
    ],
    "metadata": {"tm": {"nested": 1}},
}


def test_rest_task_golden_vector() -> None:
    for operation in (Op.GET_TASK, Op.CANCEL_TASK):
        body = v03.encode_rest_result(operation, full_task())
        assert json.loads(body) == REST_TASK_PB03
        assert_pb03(pb03.Task, body)


def test_rest_send_message_results_are_wrapped() -> None:
    body = v03.encode_rest_result(Op.SEND_MESSAGE, SendMessageResponse(task=full_task()))
    assert json.loads(body) == {"task": REST_TASK_PB03}
    assert_pb03(pb03.SendMessageResponse, body)
    body = v03.encode_rest_result(Op.SEND_MESSAGE, AGENT_MSG)
    assert json.loads(body) == {"message": REST_TASK_PB03["status"]["message"]}
    assert_pb03(pb03.SendMessageResponse, body)


def test_rest_canceled_is_spelled_cancelled_and_unspecified_is_omitted() -> None:
    body = v03.encode_rest_result(Op.GET_TASK, Task(id="t", status=TaskStatus(state=S.CANCELED)))
    assert body == b'{"id":"t","status":{"state":"TASK_STATE_CANCELLED"}}'
    assert_pb03(pb03.Task, body)
    body = v03.encode_rest_result(Op.GET_TASK, Task(id="t", status=TaskStatus(state=S.UNSPECIFIED)))
    assert body == b'{"id":"t","status":{}}'
    assert_pb03(pb03.Task, body)


@pytest.mark.parametrize("state", list(TaskState))
def test_rest_states_match_the_v03_proto(state: TaskState) -> None:
    body = v03.encode_rest_result(Op.GET_TASK, Task(id="t", status=TaskStatus(state=state)))
    task = assert_pb03(pb03.Task, body)
    assert isinstance(task, pb03.Task)
    assert proto_utils.FromProto.task_state(task.status.state).value == V03_STATES[state]


def test_rest_push_config_results() -> None:
    body = v03.encode_rest_result(Op.CREATE_PUSH_CONFIG, PUSH)
    assert body == (
        b'{"name":"tasks/t1/pushNotificationConfigs/p1","pushNotificationConfig":{"id":"p1",'
        b'"url":"https://hook.example/","token":"tok","authentication":{"schemes":["Bearer"],'
        b'"credentials":"secret"}}}'
    )
    assert_pb03(pb03.TaskPushNotificationConfig, body)
    assert v03.encode_rest_result(Op.GET_PUSH_CONFIG, PUSH) == body
    listed = v03.encode_rest_result(
        Op.LIST_PUSH_CONFIGS,
        m.ListTaskPushNotificationConfigsResponse(configs=[PUSH, BARE_PUSH], next_page_token="n"),
    )
    assert json.loads(listed)["nextPageToken"] == "n"
    assert_pb03(pb03.ListTaskPushNotificationConfigResponse, listed)
    assert v03.encode_rest_result(Op.LIST_PUSH_CONFIGS, []) == b"{}"
    assert v03.encode_rest_result(Op.DELETE_PUSH_CONFIG, None) == b"{}"
    assert_pb03(empty_pb2.Empty, b"{}")


def test_rest_stream_events() -> None:
    done = v03.encode_rest_stream_event(status_event(S.COMPLETED), final=True)
    assert done == (
        b'{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED",'
        b'"timestamp":"2026-11-29T12:30:05.123000Z"},"final":true}}'
    )
    working = v03.encode_rest_stream_event(status_event(S.WORKING), final=False)
    assert b"final" not in working  # proto3 default: omitted
    artifact = v03.encode_rest_stream_event(ARTIFACT_EVENT, final=False)
    assert artifact == (
        b'{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a1",'
        b'"parts":[{"text":"chunk"}]},"append":true,"lastChunk":true,"metadata":{"seq":2}}}'
    )
    task = v03.encode_rest_stream_event(StreamResponse(task=full_task()), final=False)
    assert json.loads(task) == {"task": REST_TASK_PB03}
    message = v03.encode_rest_stream_event(StreamResponse(message=AGENT_MSG), final=True)
    for body in (done, working, artifact, task, message):
        assert_pb03(pb03.StreamResponse, body)


def test_rest_file_bytes_are_the_file_content() -> None:
    """The v0.3 proto's ``file_with_bytes`` is the file itself, base64 once in ProtoJSON. a2a-python's v0.3
    proto_utils instead stores the base64 *text* there (so its JSON holds base64 twice); we follow the proto."""
    msg = Message(message_id="m", role=Role.AGENT, parts=[Part(raw=b"hi")])
    body = json.loads(v03.encode_rest_result(Op.SEND_MESSAGE, msg))
    assert body["message"]["content"][0]["file"]["fileWithBytes"] == base64.b64encode(b"hi").decode()
    sdk = proto_utils.ToProto.message(
        conversions.to_compat_message(json_format.ParseDict(to_builtins(msg), pb10.Message()))
    )
    assert sdk is not None
    assert (
        json_format.MessageToDict(sdk)["content"][0]["file"]["fileWithBytes"]
        == base64.b64encode(b"aGk=").decode()
    )


# -- interop with a2a-sdk's v0.3 client code ---------------------------------------------------------------


def _pb10(struct: msgspec.Struct, cls: type[PbMessage]) -> Any:
    return json_format.ParseDict(to_builtins(struct), cls())


def _v10_json(msg: PbMessage) -> Any:
    return _norm(json_format.MessageToDict(msg))


INTEROP_TASK = full_task()


def test_a2a_sdk_jsonrpc_client_reads_our_results() -> None:
    """What a2a-sdk's v0.3 JSON-RPC client does with a result gives back the v1.0 object we started from."""
    body = v03.encode_result(Op.SEND_MESSAGE, SendMessageResponse(task=INTEROP_TASK))
    core = conversions.to_core_task(t03.Task.model_validate_json(body))
    assert _v10_json(core) == _norm(to_builtins(INTEROP_TASK))

    body = v03.encode_result(Op.SEND_MESSAGE, USER_MSG)
    assert _v10_json(conversions.to_core_message(t03.Message.model_validate_json(body))) == to_builtins(
        USER_MSG
    )

    body = v03.encode_result(Op.GET_PUSH_CONFIG, PUSH)
    core_push = conversions.to_core_task_push_notification_config(
        t03.TaskPushNotificationConfig.model_validate_json(body)
    )
    assert _v10_json(core_push) == to_builtins(PUSH)

    for event in (
        status_event(S.WORKING, metadata={"n": 1}),
        ARTIFACT_EVENT,
        StreamResponse(task=INTEROP_TASK),
    ):
        body = (
            b'{"jsonrpc":"2.0","id":1,"result":'
            + v03.encode_stream_event(event, final=v03.is_final(event))
            + b"}"
        )
        core_event = conversions.to_core_stream_response(
            t03.SendStreamingMessageSuccessResponse.model_validate_json(body)
        )
        assert _v10_json(core_event) == _norm(to_builtins(event))


def test_a2a_sdk_jsonrpc_client_requests_decode_to_the_same_v10_request() -> None:
    """a2a-sdk's v0.3 JSON-RPC client turns a v1.0 request into v0.3 params; we turn them back."""
    original = msgspec.structs.replace(
        SEND_REQUEST,
        configuration=msgspec.structs.replace(
            SEND_REQUEST.configuration,
            task_push_notification_config=msgspec.structs.replace(PUSH, task_id=""),
        ),
    )
    compat = conversions.to_compat_send_message_request(
        _pb10(original, pb10.SendMessageRequest), request_id=0
    )
    params = json.dumps(compat.params.model_dump(by_alias=True, exclude_none=True, mode="json")).encode()
    assert v03.decode_request("message/send", params) == (Op.SEND_MESSAGE, original)

    get = conversions.to_compat_get_task_request(pb10.GetTaskRequest(id="t1", history_length=2), request_id=0)
    params = json.dumps(get.params.model_dump(by_alias=True, exclude_none=True, mode="json")).encode()
    assert v03.decode_request("tasks/get", params) == (
        Op.GET_TASK,
        m.GetTaskRequest(id="t1", history_length=2),
    )

    create = conversions.to_compat_create_task_push_notification_config_request(
        _pb10(PUSH, pb10.TaskPushNotificationConfig), 0
    )
    params = json.dumps(create.params.model_dump(by_alias=True, exclude_none=True, mode="json")).encode()
    assert v03.decode_request("tasks/pushNotificationConfig/set", params) == (Op.CREATE_PUSH_CONFIG, PUSH)


def test_a2a_sdk_rest_client_requests_decode_to_the_same_v10_request() -> None:
    """The body a2a-sdk's v0.3 REST client builds (proto field names) matches back to the request."""
    original = SendMessageRequest(
        message=Message(
            message_id="m1",
            context_id="c1",
            role=Role.USER,
            parts=[Part(text="hi"), Part(url="https://x.example/f", media_type="a/b"), Part(data={"a": [1]})],
            metadata={"mm": 1},
        ),
        configuration=SendMessageConfiguration(accepted_output_modes=["text/plain"], history_length=2),
    )
    compat = conversions.to_compat_send_message_request(
        _pb10(original, pb10.SendMessageRequest), request_id=0
    )
    req_proto = pb03.SendMessageRequest(
        request=proto_utils.ToProto.message(compat.params.message),
        configuration=proto_utils.ToProto.message_send_configuration(compat.params.configuration),
        metadata=proto_utils.ToProto.metadata(compat.params.metadata),
    )
    body = json.dumps(json_format.MessageToDict(req_proto, preserving_proto_field_name=True)).encode()
    assert v03.match_rest("POST", "/v1/message:send", {}, body) == (Op.SEND_MESSAGE, original)

    create = conversions.to_compat_create_task_push_notification_config_request(
        _pb10(PUSH, pb10.TaskPushNotificationConfig), 0
    )
    create_proto = pb03.CreateTaskPushNotificationConfigRequest(
        parent="tasks/t1",
        config_id=create.params.push_notification_config.id,
        config=proto_utils.ToProto.task_push_notification_config(create.params),
    )
    body = json.dumps(json_format.MessageToDict(create_proto, preserving_proto_field_name=True)).encode()
    assert v03.match_rest("POST", "/v1/tasks/t1/pushNotificationConfigs", {}, body) == (
        Op.CREATE_PUSH_CONFIG,
        PUSH,
    )


def test_a2a_sdk_rest_client_reads_our_results() -> None:
    """Without file bytes (see test_rest_file_bytes_are_the_file_content) and reference ids (the v0.3 proto
    Message has none), a task read by a2a-sdk's v0.3 REST client is the task we sent."""
    user = msgspec.structs.replace(USER_MSG, reference_task_ids=[])
    task = full_task(
        parts=[p for p in every_part() if not isinstance(p.raw, bytes)], history=[user, AGENT_MSG]
    )
    body = json.loads(v03.encode_rest_result(Op.GET_TASK, task))
    core = conversions.to_core_task(proto_utils.FromProto.task(json_format.ParseDict(body, pb03.Task())))
    assert _v10_json(core) == _norm(to_builtins(task))

    body = json.loads(v03.encode_rest_result(Op.GET_PUSH_CONFIG, PUSH))
    config = proto_utils.FromProto.task_push_notification_config(
        json_format.ParseDict(body, pb03.TaskPushNotificationConfig())
    )
    assert _v10_json(conversions.to_core_task_push_notification_config(config)) == to_builtins(PUSH)
