"""The A2A v0.3 <-> v1.0 codec (sans-IO): one v1.0 request handler serves v0.3 clients.

A v0.3 request decodes straight into the v1.0 request Struct of its operation, and a v1.0 result encodes
into the v0.3 JSON a v0.3 client expects. Storage stays v1.0, so a task made through one version reads the
same through the other. ::

    operation, request = decode_request("message/send", params)      # v0.3 JSON-RPC params
    result = await handler.handle(operation, request)                # the one v1.0 handler
    body = encode_result(operation, result)                          # the v0.3 `result` value

    for event in stream:                                             # message/stream, tasks/resubscribe
        frame = encode_stream_event(event, final=is_final(event))

    match_rest("POST", "/v1/message:send", {}, body)                 # v0.3 HTTP+JSON, ProtoJSON bodies
    encode_rest_result(operation, result)

The client direction runs the other way, so a v1.0 client can call a v0.3 agent::

    card = card_from_v03(card_json) if is_v03_card(card_json) else ...   # interfaces at version "0.3"
    method, params = encode_request(operation, request)              # a v1.0 request Struct
    response = decode_result(operation, result_json)                 # the v1.0 response Struct
    event = decode_event(event_result_json)                          # a v1.0 StreamResponse
    error = decode_error(error_json)                                 # the A2AError of its code

    verb, path, body, query = encode_rest_request(operation, request)    # v0.3 HTTP+JSON, under /v1
    decode_rest_result(operation, body); decode_rest_event(data); rest_error(operation, status, json)

Where v0.3 and v1.0 do not map one to one, this codec decides as follows:

* ``blocking`` absent means *not* blocking (``returnImmediately: true``); pass
  ``blocking_when_absent=True`` to :func:`decode_request` / :func:`match_rest` to treat it as blocking,
  which is what the v0.3 SDK servers did (a2a-python 0.3, a2a-js, and a2a-sdk 1.x's compat layer).
* ``historyLength: 0`` means "no limit", as in the v0.3 proto and the v0.3 SDKs, so it decodes to unset.
* A v1.0 ``Part.data`` that is not a JSON object becomes ``{"value": x}`` with ``"data_part_compat": true``
  in the part's metadata (the convention of a2a-sdk's compat layer); decoding undoes it, so it round-trips.
* ``mediaType``/``filename`` on text and data parts, and ``ROLE_UNSPECIFIED``, have no v0.3 form: they
  are dropped (an unspecified role is sent as ``agent``). ``TASK_STATE_UNSPECIFIED`` is ``unknown``.
* v0.3 push ``authentication.schemes`` is a list, v1.0 has one ``scheme``: the first one is kept.
  A v0.3 push config set without an ``id`` gets the task id as its id, and a get without
  ``pushNotificationConfigId`` reads that one (the v0.3 SDK convention of one default config per task).
* ``metadata`` on ``tasks/get``, ``tasks/resubscribe`` and the push-config methods has no v1.0 field and is
  ignored. The v0.3 REST ``Message`` has no ``referenceTaskIds``.
* Errors keep their codes except the v1.0-only ones (-32008 ExtensionSupportRequired, -32009
  VersionNotSupported), which v0.3 clients get as -32600 InvalidRequest; ``data`` is a small object naming
  the v1.0 ``reason``, so nothing is lost. -32007 keeps its code (v0.3 calls it
  AuthenticatedExtendedCardNotConfiguredError).
* Stream events carry v0.3 ``final`` on status updates; :func:`is_final` says when it is true.
* ``GET /v1/card`` returns the v0.3 JSON agent card (what the v0.3 SDK servers returned), not ProtoJSON.
* REST ``fileWithBytes`` is the file content, base64 once, as the v0.3 proto says (a2a-python's v0.3
  gRPC/REST code stores the base64 *text* there, so its JSON holds base64 twice; that is not followed).
* A v0.3 timestamp without a UTC offset is read as UTC.

And in the client direction:

* ``blocking`` is always sent: ``not returnImmediately``.
* ``historyLength: 0`` (v1.0: no history) cannot be said in v0.3, where 0 means "no limit": it is left out.
  ``tenant`` and the paging of push-config lists are left out too. ListTasks has no v0.3 form: encoding it
  raises UnsupportedOperationError.
* A push config read without an ``id`` gets the task id (the default config of the v0.3 SDKs).
* A v0.3 card's interfaces get its ``protocolVersion`` as Major.Minor (``"0.3"``). v1.0 OAuthFlows is a
  oneof: of several v0.3 flows the first of authorizationCode, clientCredentials, implicit, password is
  kept. ``stateTransitionHistory`` has no v1.0 member.
* The v0.3 SDK servers' REST errors are only ``{"message": ...}`` with an HTTP status (a2a-python 0.3's
  table): :func:`rest_error` maps the status back to the error class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from urllib.parse import quote

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from skillwire.errors import (
    ERRORS_BY_CODE,
    A2AError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidAgentResponseError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from skillwire.protocol import models as m
from skillwire.protocol.operations import Operation
from skillwire.protocol.states import INTERRUPTED_STATES, TERMINAL_STATES, TaskState
from skillwire.wire.jsonrpc import field_error
from skillwire.wire.protojson import Decoder

__all__ = [
    "DATA_PART_COMPAT",
    "METHODS",
    "PROTOCOL_VERSION",
    "card_from_v03",
    "decode_error",
    "decode_event",
    "decode_request",
    "decode_rest_event",
    "decode_rest_result",
    "decode_result",
    "encode_request",
    "encode_rest_request",
    "encode_rest_result",
    "encode_rest_stream_event",
    "encode_result",
    "encode_stream_event",
    "error_code",
    "error_data",
    "is_final",
    "is_v03_card",
    "match_rest",
    "rest_error",
    "v03_card",
    "v03_card_fields",
]

PROTOCOL_VERSION = "0.3.0"

Json = dict[str, Any]
NonEmpty = Annotated[str, Meta(min_length=1)]
HistoryLength = Annotated[int, Meta(ge=0)]

#: Metadata key marking a data part whose v1.0 value was not an object (wrapped as ``{"value": x}``).
DATA_PART_COMPAT = "data_part_compat"

_O = Operation
_S = TaskState

# -- v0.3 JSON-RPC shapes (types.ts at tag v0.3.0) ---------------------------------------------------------


class _V03(Struct, rename="camel", omit_defaults=True, kw_only=True):
    """A v0.3 JSON object: camelCase names, absent optional members omitted, unknown members ignored."""


class _TextPart(_V03, tag="text", tag_field="kind", kw_only=True):
    text: str
    metadata: Json | None = None


class _FileContent(_V03, kw_only=True):
    name: str | None = None
    mime_type: str | None = None
    content: bytes | None = msgspec.field(default=None, name="bytes")
    uri: str | None = None

    def __post_init__(self) -> None:
        if (self.content is None) == (self.uri is None):
            raise ValueError("a file must have exactly one of `bytes` or `uri`")


class _FilePart(_V03, tag="file", tag_field="kind", kw_only=True):
    file: _FileContent
    metadata: Json | None = None


class _DataPart(_V03, tag="data", tag_field="kind", kw_only=True):
    data: Json
    metadata: Json | None = None


_Part = _TextPart | _FilePart | _DataPart
_Parts = Annotated[list[_Part], Meta(min_length=1)]
_Role = Literal["user", "agent"]
_State = Literal[
    "submitted",
    "working",
    "input-required",
    "completed",
    "canceled",
    "failed",
    "rejected",
    "auth-required",
    "unknown",
]


class _Message(_V03, tag="message", tag_field="kind", kw_only=True):
    message_id: NonEmpty
    context_id: str | None = None
    task_id: str | None = None
    role: _Role
    parts: _Parts
    metadata: Json | None = None
    extensions: list[str] | None = None
    reference_task_ids: list[str] | None = None


class _TaskStatus(_V03, kw_only=True):
    state: _State
    message: _Message | None = None
    timestamp: datetime | None = None


class _Artifact(_V03, kw_only=True):
    artifact_id: NonEmpty
    name: str | None = None
    description: str | None = None
    parts: _Parts
    metadata: Json | None = None
    extensions: list[str] | None = None


class _Task(_V03, tag="task", tag_field="kind", kw_only=True):
    id: str
    context_id: str
    status: _TaskStatus
    artifacts: list[_Artifact] | None = None
    history: list[_Message] | None = None
    metadata: Json | None = None


class _StatusUpdate(_V03, tag="status-update", tag_field="kind", kw_only=True):
    task_id: str
    context_id: str
    status: _TaskStatus
    final: bool
    metadata: Json | None = None


class _ArtifactUpdate(_V03, tag="artifact-update", tag_field="kind", kw_only=True):
    task_id: str
    context_id: str
    artifact: _Artifact
    append: bool | None = None
    last_chunk: bool | None = None
    metadata: Json | None = None


_Event = _Task | _Message | _StatusUpdate | _ArtifactUpdate


class _PushAuth(_V03, kw_only=True):
    schemes: list[str]
    credentials: str | None = None

    def __post_init__(self) -> None:
        if not self.schemes and self.credentials:
            raise ValueError("`schemes` must name the scheme of the `credentials`")


class _PushConfig(_V03, kw_only=True):
    id: str | None = None
    url: NonEmpty
    token: str | None = None
    authentication: _PushAuth | None = None


class _TaskPushConfig(_V03, kw_only=True):
    task_id: NonEmpty
    push_notification_config: _PushConfig


class _SendConfig(_V03, kw_only=True):
    accepted_output_modes: list[str] | None = None
    history_length: HistoryLength | None = None
    push_notification_config: _PushConfig | None = None
    blocking: bool | None = None


class _SendParams(_V03, kw_only=True):
    message: _Message
    configuration: _SendConfig | None = None
    metadata: Json | None = None


class _TaskIdParams(_V03, kw_only=True):
    id: NonEmpty
    metadata: Json | None = None


class _TaskQueryParams(_TaskIdParams, kw_only=True):
    history_length: HistoryLength | None = None


class _GetPushParams(_TaskIdParams, kw_only=True):
    push_notification_config_id: str | None = None


class _DeletePushParams(_TaskIdParams, kw_only=True):
    push_notification_config_id: NonEmpty


# -- v0.3 -> v1.0 ------------------------------------------------------------------------------------------

_STATE_OUT: dict[TaskState, _State] = {
    _S.SUBMITTED: "submitted",
    _S.WORKING: "working",
    _S.INPUT_REQUIRED: "input-required",
    _S.COMPLETED: "completed",
    _S.CANCELED: "canceled",
    _S.FAILED: "failed",
    _S.REJECTED: "rejected",
    _S.AUTH_REQUIRED: "auth-required",
    _S.UNSPECIFIED: "unknown",
}
_STATE_IN: dict[str, TaskState] = {v: k for k, v in _STATE_OUT.items()}


def _unwrap_data(data: Json, metadata: Json | None) -> tuple[Any, Json | None]:
    """Undo the ``{"value": x}`` wrapping of a non-object data value (see DATA_PART_COMPAT)."""
    if metadata is None or metadata.get(DATA_PART_COMPAT) is not True or data.keys() != {"value"}:
        return data, metadata
    rest = {k: v for k, v in metadata.items() if k != DATA_PART_COMPAT}
    return data["value"], rest or None


def _part_in(part: _Part) -> m.Part:
    if isinstance(part, _TextPart):
        return m.Part(text=part.text, metadata=part.metadata)
    if isinstance(part, _FilePart):
        f = part.file
        name, media_type = f.name or "", f.mime_type or ""
        if f.content is not None:
            return m.Part(raw=f.content, filename=name, media_type=media_type, metadata=part.metadata)
        return m.Part(url=f.uri or "", filename=name, media_type=media_type, metadata=part.metadata)
    data, metadata = _unwrap_data(part.data, part.metadata)
    return m.Part(data=data, metadata=metadata)


def _message_in(msg: _Message) -> m.Message:
    return m.Message(
        message_id=msg.message_id,
        context_id=msg.context_id or "",
        task_id=msg.task_id or "",
        role=m.Role.USER if msg.role == "user" else m.Role.AGENT,
        parts=[_part_in(p) for p in msg.parts],
        metadata=msg.metadata,
        extensions=msg.extensions or [],
        reference_task_ids=msg.reference_task_ids or [],
    )


def _utc(ts: datetime | None) -> datetime | None:
    # v0.3 said only "ISO 8601"; a timestamp without an offset is taken as UTC (ProtoJSON needs one).
    return ts.replace(tzinfo=UTC) if ts is not None and ts.tzinfo is None else ts


def _status_in(status: _TaskStatus) -> m.TaskStatus:
    return m.TaskStatus(
        state=_STATE_IN[status.state],
        message=_message_in(status.message) if status.message is not None else None,
        timestamp=_utc(status.timestamp),
    )


def _artifact_in(a: _Artifact) -> m.Artifact:
    return m.Artifact(
        artifact_id=a.artifact_id,
        name=a.name or "",
        description=a.description or "",
        parts=[_part_in(p) for p in a.parts],
        metadata=a.metadata,
        extensions=a.extensions or [],
    )


def _task_in(task: _Task) -> m.Task:
    return m.Task(
        id=task.id,
        context_id=task.context_id,
        status=_status_in(task.status),
        artifacts=[_artifact_in(a) for a in task.artifacts or ()],
        history=[_message_in(h) for h in task.history or ()],
        metadata=task.metadata,
    )


def _push_in(cfg: _PushConfig, task_id: str) -> m.TaskPushNotificationConfig:
    auth = cfg.authentication
    return m.TaskPushNotificationConfig(
        id=cfg.id or "",
        task_id=task_id,
        url=cfg.url,
        token=cfg.token or "",
        authentication=(
            m.AuthenticationInfo(scheme=auth.schemes[0], credentials=auth.credentials or "")
            if auth is not None and auth.schemes
            else None
        ),
    )


def _send_in(p: _SendParams, blocking_when_absent: bool) -> m.SendMessageRequest:
    c = p.configuration or _SendConfig()
    blocking = blocking_when_absent if c.blocking is None else c.blocking
    push = c.push_notification_config
    return m.SendMessageRequest(
        message=_message_in(p.message),
        configuration=m.SendMessageConfiguration(
            accepted_output_modes=c.accepted_output_modes or [],
            task_push_notification_config=_push_in(push, "") if push is not None else None,
            history_length=c.history_length or None,  # 0 is "no limit" in v0.3
            return_immediately=not blocking,
        ),
        metadata=p.metadata,
    )


def _set_push_in(p: _TaskPushConfig, _: bool) -> m.TaskPushNotificationConfig:
    cfg = _push_in(p.push_notification_config, p.task_id)
    cfg.id = cfg.id or p.task_id
    return cfg


@dataclass(frozen=True, slots=True)
class _Method:
    operation: Operation
    decoder: msgspec.json.Decoder[Any] | None
    convert: Callable[[Any, bool], Struct]


def _method(
    operation: Operation, params: type[Struct] | None, convert: Callable[[Any, bool], Struct]
) -> _Method:
    return _Method(operation, msgspec.json.Decoder(params) if params is not None else None, convert)


_METHODS: dict[str, _Method] = {
    "message/send": _method(_O.SEND_MESSAGE, _SendParams, _send_in),
    "message/stream": _method(_O.SEND_STREAMING_MESSAGE, _SendParams, _send_in),
    "tasks/get": _method(
        _O.GET_TASK,
        _TaskQueryParams,
        lambda p, _: m.GetTaskRequest(id=p.id, history_length=p.history_length or None),
    ),
    "tasks/cancel": _method(
        _O.CANCEL_TASK, _TaskIdParams, lambda p, _: m.CancelTaskRequest(id=p.id, metadata=p.metadata)
    ),
    "tasks/resubscribe": _method(
        _O.SUBSCRIBE_TO_TASK, _TaskIdParams, lambda p, _: m.SubscribeToTaskRequest(id=p.id)
    ),
    "tasks/pushNotificationConfig/set": _method(_O.CREATE_PUSH_CONFIG, _TaskPushConfig, _set_push_in),
    "tasks/pushNotificationConfig/get": _method(
        _O.GET_PUSH_CONFIG,
        _GetPushParams,
        lambda p, _: m.GetTaskPushNotificationConfigRequest(
            task_id=p.id, id=p.push_notification_config_id or p.id
        ),
    ),
    "tasks/pushNotificationConfig/list": _method(
        _O.LIST_PUSH_CONFIGS,
        _TaskIdParams,
        lambda p, _: m.ListTaskPushNotificationConfigsRequest(task_id=p.id),
    ),
    "tasks/pushNotificationConfig/delete": _method(
        _O.DELETE_PUSH_CONFIG,
        _DeletePushParams,
        lambda p, _: m.DeleteTaskPushNotificationConfigRequest(
            task_id=p.id, id=p.push_notification_config_id
        ),
    ),
    # v0.3 says this method has no params; whatever is sent is ignored.
    "agent/getAuthenticatedExtendedCard": _method(
        _O.GET_EXTENDED_AGENT_CARD, None, lambda _p, _b: m.GetExtendedAgentCardRequest()
    ),
}

#: v0.3 JSON-RPC method name -> the v1.0 operation that serves it.
METHODS: Mapping[str, Operation] = {name: method.operation for name, method in _METHODS.items()}


def _invalid(exc: msgspec.ValidationError, root: str) -> InvalidParamsError:
    """msgspec's "reason - at `$.a.b`" as an InvalidParamsError naming ``root.a.b``."""
    path, reason = field_error(exc, root)
    return InvalidParamsError(f"Invalid params: {path}: {reason}", field_violations=[(path, reason)])


