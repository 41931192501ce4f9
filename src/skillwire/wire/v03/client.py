"""The client direction: v1.0 requests out in their v0.3 form, v0.3 results in as v1.0, so a v1.0 client
can call a v0.3 agent over JSON-RPC (:func:`encode_request`, :func:`decode_result`, :func:`decode_event`)
or HTTP+JSON (:func:`encode_rest_request`, :func:`decode_rest_result`, :func:`decode_rest_event`).

Where v0.3 and v1.0 do not map one to one:

* ``blocking`` is always sent: ``not returnImmediately``.
* ``historyLength: 0`` (v1.0: no history) cannot be said in v0.3, where 0 means "no limit": it is left out.
  ``tenant`` and the paging of push-config lists are left out too. ListTasks has no v0.3 form: encoding it
  raises UnsupportedOperationError.
* A push config read without an ``id`` gets the task id (the default config of the v0.3 SDKs).

Errors read with :mod:`skillwire.wire.v03.errors`, agent cards with :mod:`skillwire.wire.v03.cards`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import msgspec
from msgspec import Struct

from skillwire.errors import JSONParseError, UnsupportedOperationError
from skillwire.protocol import models as m
from skillwire.protocol.operations import Operation
from skillwire.wire.jsonrpc import field_error
from skillwire.wire.protojson import Decoder
from skillwire.wire.v03.cards import card_from_v03
from skillwire.wire.v03.rest_shapes import (
    _PUSH,
    _pb_artifact_in,
    _pb_message_in,
    _pb_message_out,
    _pb_push_out,
    _pb_push_result_in,
    _pb_status_in,
    _pb_task_in,
    _PbCreatePushBody,
    _PbListPushResponse,
    _PbSendConfig,
    _PbSendRequest,
    _PbSendResponse,
    _PbStreamResponse,
    _PbTask,
    _PbTaskPushConfig,
)
from skillwire.wire.v03.server import METHODS
from skillwire.wire.v03.shapes import (
    _artifact_in,
    _DeletePushParams,
    _encoder,
    _Event,
    _GetPushParams,
    _invalid,
    _Message,
    _message_in,
    _message_out,
    _push_in,
    _push_out,
    _PushConfig,
    _SendConfig,
    _SendParams,
    _status_in,
    _StatusUpdate,
    _Task,
    _task_in,
    _TaskIdParams,
    _TaskPushConfig,
    _TaskQueryParams,
)

__all__ = [
    "decode_event",
    "decode_rest_event",
    "decode_rest_result",
    "decode_result",
    "encode_request",
    "encode_rest_request",
]

_O = Operation

# -- JSON-RPC -------------------------------------------------------------------------------------------------

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


# -- HTTP+JSON ------------------------------------------------------------------------------------------------


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