def decode_request(
    method: str, params: bytes | msgspec.Raw | None, *, blocking_when_absent: bool = False
) -> tuple[Operation, Struct]:
    """A v0.3 JSON-RPC call as the v1.0 operation and request Struct that serve it.

    >>> decode_request("tasks/get", b'{"id": "t1", "historyLength": 2}')
    (<Operation.GET_TASK: 'GetTask'>, GetTaskRequest(tenant='', id='t1', history_length=2))

    Raises MethodNotFoundError for a method v0.3 does not have and InvalidParamsError naming the first bad
    field (``params.message.parts[0].kind``).
    """
    entry = _METHODS.get(method)
    if entry is None:
        raise MethodNotFoundError(f"Method not found: {method[:100]}")
    if entry.decoder is None:
        return entry.operation, entry.convert(None, blocking_when_absent)
    try:
        decoded = entry.decoder.decode(b"{}" if params is None else params)
    except msgspec.ValidationError as exc:
        raise _invalid(exc, "params") from None
    except (msgspec.DecodeError, RecursionError):
        raise JSONParseError("Invalid JSON payload: `params` is not JSON") from None
    return entry.operation, entry.convert(decoded, blocking_when_absent)


# -- v1.0 -> v0.3 ------------------------------------------------------------------------------------------


def _wrap_data(data: Any, metadata: Json | None) -> tuple[Json, Json | None]:
    if isinstance(data, dict):
        return data, metadata
    return {"value": data}, {**(metadata or {}), DATA_PART_COMPAT: True}


def _part_out(part: m.Part) -> _Part:
    if isinstance(part.text, str):
        return _TextPart(text=part.text, metadata=part.metadata)
    if isinstance(part.raw, bytes):
        file = _FileContent(name=part.filename or None, mime_type=part.media_type or None, content=part.raw)
        return _FilePart(file=file, metadata=part.metadata)
    if isinstance(part.url, str):
        file = _FileContent(name=part.filename or None, mime_type=part.media_type or None, uri=part.url)
        return _FilePart(file=file, metadata=part.metadata)
    data, metadata = _wrap_data(part.data, part.metadata)
    return _DataPart(data=data, metadata=metadata)


def _message_out(msg: m.Message) -> _Message:
    return _Message(
        message_id=msg.message_id,
        context_id=msg.context_id or None,
        task_id=msg.task_id or None,
        role="user" if msg.role is m.Role.USER else "agent",
        parts=[_part_out(p) for p in msg.parts],
        metadata=msg.metadata,
        extensions=msg.extensions or None,
        reference_task_ids=msg.reference_task_ids or None,
    )


def _status_out(status: m.TaskStatus) -> _TaskStatus:
    return _TaskStatus(
        state=_STATE_OUT[status.state],
        message=_message_out(status.message) if status.message is not None else None,
        timestamp=status.timestamp,
    )


def _artifact_out(a: m.Artifact) -> _Artifact:
    return _Artifact(
        artifact_id=a.artifact_id,
        name=a.name or None,
        description=a.description or None,
        parts=[_part_out(p) for p in a.parts],
        metadata=a.metadata,
        extensions=a.extensions or None,
    )


def _task_out(task: m.Task) -> _Task:
    return _Task(
        id=task.id,
        context_id=task.context_id,
        status=_status_out(task.status),
        artifacts=[_artifact_out(a) for a in task.artifacts] or None,
        history=[_message_out(h) for h in task.history] or None,
        metadata=task.metadata,
    )


def _push_out(cfg: m.TaskPushNotificationConfig) -> _TaskPushConfig:
    auth = cfg.authentication
    return _TaskPushConfig(
        task_id=cfg.task_id,
        push_notification_config=_PushConfig(
            id=cfg.id or None,
            url=cfg.url,
            token=cfg.token or None,
            authentication=(
                _PushAuth(schemes=[auth.scheme], credentials=auth.credentials or None)
                if auth is not None
                else None
            ),
        ),
    )


def _event_out(event: m.StreamResponse, final: bool) -> _Event:
    if event.task is not None:
        return _task_out(event.task)
    if event.message is not None:
        return _message_out(event.message)
    if event.status_update is not None:
        su = event.status_update
        return _StatusUpdate(
            task_id=su.task_id,
            context_id=su.context_id,
            status=_status_out(su.status),
            final=final,
            metadata=su.metadata,
        )
    if event.artifact_update is not None:
        au = event.artifact_update
        return _ArtifactUpdate(
            task_id=au.task_id,
            context_id=au.context_id,
            artifact=_artifact_out(au.artifact),
            append=au.append or None,
            last_chunk=au.last_chunk or None,
            metadata=au.metadata,
        )
    raise ValueError("a StreamResponse must have one member set")


def _one_of(result: Any) -> m.Task | m.Message:
    """A SendMessage result (the wrapper, or a bare Task or Message) as the Task or Message itself."""
    if isinstance(result, m.SendMessageResponse):
        inner = result.task if result.task is not None else result.message
        if inner is None:
            raise ValueError("a SendMessageResponse must have `task` or `message`")
        return inner
    if isinstance(result, m.Task | m.Message):
        return result
    raise TypeError(f"not a SendMessage result: {type(result).__name__}")


_encoder = msgspec.json.Encoder()


def encode_result(operation: Operation, result: Any) -> bytes:
    """The v0.3 JSON-RPC ``result`` value for a v1.0 handler's result.

    SendMessage gives the bare Task or Message (``kind``-tagged, not wrapped); GetTask and CancelTask the
    Task; the push-config operations v0.3 TaskPushNotificationConfig objects (list: an array, delete:
    ``null``); GetExtendedAgentCard the v0.3 card (an AgentCard, or a dict already made by
    :func:`v03_card`). Streaming operations are encoded event by event with :func:`encode_stream_event`.
    """
    if operation is _O.SEND_MESSAGE:
        inner = _one_of(result)
        return _encoder.encode(_task_out(inner) if isinstance(inner, m.Task) else _message_out(inner))
    if operation in (_O.GET_TASK, _O.CANCEL_TASK):
        return _encoder.encode(_task_out(result))
    if operation in (_O.CREATE_PUSH_CONFIG, _O.GET_PUSH_CONFIG):
        return _encoder.encode(_push_out(result))
    if operation is _O.LIST_PUSH_CONFIGS:
        configs = result.configs if isinstance(result, m.ListTaskPushNotificationConfigsResponse) else result
        return _encoder.encode([_push_out(c) for c in configs])
    if operation is _O.DELETE_PUSH_CONFIG:
        return b"null"
    if operation is _O.GET_EXTENDED_AGENT_CARD:
        return _encoder.encode(result if isinstance(result, dict) else v03_card(result))
    raise ValueError(f"{operation.value} has no v0.3 JSON-RPC result (stream it, or it is v1.0-only)")


def is_final(event: m.StreamResponse) -> bool:
    """Whether ``event`` ends a v0.3 stream: a Message, or a status update to a terminal or interrupted
    state. The binding sets ``final: true`` on it (only status updates carry the flag in v0.3)."""
    if event.message is not None:
        return True
    su = event.status_update
    return su is not None and (su.status.state in TERMINAL_STATES or su.status.state in INTERRUPTED_STATES)


def encode_stream_event(event: m.StreamResponse, *, final: bool) -> bytes:
    """The v0.3 ``result`` of one SSE event: a ``kind``-tagged Task, Message, ``status-update`` (with
    ``final``) or ``artifact-update``.

    A completed status update, for instance, becomes::

        {"kind":"status-update","taskId":"t1","contextId":"c1","status":{"state":"completed"},"final":true}
    """
    return _encoder.encode(_event_out(event, final))


_event_decoder: msgspec.json.Decoder[_Event] = msgspec.json.Decoder(_Event)


def decode_event(data: bytes) -> m.StreamResponse:
    """A ``kind``-tagged v0.3 object (task, message, status-update, artifact-update) as a v1.0
    StreamResponse; what a v0.3 server returns from message/send and in stream events.

    Raises InvalidParamsError naming the bad field (under ``result``).
    """
    try:
        obj = _event_decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise _invalid(exc, "result") from None
    except (msgspec.DecodeError, RecursionError):
        raise JSONParseError() from None
    if isinstance(obj, _Task):
        return m.StreamResponse(task=_task_in(obj))
    if isinstance(obj, _Message):
        return m.StreamResponse(message=_message_in(obj))
    if isinstance(obj, _StatusUpdate):
        return m.StreamResponse(
            status_update=m.TaskStatusUpdateEvent(
                task_id=obj.task_id,
                context_id=obj.context_id,
                status=_status_in(obj.status),
                metadata=obj.metadata,
            )
        )
    return m.StreamResponse(
        artifact_update=m.TaskArtifactUpdateEvent(
            task_id=obj.task_id,
            context_id=obj.context_id,
            artifact=_artifact_in(obj.artifact),
            append=bool(obj.append),
            last_chunk=bool(obj.last_chunk),
            metadata=obj.metadata,
        )
    )


# -- Errors -------------------------------------------------------------------------------------------------

#: A2A error codes that exist only in v1.0 (-32008 ExtensionSupportRequired, -32009 VersionNotSupported, and
#: any later ones): v0.3 has no code for them, so they travel as -32600 InvalidRequest.
_V10_ONLY_CODES = range(-32099, -32007)


def error_code(error: A2AError) -> int:
    """The v0.3 JSON-RPC code of ``error``: the v1.0 code, or -32600 for a v1.0-only error."""
    return InvalidRequestError.code if error.code in _V10_ONLY_CODES else error.code


def error_data(error: A2AError) -> dict[str, Any]:
    """The v0.3 ``error.data``: free-form in v0.3, here ``{"reason": ...}`` plus the ErrorInfo metadata
    and the field violations when there are any (v1.0 sends these as typed ``@type`` details)."""
    data: dict[str, Any] = {"reason": error.reason}
    if error.metadata:
        data["metadata"] = dict(error.metadata)
    if error.field_violations:
        data["fieldViolations"] = [{"field": f, "description": d} for f, d in error.field_violations]
    return data


# -- Agent card ---------------------------------------------------------------------------------------------

_SCHEME_TYPES = {
    "apiKeySecurityScheme": "apiKey",
    "httpAuthSecurityScheme": "http",
    "oauth2SecurityScheme": "oauth2",
    "openIdConnectSecurityScheme": "openIdConnect",
    "mtlsSecurityScheme": "mutualTLS",
}
#: v1.0 member -> v0.3 member, per scheme type (members not listed have no v0.3 form).
_SCHEME_FIELDS = {
    "apiKey": {"description": "description", "location": "in", "name": "name"},
    "http": {"description": "description", "scheme": "scheme", "bearerFormat": "bearerFormat"},
    "oauth2": {"description": "description", "oauth2MetadataUrl": "oauth2MetadataUrl"},
    "openIdConnect": {"description": "description", "openIdConnectUrl": "openIdConnectUrl"},
    "mutualTLS": {"description": "description"},
}
# v0.3 has no deviceCode flow and no pkceRequired.
_FLOWS = ("authorizationCode", "clientCredentials", "implicit", "password")
_FLOW_FIELDS = ("authorizationUrl", "tokenUrl", "refreshUrl", "scopes")


def _security_scheme_out(scheme: Json, *, merged: bool = False) -> Json | None:
    """A v1.0 SecurityScheme (a oneof wrapper) in the v0.3 ``type``-tagged shape; None if unknown.

    ``merged``: for a card that carries both shapes, keep the v1.0 OAuth flows as they are (a v1.0
    ``flows`` object is a valid v0.3 one whose extra members v0.3 readers skip), so a v1.0 reader that
    rebuilds the scheme from its v0.3 members (a2a-sdk's card parser does) loses neither ``pkceRequired``
    nor ``deviceCode``.
    """
    for wrapper, kind in _SCHEME_TYPES.items():
        body = scheme.get(wrapper)
        if not isinstance(body, dict):
            continue
        out: Json = {"type": kind}
        for old, new in _SCHEME_FIELDS[kind].items():
            if body.get(old):
                out[new] = body[old]
        if kind == "oauth2":
            flows = body.get("flows") or {}
            if merged:
                out["flows"] = flows
                return out
            out["flows"] = {
                name: {"scopes": {}} | {k: flows[name][k] for k in _FLOW_FIELDS if flows[name].get(k)}
                for name in _FLOWS
                if isinstance(flows.get(name), dict)
            }
        return out
    return None


def _requirements_out(reqs: list[m.SecurityRequirement]) -> list[dict[str, list[str]]]:
    return [{name: list(scopes.list) for name, scopes in req.schemes.items()} for req in reqs]


def _interfaces_out(main_url: str, main_transport: str, others: list[tuple[str, str]]) -> list[Json]:
    # v0.3 section 5.6.2: additionalInterfaces SHOULD repeat the main url and transport.
    pairs = [(main_url, main_transport)]
    pairs += [p for p in others if p not in pairs]
    return [{"url": url, "transport": transport} for url, transport in pairs]


def v03_card_fields(
    card: m.AgentCard, *, jsonrpc_url: str, interfaces: list[tuple[str, str]]
) -> dict[str, Any]:
    """The v0.3 members to merge into the v1.0 card JSON, so one card serves both versions.

    ``interfaces`` are the other (url, transport) pairs a v0.3 client may use (``("…/", "HTTP+JSON")``).
    Members both versions name (``securitySchemes``, ``skills``) come back merged, carrying the v1.0 and
    the v0.3 shape at once, so ``card_json.update(v03_card_fields(...))`` is right::

        {"protocolVersion": "0.3.0", "url": jsonrpc_url, "preferredTransport": "JSONRPC",
         "additionalInterfaces": [{"url": jsonrpc_url, "transport": "JSONRPC"}, ...],
         "supportsAuthenticatedExtendedCard": false}
    """
    fields: dict[str, Any] = {
        "protocolVersion": PROTOCOL_VERSION,
        "url": jsonrpc_url,
        "preferredTransport": "JSONRPC",
        "additionalInterfaces": _interfaces_out(jsonrpc_url, "JSONRPC", interfaces),
    }
    if card.capabilities.extended_agent_card is not None:
        fields["supportsAuthenticatedExtendedCard"] = card.capabilities.extended_agent_card
    if card.security_schemes:
        fields["securitySchemes"] = {
            name: scheme | (_security_scheme_out(scheme, merged=True) or {})
            for name, scheme in card.security_schemes.items()
        }
    if card.security_requirements:
        fields["security"] = _requirements_out(card.security_requirements)
    if any(skill.security_requirements for skill in card.skills):
        fields["skills"] = [
            m.to_builtins(skill) | {"security": _requirements_out(skill.security_requirements)}
            if skill.security_requirements
            else m.to_builtins(skill)
            for skill in card.skills
        ]
    return fields


def _endpoints(
    card: m.AgentCard, jsonrpc_url: str | None, interfaces: list[tuple[str, str]] | None
) -> tuple[str, str, list[tuple[str, str]]]:
    """The main (url, transport) and the others, given or read from the card's 0.3 interfaces."""
    if jsonrpc_url is not None:
        return jsonrpc_url, "JSONRPC", list(interfaces or ())
    legacy = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.")]
    pool = legacy or card.supported_interfaces
    if not pool:
        raise ValueError("the card lists no interface for a v0.3 client")
    main = next((i for i in pool if i.protocol_binding == "JSONRPC"), pool[0])
    others = [(i.url, i.protocol_binding) for i in pool if i is not main]
    return main.url, main.protocol_binding, others if interfaces is None else list(interfaces)


def _skill_out(skill: m.AgentSkill) -> Json:
    out: Json = m.to_builtins(skill)
    out.pop("securityRequirements", None)
    if skill.security_requirements:
        out["security"] = _requirements_out(skill.security_requirements)
    return out


def v03_card(
    card: m.AgentCard, *, jsonrpc_url: str | None = None, interfaces: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """``card`` as a v0.3 AgentCard: the result of ``agent/getAuthenticatedExtendedCard`` and
    ``GET /v1/card``.

    Without ``jsonrpc_url`` the endpoints come from the card's ``supportedInterfaces`` (those with a 0.x
    ``protocolVersion`` if any, JSON-RPC first).
    """
    url, transport, others = _endpoints(card, jsonrpc_url, interfaces)
    caps = card.capabilities
    out: dict[str, Any] = {
        "protocolVersion": PROTOCOL_VERSION,
        "name": card.name,
        "description": card.description,
        "url": url,
        "preferredTransport": transport,
        "additionalInterfaces": _interfaces_out(url, transport, others),
    }
    if card.icon_url:
        out["iconUrl"] = card.icon_url
    if card.provider is not None:
        out["provider"] = m.to_builtins(card.provider)
    out["version"] = card.version
    if card.documentation_url:
        out["documentationUrl"] = card.documentation_url
    out["capabilities"] = {
        k: v
        for k, v in (
            ("streaming", caps.streaming),
            ("pushNotifications", caps.push_notifications),
            ("extensions", m.to_builtins(caps.extensions) or None),
        )
        if v is not None
    }
    schemes = {n: s for n, s in ((n, _security_scheme_out(s)) for n, s in card.security_schemes.items()) if s}
    if schemes:
        out["securitySchemes"] = schemes
    if card.security_requirements:
        out["security"] = _requirements_out(card.security_requirements)
    out["defaultInputModes"] = list(card.default_input_modes)
    out["defaultOutputModes"] = list(card.default_output_modes)
    out["skills"] = [_skill_out(s) for s in card.skills]
    if caps.extended_agent_card is not None:
        out["supportsAuthenticatedExtendedCard"] = caps.extended_agent_card
    if card.signatures:
        out["signatures"] = m.to_builtins(card.signatures)
    return out


# -- v0.3 HTTP+JSON (REST): ProtoJSON of the v0.3 gRPC messages (package a2a.v1) ----------------------------


class _Pb(Struct, rename="camel", omit_defaults=True, kw_only=True):
    """ProtoJSON of a v0.3 ``a2a.v1`` message: default values omitted, proto names accepted on input."""


class _PbFile(_Pb, kw_only=True):
    file_with_uri: str | UnsetType = UNSET
    file_with_bytes: bytes | UnsetType = UNSET
    mime_type: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if (self.file_with_uri is UNSET) == (self.file_with_bytes is UNSET):
            raise ValueError("a file must have exactly one of `fileWithUri` or `fileWithBytes`")


class _PbData(_Pb, kw_only=True):
    data: Json | None = None


class _PbPart(_Pb, kw_only=True):
    text: str | UnsetType = UNSET
    file: _PbFile | None = None
    data: _PbData | None = None
    metadata: Json | None = None

    def __post_init__(self) -> None:
        if (self.text is not UNSET) + (self.file is not None) + (self.data is not None) != 1:
            raise ValueError("a part must have exactly one of `text`, `file` or `data`")


_PB_ROLE_OUT = {m.Role.USER: "ROLE_USER", m.Role.AGENT: "ROLE_AGENT", m.Role.UNSPECIFIED: "ROLE_UNSPECIFIED"}
_PB_ROLE_IN: dict[str | int, m.Role] = {
    **{v: k for k, v in _PB_ROLE_OUT.items()},
    0: m.Role.UNSPECIFIED,
    1: m.Role.USER,
    2: m.Role.AGENT,
}


class _PbMessage(_Pb, kw_only=True):
    message_id: NonEmpty
    context_id: str = ""
    task_id: str = ""
    role: str | int = "ROLE_UNSPECIFIED"
    content: Annotated[list[_PbPart], Meta(min_length=1)]
    metadata: Json | None = None
    extensions: list[str] = []

    def __post_init__(self) -> None:
        if self.role not in _PB_ROLE_IN:
            raise ValueError("`role` must be ROLE_USER or ROLE_AGENT")


class _PbStatus(_Pb, kw_only=True):
    state: str = "TASK_STATE_UNSPECIFIED"
    update: _PbMessage | None = msgspec.field(default=None, name="message")
    timestamp: datetime | None = None


class _PbArtifact(_Pb, kw_only=True):
    artifact_id: str
    name: str = ""
    description: str = ""
    parts: list[_PbPart] = []
    metadata: Json | None = None
    extensions: list[str] = []


class _PbTask(_Pb, kw_only=True):
    id: str = ""
    context_id: str = ""
    status: _PbStatus | None = None
    artifacts: list[_PbArtifact] = []
    history: list[_PbMessage] = []
    metadata: Json | None = None


class _PbStatusUpdate(_Pb, kw_only=True):
    task_id: str = ""
    context_id: str = ""
    status: _PbStatus | None = None
    final: bool = False
    metadata: Json | None = None


class _PbArtifactUpdate(_Pb, kw_only=True):
    task_id: str = ""
    context_id: str = ""
    artifact: _PbArtifact | None = None
    append: bool = False
    last_chunk: bool = False
    metadata: Json | None = None


class _PbSendResponse(_Pb, kw_only=True):
    task: _PbTask | None = None
    msg: _PbMessage | None = msgspec.field(default=None, name="message")


class _PbStreamResponse(_Pb, kw_only=True):
    task: _PbTask | None = None
    msg: _PbMessage | None = msgspec.field(default=None, name="message")
    status_update: _PbStatusUpdate | None = None
    artifact_update: _PbArtifactUpdate | None = None


class _PbAuth(_Pb, kw_only=True):
    schemes: list[str] = []
    credentials: str = ""

    def __post_init__(self) -> None:
        if not self.schemes and self.credentials:
            raise ValueError("`schemes` must name the scheme of the `credentials`")


class _PbPushConfig(_Pb, kw_only=True):
    id: str = ""
    url: NonEmpty
    token: str = ""
    authentication: _PbAuth | None = None


class _PbTaskPushConfig(_Pb, kw_only=True):
    name: str = ""
    push_notification_config: _PbPushConfig | None = None


class _PbListPushResponse(_Pb, kw_only=True):
    configs: list[_PbTaskPushConfig] = []
    next_page_token: str = ""


class _PbSendConfig(_Pb, kw_only=True):
    accepted_output_modes: list[str] = []
    push_notification: _PbPushConfig | None = None
    history_length: HistoryLength = 0
    blocking: bool | None = None


class _PbSendRequest(_Pb, kw_only=True):
    request: _PbMessage = msgspec.field(name="message")
    configuration: _PbSendConfig | None = None
    metadata: Json | None = None


class _PbCreatePushBody(_Pb, kw_only=True):
    """CreateTaskPushNotificationConfigRequest {parent, configId, config}, or its bare ``config``
    (TaskPushNotificationConfig {name, pushNotificationConfig}), which the proto's HTTP rule names."""

    parent: str = ""
    config_id: str = ""
    config: _PbTaskPushConfig | None = None
    name: str = ""
    push_notification_config: _PbPushConfig | None = None


_PB_STATE_OUT: dict[TaskState, str] = {s: s.value for s in TaskState} | {_S.CANCELED: "TASK_STATE_CANCELLED"}

_pb_send_decoder = Decoder(_PbSendRequest)
_pb_create_push_decoder = Decoder(_PbCreatePushBody)


def _pb_part_in(part: _PbPart) -> m.Part:
    if isinstance(part.text, str):
        return m.Part(text=part.text, metadata=part.metadata)
    f = part.file
    if f is not None:
        if isinstance(f.file_with_bytes, bytes):
            return m.Part(
                raw=f.file_with_bytes, filename=f.name, media_type=f.mime_type, metadata=part.metadata
            )
        url = f.file_with_uri if isinstance(f.file_with_uri, str) else ""
        return m.Part(url=url, filename=f.name, media_type=f.mime_type, metadata=part.metadata)
    data, metadata = _unwrap_data((part.data.data if part.data else None) or {}, part.metadata)
    return m.Part(data=data, metadata=metadata)


def _pb_message_in(msg: _PbMessage) -> m.Message:
    return m.Message(
        message_id=msg.message_id,
        context_id=msg.context_id,
        task_id=msg.task_id,
        role=_PB_ROLE_IN[msg.role],
        parts=[_pb_part_in(p) for p in msg.content],
        metadata=msg.metadata,
        extensions=msg.extensions,
    )


def _pb_push_in(cfg: _PbPushConfig, task_id: str, config_id: str) -> m.TaskPushNotificationConfig:
    auth = cfg.authentication
    return m.TaskPushNotificationConfig(
        id=config_id,
        task_id=task_id,
        url=cfg.url,
        token=cfg.token,
        authentication=(
            m.AuthenticationInfo(scheme=auth.schemes[0], credentials=auth.credentials)
            if auth is not None and auth.schemes
            else None
        ),
    )


def _decode_body(decoder: Decoder, body: bytes) -> Any:
    try:
        return decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise _invalid(exc, "body") from None
    except (msgspec.DecodeError, RecursionError):
        raise JSONParseError("Invalid JSON payload: the body is not JSON") from None


def _rest_send(body: bytes, blocking_when_absent: bool) -> m.SendMessageRequest:
    req: _PbSendRequest = _decode_body(_pb_send_decoder, body)
    c = req.configuration or _PbSendConfig()
    blocking = blocking_when_absent if c.blocking is None else c.blocking
    push = c.push_notification
    return m.SendMessageRequest(
        message=_pb_message_in(req.request),
        configuration=m.SendMessageConfiguration(
            accepted_output_modes=c.accepted_output_modes,
            task_push_notification_config=_pb_push_in(push, "", push.id) if push is not None else None,
            history_length=c.history_length or None,  # proto3 int32: 0 is unset, "no limit"
            return_immediately=not blocking,
        ),
        metadata=req.metadata,
    )


def _rest_create_push(task_id: str, body: bytes) -> m.TaskPushNotificationConfig:
    req: _PbCreatePushBody = _decode_body(_pb_create_push_decoder, body)
    inner = req.config or _PbTaskPushConfig(
        name=req.name, push_notification_config=req.push_notification_config
    )
    cfg = inner.push_notification_config
    if cfg is None:
        field = "body.config.pushNotificationConfig"
        raise InvalidParamsError(
            f"Invalid params: {field}: required field is missing",
            field_violations=[(field, "required field is missing")],
        )
    named = inner.name.rpartition("/pushNotificationConfigs/")[2] if inner.name else ""
    return _pb_push_in(cfg, task_id, req.config_id or cfg.id or named or task_id)


def _query_int(query: Mapping[str, list[str]], *names: str) -> int | None:
    for name in names:
        values = query.get(name)
        if values:
            raw = values[0].strip()
            if not (raw.isascii() and raw.isdigit() and len(raw) < 10):
                reason = "must be a non-negative integer"
                raise InvalidParamsError(
                    f"Invalid params: {names[0]}: {reason}", field_violations=[(names[0], reason)]
                )
            return int(raw)
    return None


def _query_str(query: Mapping[str, list[str]], *names: str) -> str:
    for name in names:
        values = query.get(name)
        if values:
            return values[0]
    return ""


_PUSH = "pushNotificationConfigs"


def match_rest(
    method: str,
    path: str,
    query: Mapping[str, list[str]],
    body: bytes,
    *,
    blocking_when_absent: bool = False,
) -> tuple[Operation, Struct] | None:
    """A v0.3 HTTP+JSON request (paths under ``/v1``) as the v1.0 operation and request Struct, or None
    when no v0.3 route matches (the binding answers 404/405). ``path`` is the decoded path.

    >>> match_rest("GET", "/v1/tasks/t1", {"historyLength": ["2"]}, b"")
    (<Operation.GET_TASK: 'GetTask'>, GetTaskRequest(tenant='', id='t1', history_length=2))

    Bodies are ProtoJSON of the v0.3 gRPC messages (camelCase or proto names); a bad body raises
    InvalidParamsError naming the field (``body.message.content``) or JSONParseError.
    """
    if not path.startswith("/v1/"):
        return None
    verb = method.upper()
    segs = path[4:].split("/")
    if len(segs) == 1:
        if verb == "POST" and segs[0] == "message:send":
            return _O.SEND_MESSAGE, _rest_send(body, blocking_when_absent)
        if verb == "POST" and segs[0] == "message:stream":
            return _O.SEND_STREAMING_MESSAGE, _rest_send(body, blocking_when_absent)
        if verb == "GET" and segs[0] == "card":
            return _O.GET_EXTENDED_AGENT_CARD, m.GetExtendedAgentCardRequest()
        return None
    if segs[0] != "tasks" or not segs[1] or len(segs) > 4:
        return None
    task = segs[1]
    if len(segs) == 2:
        if task.endswith(":cancel"):
            # v0.3 CancelTaskRequest carries only the name, which the path already gives: the body is ignored.
            found = verb == "POST" and task[:-7]
            return (_O.CANCEL_TASK, m.CancelTaskRequest(id=task[:-7])) if found else None
        if task.endswith(":subscribe"):
            found = verb in ("GET", "POST") and task[:-10]
            return (_O.SUBSCRIBE_TO_TASK, m.SubscribeToTaskRequest(id=task[:-10])) if found else None
        if verb == "GET":
            history = _query_int(query, "historyLength", "history_length")
            return _O.GET_TASK, m.GetTaskRequest(id=task, history_length=history or None)
        return None
    if segs[2] != _PUSH:
        return None
    if len(segs) == 3:
        if verb == "POST":
            return _O.CREATE_PUSH_CONFIG, _rest_create_push(task, body)
        if verb == "GET":
            return _O.LIST_PUSH_CONFIGS, m.ListTaskPushNotificationConfigsRequest(
                task_id=task,
                page_size=_query_int(query, "pageSize", "page_size") or 0,
                page_token=_query_str(query, "pageToken", "page_token"),
            )
        return None
    config = segs[3]
    if not config:
        return None
    if verb == "GET":
        return _O.GET_PUSH_CONFIG, m.GetTaskPushNotificationConfigRequest(task_id=task, id=config)
    if verb == "DELETE":
        return _O.DELETE_PUSH_CONFIG, m.DeleteTaskPushNotificationConfigRequest(task_id=task, id=config)
    return None


def _pb_part_out(part: m.Part) -> _PbPart:
    if isinstance(part.text, str):
        return _PbPart(text=part.text, metadata=part.metadata)
    if isinstance(part.raw, bytes):
        file = _PbFile(file_with_bytes=part.raw, mime_type=part.media_type, name=part.filename)
        return _PbPart(file=file, metadata=part.metadata)
    if isinstance(part.url, str):
        file = _PbFile(file_with_uri=part.url, mime_type=part.media_type, name=part.filename)
        return _PbPart(file=file, metadata=part.metadata)
    data, metadata = _wrap_data(part.data, part.metadata)
    return _PbPart(data=_PbData(data=data), metadata=metadata)


def _pb_message_out(msg: m.Message) -> _PbMessage:
    return _PbMessage(
        message_id=msg.message_id,
        context_id=msg.context_id,
        task_id=msg.task_id,
        role=_PB_ROLE_OUT[msg.role],
        content=[_pb_part_out(p) for p in msg.parts],
        metadata=msg.metadata,
        extensions=msg.extensions,
    )


def _pb_status_out(status: m.TaskStatus) -> _PbStatus:
    return _PbStatus(
        state=_PB_STATE_OUT[status.state],
        update=_pb_message_out(status.message) if status.message is not None else None,
        timestamp=status.timestamp,
    )


def _pb_artifact_out(a: m.Artifact) -> _PbArtifact:
    return _PbArtifact(
        artifact_id=a.artifact_id,
        name=a.name,
        description=a.description,
        parts=[_pb_part_out(p) for p in a.parts],
        metadata=a.metadata,
        extensions=a.extensions,
    )


def _pb_task_out(task: m.Task) -> _PbTask:
    return _PbTask(
        id=task.id,
        context_id=task.context_id,
        status=_pb_status_out(task.status),
        artifacts=[_pb_artifact_out(a) for a in task.artifacts],
        history=[_pb_message_out(h) for h in task.history],
        metadata=task.metadata,
    )


def _pb_push_out(cfg: m.TaskPushNotificationConfig) -> _PbTaskPushConfig:
    auth = cfg.authentication
    return _PbTaskPushConfig(
        name=f"tasks/{cfg.task_id}/{_PUSH}/{cfg.id}",
        push_notification_config=_PbPushConfig(
            id=cfg.id,
            url=cfg.url,
            token=cfg.token,
            authentication=_PbAuth(schemes=[auth.scheme], credentials=auth.credentials) if auth else None,
        ),
    )


def encode_rest_result(operation: Operation, result: Any) -> bytes:
    """The v0.3 HTTP+JSON response body for a v1.0 handler's result (ProtoJSON of the v0.3 gRPC response).

    SendMessage gives ``{"task": ...}`` or ``{"message": ...}``; GetTask and CancelTask the Task; push configs
    ``{"name": "tasks/{id}/pushNotificationConfigs/{configId}", "pushNotificationConfig": {...}}``; list
    ``{"configs": [...]}``; delete ``{}``; the card the v0.3 JSON AgentCard.
    """
    if operation is _O.SEND_MESSAGE:
        inner = _one_of(result)
        if isinstance(inner, m.Task):
            return _encoder.encode(_PbSendResponse(task=_pb_task_out(inner)))
        return _encoder.encode(_PbSendResponse(msg=_pb_message_out(inner)))
    if operation in (_O.GET_TASK, _O.CANCEL_TASK):
        return _encoder.encode(_pb_task_out(result))
    if operation in (_O.CREATE_PUSH_CONFIG, _O.GET_PUSH_CONFIG):
        return _encoder.encode(_pb_push_out(result))
    if operation is _O.LIST_PUSH_CONFIGS:
        if isinstance(result, m.ListTaskPushNotificationConfigsResponse):
            configs, token = result.configs, result.next_page_token
        else:
            configs, token = result, ""
        return _encoder.encode(
            _PbListPushResponse(configs=[_pb_push_out(c) for c in configs], next_page_token=token)
        )
    if operation is _O.DELETE_PUSH_CONFIG:
        return b"{}"
    if operation is _O.GET_EXTENDED_AGENT_CARD:
        return _encoder.encode(result if isinstance(result, dict) else v03_card(result))
    raise ValueError(f"{operation.value} has no v0.3 REST result (stream it, or it is v1.0-only)")


def encode_rest_stream_event(event: m.StreamResponse, *, final: bool) -> bytes:
    """The ``data`` of one v0.3 REST SSE event: ProtoJSON StreamResponse ``{"task"|"message"|"statusUpdate"|
    "artifactUpdate": ...}``; ``final`` goes on status updates (pass :func:`is_final`)."""
    if event.task is not None:
        out = _PbStreamResponse(task=_pb_task_out(event.task))
    elif event.message is not None:
        out = _PbStreamResponse(msg=_pb_message_out(event.message))
    elif event.status_update is not None:
        su = event.status_update
        out = _PbStreamResponse(
            status_update=_PbStatusUpdate(
                task_id=su.task_id,
                context_id=su.context_id,
                status=_pb_status_out(su.status),
                final=final,
                metadata=su.metadata,
            )
        )
    elif event.artifact_update is not None:
        au = event.artifact_update
        out = _PbStreamResponse(
            artifact_update=_PbArtifactUpdate(
                task_id=au.task_id,
                context_id=au.context_id,
                artifact=_pb_artifact_out(au.artifact),
                append=au.append,
                last_chunk=au.last_chunk,
                metadata=au.metadata,
            )
        )
    else:
        raise ValueError("a StreamResponse must have one member set")
    return _encoder.encode(out)


# -- The client direction: v1.0 requests out, v0.3 results in ----------------------------------------------

_NAMES: dict[Operation, str] = {operation: name for name, operation in METHODS.items()}


def _no_v03_form(operation: Operation) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"{operation.value} has no A2A v0.3 form: the agent speaks only v0.3",
        metadata={"operation": operation.value, "protocolVersion": "0.3"},
    )


def _push_config_out(cfg: m.TaskPushNotificationConfig) -> _PushConfig:
    return _push_out(cfg).push_notification_config


def _send_out(request: m.SendMessageRequest) -> _SendParams:
    c = request.configuration or m.SendMessageConfiguration()
    push = c.task_push_notification_config
    return _SendParams(
        message=_message_out(request.message),
        configuration=_SendConfig(
            accepted_output_modes=c.accepted_output_modes or None,
            history_length=c.history_length or None,  # v1.0 0 ("none") has no v0.3 form; 0 is "all" there
            push_notification_config=_push_config_out(push) if push is not None else None,
            blocking=not c.return_immediately,
        ),
        metadata=request.metadata,
    )


def encode_request(operation: Operation, request: Any) -> tuple[str, dict[str, Any]]:
    """The v0.3 JSON-RPC method and ``params`` for a v1.0 request Struct (what a client sends).

    >>> encode_request(Operation.GET_TASK, m.GetTaskRequest(id="t1", history_length=2))
    ('tasks/get', {'id': 't1', 'historyLength': 2})

    ``blocking`` is always sent (``not returnImmediately``). ``tenant``, the push-config list's paging, and a
    ``historyLength`` of 0 have no v0.3 form and are left out; the extended card takes no params (``{}``).
    ListTasks raises UnsupportedOperationError: v0.3 has no such method.
    """
    params: Struct | None
    if operation in (_O.SEND_MESSAGE, _O.SEND_STREAMING_MESSAGE):
        params = _send_out(request)
    elif operation is _O.GET_TASK:
        params = _TaskQueryParams(id=request.id, history_length=request.history_length or None)
    elif operation is _O.CANCEL_TASK:
        params = _TaskIdParams(id=request.id, metadata=request.metadata)
    elif operation is _O.SUBSCRIBE_TO_TASK:
        params = _TaskIdParams(id=request.id)
    elif operation is _O.CREATE_PUSH_CONFIG:
        params = _push_out(request)
    elif operation is _O.GET_PUSH_CONFIG:
        params = _GetPushParams(id=request.task_id, push_notification_config_id=request.id)
    elif operation is _O.LIST_PUSH_CONFIGS:
        params = _TaskIdParams(id=request.task_id)
    elif operation is _O.DELETE_PUSH_CONFIG:
        params = _DeletePushParams(id=request.task_id, push_notification_config_id=request.id)
    elif operation is _O.GET_EXTENDED_AGENT_CARD:
        params = None
    else:
        raise _no_v03_form(operation)
    return _NAMES[operation], {} if params is None else msgspec.to_builtins(params)


def _bad_result(exc: msgspec.ValidationError, root: str) -> ValueError:
    path, reason = field_error(exc, root)
    return ValueError(f"not a valid A2A v0.3 result: {path}: {reason}")


def _decode_with(decoder: msgspec.json.Decoder[Any] | Decoder, raw: bytes | msgspec.Raw, root: str) -> Any:
    try:
        return decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise _bad_result(exc, root) from None
    except (msgspec.DecodeError, RecursionError):
        raise ValueError(f"not a valid A2A v0.3 result: `{root}` is not JSON") from None


_result_decoders: dict[Operation, msgspec.json.Decoder[Any]] = {
    _O.SEND_MESSAGE: msgspec.json.Decoder(_Task | _Message),
    _O.GET_TASK: msgspec.json.Decoder(_Task),
    _O.CANCEL_TASK: msgspec.json.Decoder(_Task),
    _O.CREATE_PUSH_CONFIG: msgspec.json.Decoder(_TaskPushConfig),
    _O.GET_PUSH_CONFIG: msgspec.json.Decoder(_TaskPushConfig),
    _O.LIST_PUSH_CONFIGS: msgspec.json.Decoder(list[_TaskPushConfig]),
    _O.GET_EXTENDED_AGENT_CARD: msgspec.json.Decoder(dict[str, Any]),
}


def _push_result_in(p: _TaskPushConfig) -> m.TaskPushNotificationConfig:
    # A v0.3 server that stores one config per task may leave out its id: that config's id is the task id.
    cfg = _push_in(p.push_notification_config, p.task_id)
    cfg.id = cfg.id or p.task_id
    return cfg


def decode_result(operation: Operation, raw: bytes | msgspec.Raw) -> Any:
    """A v0.3 JSON-RPC ``result`` as the v1.0 response Struct of ``operation`` (what a client reads).

    message/send gives a SendMessageResponse holding the Task or Message; tasks/get and tasks/cancel a Task;
    the push-config methods TaskPushNotificationConfig (list: ListTaskPushNotificationConfigsResponse,
    delete: None); the extended card an AgentCard (:func:`card_from_v03`). Streaming results are read event
    by event with :func:`decode_event`. A result that is not the v0.3 shape raises ValueError naming the
    field (``result.status.state``).
    """
    if operation is _O.DELETE_PUSH_CONFIG:
        return None
    decoder = _result_decoders.get(operation)
    if decoder is None:
        raise ValueError(f"{operation.value} has no v0.3 JSON-RPC result (stream it, or it is v1.0-only)")
    obj = _decode_with(decoder, raw, "result")
    if operation is _O.SEND_MESSAGE:
        if isinstance(obj, _Task):
            return m.SendMessageResponse(task=_task_in(obj))
        return m.SendMessageResponse(message=_message_in(obj))
    if operation in (_O.GET_TASK, _O.CANCEL_TASK):
        return _task_in(obj)
    if operation is _O.LIST_PUSH_CONFIGS:
        return m.ListTaskPushNotificationConfigsResponse(configs=[_push_result_in(p) for p in obj])
    if operation is _O.GET_EXTENDED_AGENT_CARD:
        return card_from_v03(obj)
    return _push_result_in(obj)


_ERRORS_BY_REASON: dict[str, type[A2AError]] = {cls.reason: cls for cls in ERRORS_BY_CODE.values()}


def _v03_code(cls: type[A2AError]) -> int:
    return InvalidRequestError.code if cls.code in _V10_ONLY_CODES else cls.code


def decode_error(error: Any) -> A2AError:
    """A v0.3 JSON-RPC ``error`` object as its A2AError: the inverse of :func:`error_code` and
    :func:`error_data`.

    The class comes from the code; a ``data.reason`` naming a v1.0 error that travels under this code
    (``-32600`` with ``VERSION_NOT_SUPPORTED``) picks that class. ``data.metadata`` and
    ``data.fieldViolations`` are kept. An unknown code gives the A2AError base class.
    """
    if not isinstance(error, dict):
        return InternalError(f"malformed JSON-RPC error: {error!r}"[:200])
    code = error.get("code")
    cls = ERRORS_BY_CODE.get(code) if isinstance(code, int) and not isinstance(code, bool) else None
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    reason = data.get("reason")
    named = _ERRORS_BY_REASON.get(reason) if isinstance(reason, str) else None
    if named is not None and (cls is None or _v03_code(named) == code):
        cls = named
    metadata = data.get("metadata")
    violations = [
        (str(v.get("field", "")), str(v.get("description", "")))
        for v in data.get("fieldViolations") or ()
        if isinstance(v, dict)
    ]
    message = error.get("message")
    return (cls or A2AError)(
        message if isinstance(message, str) and message else None,
        metadata=metadata if isinstance(metadata, dict) else None,
        field_violations=violations,
    )


# -- The client direction over HTTP+JSON --------------------------------------------------------------------

#: The v0.3 SDK servers' error statuses (a2a-python 0.3 ``A2AErrorToHttpStatus``), whose bodies are only
#: ``{"message": ...}``; skillwire's v0.3 REST errors carry an AIP-193 ErrorInfo and need no guessing.
_REST_STATUS_ERRORS: dict[int, type[A2AError]] = {
    400: InvalidRequestError,
    404: TaskNotFoundError,
    409: TaskNotCancelableError,
    415: ContentTypeNotSupportedError,
    422: InvalidParamsError,
    500: InternalError,
    501: UnsupportedOperationError,
    502: InvalidAgentResponseError,
}
_PUSH_OPERATIONS = frozenset(
    {_O.CREATE_PUSH_CONFIG, _O.GET_PUSH_CONFIG, _O.LIST_PUSH_CONFIGS, _O.DELETE_PUSH_CONFIG}
)


def rest_error(operation: Operation, status: int, body: Any) -> A2AError | None:
    """The A2AError of a v0.3 SDK server's REST error response (``{"message": ...}`` and an HTTP status),
    or None when ``body`` (decoded JSON) is not that shape or the status maps to no error.

    404 is TaskNotFound (ExtendedAgentCardNotConfigured for the card), 501 UnsupportedOperation
    (PushNotificationNotSupported for push configs), 409 TaskNotCancelable, and so on.
    """
    if not isinstance(body, dict) or not isinstance(body.get("message"), str) or "error" in body:
        return None
    cls = _REST_STATUS_ERRORS.get(status)
    if cls is TaskNotFoundError and operation is _O.GET_EXTENDED_AGENT_CARD:
        cls = ExtendedAgentCardNotConfiguredError
    elif cls is UnsupportedOperationError and operation in _PUSH_OPERATIONS:
        cls = PushNotificationNotSupportedError
    return None if cls is None else cls(body["message"] or None, metadata={"httpStatus": status})


def _seg(value: str) -> str:
    return quote(value, safe="")


def _rest_send_out(request: m.SendMessageRequest) -> _PbSendRequest:
    c = request.configuration or m.SendMessageConfiguration()
    push = c.task_push_notification_config
    return _PbSendRequest(
        request=_pb_message_out(request.message),
        configuration=_PbSendConfig(
            accepted_output_modes=c.accepted_output_modes,
            push_notification=_pb_push_out(push).push_notification_config if push is not None else None,
            history_length=c.history_length or 0,
            blocking=not c.return_immediately,
        ),
        metadata=request.metadata,
    )


def encode_rest_request(operation: Operation, request: Any) -> tuple[str, str, bytes | None, dict[str, str]]:
    """(HTTP method, path, body, query) of a v1.0 request on the v0.3 HTTP+JSON binding; the path starts
    with ``/v1`` and goes after the interface URL.

    >>> encode_rest_request(Operation.CANCEL_TASK, m.CancelTaskRequest(id="t1"))
    ('POST', '/v1/tasks/t1:cancel', b'{"name":"tasks/t1"}', {})

    Bodies are ProtoJSON of the v0.3 gRPC messages, with ``blocking`` always set; subscribe is a GET (what
    the v0.3 SDK servers route). ListTasks raises UnsupportedOperationError.
    """
    if operation in (_O.SEND_MESSAGE, _O.SEND_STREAMING_MESSAGE):
        verb = "send" if operation is _O.SEND_MESSAGE else "stream"
        return "POST", f"/v1/message:{verb}", _encoder.encode(_rest_send_out(request)), {}
    if operation is _O.GET_EXTENDED_AGENT_CARD:
        return "GET", "/v1/card", None, {}
    if operation is _O.LIST_TASKS:
        raise _no_v03_form(operation)
    if operation in (_O.GET_TASK, _O.CANCEL_TASK, _O.SUBSCRIBE_TO_TASK):
        task = f"/v1/tasks/{_seg(request.id)}"
        if operation is _O.GET_TASK:
            history = request.history_length
            return "GET", task, None, {"historyLength": str(history)} if history else {}
        if operation is _O.CANCEL_TASK:
            return "POST", f"{task}:cancel", _encoder.encode({"name": f"tasks/{request.id}"}), {}
        return "GET", f"{task}:subscribe", None, {}
    configs = f"/v1/tasks/{_seg(request.task_id)}/{_PUSH}"
    if operation is _O.CREATE_PUSH_CONFIG:
        body = _PbCreatePushBody(
            parent=f"tasks/{request.task_id}", config_id=request.id, config=_pb_push_out(request)
        )
        return "POST", configs, _encoder.encode(body), {}
    if operation is _O.LIST_PUSH_CONFIGS:
        query = {"pageSize": str(request.page_size)} if request.page_size else {}
        return "GET", configs, None, query | ({"pageToken": request.page_token} if request.page_token else {})
    if operation is _O.GET_PUSH_CONFIG:
        return "GET", f"{configs}/{_seg(request.id)}", None, {}
    if operation is _O.DELETE_PUSH_CONFIG:
        return "DELETE", f"{configs}/{_seg(request.id)}", None, {}
    raise _no_v03_form(operation)


_PB_STATE_IN: dict[str, TaskState] = {v: k for k, v in _PB_STATE_OUT.items()} | {
    _S.CANCELED.value: _S.CANCELED
}


def _pb_status_in(status: _PbStatus | None) -> m.TaskStatus:
    if status is None:
        return m.TaskStatus(state=_S.UNSPECIFIED)
    state = _PB_STATE_IN.get(status.state)
    if state is None:
        raise ValueError(f"not a valid A2A v0.3 result: unknown task state {status.state[:50]!r}")
    return m.TaskStatus(
        state=state,
        message=_pb_message_in(status.update) if status.update is not None else None,
        timestamp=_utc(status.timestamp),
    )


def _pb_artifact_in(a: _PbArtifact) -> m.Artifact:
    return m.Artifact(
        artifact_id=a.artifact_id,
        name=a.name,
        description=a.description,
        parts=[_pb_part_in(p) for p in a.parts],
        metadata=a.metadata,
        extensions=a.extensions,
    )


def _pb_task_in(task: _PbTask) -> m.Task:
    return m.Task(
        id=task.id,
        context_id=task.context_id,
        status=_pb_status_in(task.status),
        artifacts=[_pb_artifact_in(a) for a in task.artifacts],
        history=[_pb_message_in(h) for h in task.history],
        metadata=task.metadata,
    )


def _pb_push_result_in(resource: _PbTaskPushConfig) -> m.TaskPushNotificationConfig:
    """``{"name": "tasks/{t}/pushNotificationConfigs/{c}", "pushNotificationConfig": {...}}`` in v1.0."""
    cfg = resource.push_notification_config
    if cfg is None:
        raise ValueError("not a valid A2A v0.3 result: `pushNotificationConfig` is missing")
    task_part, _, config_id = resource.name.partition(f"/{_PUSH}/")
    task_id = task_part.removeprefix("tasks/")
    return _pb_push_in(cfg, task_id, cfg.id or config_id or task_id)


_rest_result_decoders: dict[Operation, Decoder] = {
    _O.SEND_MESSAGE: Decoder(_PbSendResponse),
    _O.GET_TASK: Decoder(_PbTask),
    _O.CANCEL_TASK: Decoder(_PbTask),
    _O.CREATE_PUSH_CONFIG: Decoder(_PbTaskPushConfig),
    _O.GET_PUSH_CONFIG: Decoder(_PbTaskPushConfig),
    _O.LIST_PUSH_CONFIGS: Decoder(_PbListPushResponse),
}
_rest_event_decoder = Decoder(_PbStreamResponse)
_card_decoder: msgspec.json.Decoder[dict[str, Any]] = msgspec.json.Decoder(dict[str, Any])


def decode_rest_result(operation: Operation, body: bytes) -> Any:
    """A v0.3 HTTP+JSON response body (ProtoJSON, or the JSON card) as the v1.0 response Struct of
    ``operation``, like :func:`decode_result`. Raises ValueError naming the bad field."""
    if operation is _O.DELETE_PUSH_CONFIG:
        return None
    if operation is _O.GET_EXTENDED_AGENT_CARD:
        return card_from_v03(_decode_with(_card_decoder, body, "body"))
    decoder = _rest_result_decoders.get(operation)
    if decoder is None:
        raise ValueError(f"{operation.value} has no v0.3 REST result (stream it, or it is v1.0-only)")
    obj = _decode_with(decoder, body, "body")
    if operation is _O.SEND_MESSAGE:
        if (obj.task is None) == (obj.msg is None):
            raise ValueError("not a valid A2A v0.3 result: exactly one of `task` or `message` must be set")
        if obj.task is not None:
            return m.SendMessageResponse(task=_pb_task_in(obj.task))
        return m.SendMessageResponse(message=_pb_message_in(obj.msg))
    if operation in (_O.GET_TASK, _O.CANCEL_TASK):
        return _pb_task_in(obj)
    if operation is _O.LIST_PUSH_CONFIGS:
        return m.ListTaskPushNotificationConfigsResponse(
            configs=[_pb_push_result_in(c) for c in obj.configs], next_page_token=obj.next_page_token
        )
    return _pb_push_result_in(obj)


def decode_rest_event(data: bytes) -> m.StreamResponse:
    """The ``data`` of one v0.3 REST SSE event (ProtoJSON StreamResponse) as a v1.0 StreamResponse.
    Raises ValueError when it is not one (exactly one member must be set)."""
    obj: _PbStreamResponse = _decode_with(_rest_event_decoder, data, "event")
    members = [x for x in (obj.task, obj.msg, obj.status_update, obj.artifact_update) if x is not None]
    if len(members) != 1:
        raise ValueError("not a valid A2A v0.3 stream event: exactly one member must be set")
    if obj.task is not None:
        return m.StreamResponse(task=_pb_task_in(obj.task))
    if obj.msg is not None:
        return m.StreamResponse(message=_pb_message_in(obj.msg))
    if obj.status_update is not None:
        su = obj.status_update
        return m.StreamResponse(
            status_update=m.TaskStatusUpdateEvent(
                task_id=su.task_id,
                context_id=su.context_id,
                status=_pb_status_in(su.status),
                metadata=su.metadata,
            )
        )
    au = obj.artifact_update
    assert au is not None
    if au.artifact is None:
        raise ValueError("not a valid A2A v0.3 stream event: `artifactUpdate.artifact` is missing")
    return m.StreamResponse(
        artifact_update=m.TaskArtifactUpdateEvent(
            task_id=au.task_id,
            context_id=au.context_id,
            artifact=_pb_artifact_in(au.artifact),
            append=au.append,
            last_chunk=au.last_chunk,
            metadata=au.metadata,
        )
    )


# -- The client direction: a v0.3 agent card as a v1.0 AgentCard -------------------------------------------


class _CardInterfaceIn(Struct, kw_only=True):
    url: str
    transport: str


class _CapabilitiesIn(Struct, rename="camel", kw_only=True):
    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[m.AgentExtension] = []


class _SkillIn(Struct, rename="camel", kw_only=True):
    id: str
    name: str
    description: str = ""
    tags: list[str] = []
    examples: list[str] = []
    input_modes: list[str] = []
    output_modes: list[str] = []
    security: list[dict[str, list[str]]] = []


class _CardIn(Struct, rename="camel", kw_only=True):
    """A v0.3 AgentCard, read leniently: only ``name`` and ``url`` are required."""

    protocol_version: str = PROTOCOL_VERSION
    name: str
    description: str = ""
    url: str
    preferred_transport: str = "JSONRPC"
    additional_interfaces: list[_CardInterfaceIn] = []
    icon_url: str | None = None
    provider: m.AgentProvider | None = None
    version: str = ""
    documentation_url: str | None = None
    capabilities: _CapabilitiesIn = msgspec.field(default_factory=_CapabilitiesIn)
    security_schemes: dict[str, Json] = {}
    security: list[dict[str, list[str]]] = []
    default_input_modes: list[str] = []
    default_output_modes: list[str] = []
    skills: list[_SkillIn] = []
    supports_authenticated_extended_card: bool | None = None
    signatures: list[m.AgentCardSignature] = []


_SCHEME_WRAPPERS = {kind: wrapper for wrapper, kind in _SCHEME_TYPES.items()}
#: The members of each v1.0 OAuth flow (v0.3 flows have the same names, less ``pkceRequired``).
_FLOW_MEMBERS = {
    "authorizationCode": ("authorizationUrl", "tokenUrl", "refreshUrl", "scopes"),
    "clientCredentials": ("tokenUrl", "refreshUrl", "scopes"),
    "implicit": ("authorizationUrl", "refreshUrl", "scopes"),
    "password": ("tokenUrl", "refreshUrl", "scopes"),
}
_BINDINGS = {"JSONRPC": "JSONRPC", "HTTP+JSON": "HTTP+JSON", "GRPC": "GRPC"}


def _flows_in(flows: Any) -> Json:
    # v1.0 OAuthFlows is a oneof: of several v0.3 flows the first, in _FLOWS order, is kept.
    for name in _FLOWS:
        flow = flows.get(name) if isinstance(flows, dict) else None
        if isinstance(flow, dict):
            return {name: {k: flow[k] for k in _FLOW_MEMBERS[name] if flow.get(k)}}
    return {}


def _security_scheme_in(scheme: Json) -> Json | None:
    """A v0.3 ``type``-tagged security scheme in the v1.0 oneof form (a scheme already in that form, as on a
    card that carries both versions, is kept as it is); None for an unknown type."""
    for v10_form in _SCHEME_TYPES:
        if isinstance(scheme.get(v10_form), dict):
            return {v10_form: scheme[v10_form]}
    kind = scheme.get("type")
    wrapper = _SCHEME_WRAPPERS.get(kind) if isinstance(kind, str) else None
    if kind is None or wrapper is None:
        return None
    body: Json = {new: scheme[old] for new, old in _SCHEME_FIELDS[kind].items() if scheme.get(old)}
    if kind == "oauth2":
        body["flows"] = _flows_in(scheme.get("flows"))
    return {wrapper: body}


def _requirements_in(reqs: list[dict[str, list[str]]]) -> list[m.SecurityRequirement]:
    return [
        m.SecurityRequirement(schemes={name: m.StringList(list=scopes) for name, scopes in req.items()})
        for req in reqs
    ]


def _major_minor(version: str) -> str:
    return ".".join(version.strip().split(".")[:2]) or "0.3"


def _v03_interfaces(card: _CardIn) -> list[m.AgentInterface]:
    """The card's main endpoint, then its additional interfaces (without repeats), at its 0.x version."""
    version = _major_minor(card.protocol_version)
    pairs: list[tuple[str, str]] = []
    for url, transport in [(card.url, card.preferred_transport)] + [
        (i.url, i.transport) for i in card.additional_interfaces
    ]:
        pair = (url, _BINDINGS.get(transport.upper(), transport))
        if pair not in pairs:
            pairs.append(pair)
    return [m.AgentInterface(url=u, protocol_binding=b, protocol_version=version) for u, b in pairs]


def is_v03_card(obj: Mapping[str, Any]) -> bool:
    """Whether a decoded agent card JSON is a v0.3 one: it has no ``supportedInterfaces``, or it declares a
    0.x ``protocolVersion`` (a card serving both versions does both: :func:`card_from_v03` reads it whole)."""
    version = obj.get("protocolVersion")
    return not isinstance(obj.get("supportedInterfaces"), list) or (
        isinstance(version, str) and version.startswith("0.")
    )


def card_from_v03(obj: Mapping[str, Any]) -> m.AgentCard:
    """A v0.3 agent card (decoded JSON) as a v1.0 AgentCard whose ``supportedInterfaces`` are its endpoints
    at protocol version ``0.3`` (``url`` with ``preferredTransport`` first, then ``additionalInterfaces``).

    Security schemes become the v1.0 oneof form (``{"type": "http", "scheme": "bearer"}`` ->
    ``{"httpAuthSecurityScheme": {"scheme": "bearer"}}``), ``security`` the security requirements,
    ``supportsAuthenticatedExtendedCard`` ``capabilities.extendedAgentCard``. What v1.0 cannot hold is left
    out: ``stateTransitionHistory``, all OAuth flows but the first, schemes of an unknown type.

    A card serving both versions (``supportedInterfaces`` beside the v0.3 members, as skillwire serves) reads
    as its v1.0 self, with its v0.3 endpoints appended when they are not listed already. A card that is
    neither raises msgspec.ValidationError (a ValueError) naming the field (``card.skills[0].id``).
    """
    try:
        if isinstance(obj.get("supportedInterfaces"), list):
            return _card_of_both(msgspec.convert(obj, m.AgentCard), obj)
        card = msgspec.convert(obj, _CardIn)
    except msgspec.ValidationError as exc:
        path, reason = field_error(exc, "card")
        raise msgspec.ValidationError(f"not an A2A agent card: {path}: {reason}") from None
    caps = card.capabilities
    return m.AgentCard(
        name=card.name,
        description=card.description,
        supported_interfaces=_v03_interfaces(card),
        provider=card.provider,
        version=card.version,
        documentation_url=card.documentation_url,
        capabilities=m.AgentCapabilities(
            streaming=caps.streaming,
            push_notifications=caps.push_notifications,
            extensions=caps.extensions,
            extended_agent_card=card.supports_authenticated_extended_card,
        ),
        security_schemes={
            name: converted
            for name, converted in ((n, _security_scheme_in(s)) for n, s in card.security_schemes.items())
            if converted is not None
        },
        security_requirements=_requirements_in(card.security),
        default_input_modes=card.default_input_modes,
        default_output_modes=card.default_output_modes,
        skills=[
            m.AgentSkill(
                id=s.id,
                name=s.name,
                description=s.description,
                tags=s.tags,
                examples=s.examples,
                input_modes=s.input_modes,
                output_modes=s.output_modes,
                security_requirements=_requirements_in(s.security),
            )
            for s in card.skills
        ],
        signatures=card.signatures,
        icon_url=card.icon_url,
    )


def _card_of_both(card: m.AgentCard, obj: Mapping[str, Any]) -> m.AgentCard:
    """A v1.0 card that may carry v0.3 members too: its v0.3 endpoints are appended unless listed, its
    security schemes keep only their v1.0 form."""
    extra: list[m.AgentInterface] = []
    if isinstance(obj.get("url"), str):
        try:
            legacy = msgspec.convert(obj, _CardIn)
        except msgspec.ValidationError:
            legacy = None  # a v0.3 part that does not read is ignored: the v1.0 card stands on its own
        if legacy is not None:
            listed = {(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces}
            extra = [
                i
                for i in _v03_interfaces(legacy)
                if (i.url, i.protocol_binding, i.protocol_version) not in listed
            ]
    schemes = {name: _security_scheme_in(s) or s for name, s in card.security_schemes.items()}
    return msgspec.structs.replace(
        card, supported_interfaces=card.supported_interfaces + extra, security_schemes=schemes
    )
