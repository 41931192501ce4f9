"""The server direction over v0.3 HTTP+JSON (REST, paths under ``/v1``): a request decodes into the v1.0
request Struct of its operation (:func:`match_rest`), and the v1.0 handler's result encodes as the v0.3
ProtoJSON response (:func:`encode_rest_result`, :func:`encode_rest_stream_event`).

``historyLength`` reads as over JSON-RPC (:mod:`skillwire.wire.v03.server`), and so does ``blocking``
with one difference that proto3 JSON makes: it omits a bool that is false, so the v0.3 SDK's REST client
says ``blocking: false`` as ``"configuration": {}``. A configuration without ``blocking`` is therefore not
blocking (as in the v0.3 SDK's REST server); only a request with no ``configuration`` at all is the
absent case, blocking unless ``blocking_when_absent=False``. With ``limits``, :func:`match_rest` holds the body, query and path to the
decoded-JSON budgets (:mod:`skillwire.wire.budget`), named as sent (``body.request.content``).
``GET /v1/card`` returns the v0.3 JSON agent card (what the v0.3 SDK servers returned), not ProtoJSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import Struct

from skillwire.errors import InvalidParamsError, JSONParseError
from skillwire.protocol import models as m
from skillwire.protocol.limits import Limits
from skillwire.protocol.operations import Operation
from skillwire.wire.budget import check_json, check_shape, check_strings, shape_may_exceed
from skillwire.wire.protojson import Decoder
from skillwire.wire.rest import check_query
from skillwire.wire.v03.cards import v03_card
from skillwire.wire.v03.rest_shapes import (
    _PUSH,
    _pb_artifact_out,
    _pb_message_in,
    _pb_message_out,
    _pb_push_in,
    _pb_push_out,
    _pb_status_out,
    _pb_task_out,
    _PbArtifactUpdate,
    _PbCreatePushBody,
    _PbListPushResponse,
    _PbSendConfig,
    _PbSendRequest,
    _PbSendResponse,
    _PbStatusUpdate,
    _PbStreamResponse,
    _PbTaskPushConfig,
)
from skillwire.wire.v03.server import _one_of
from skillwire.wire.v03.shapes import _encoder, _invalid

__all__ = ["encode_rest_result", "encode_rest_stream_event", "match_rest"]

_O = Operation

_pb_send_decoder = Decoder(_PbSendRequest)
_pb_create_push_decoder = Decoder(_PbCreatePushBody)


def _decode_body(decoder: Decoder, body: bytes, limits: Limits | None) -> Any:
    if limits is not None:
        check_json(body, limits, "body")
    try:
        decoded = decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise _invalid(exc, "body") from None
    except (msgspec.DecodeError, RecursionError):
        raise JSONParseError("Invalid JSON payload: the body is not JSON") from None
    if limits is not None and shape_may_exceed(body, limits):
        check_shape(decoded, limits, "body")
    return decoded


def _rest_send(body: bytes, blocking_when_absent: bool, limits: Limits | None) -> m.SendMessageRequest:
    req: _PbSendRequest = _decode_body(_pb_send_decoder, body, limits)
    c = req.configuration or _PbSendConfig()
    # proto3 JSON omits a false bool: in a configuration that is there, no `blocking` is `blocking: false`
    # (how the v0.3 SDK's REST client says it). Only a request without any configuration is the absent case.
    blocking = blocking_when_absent if req.configuration is None else bool(c.blocking)
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


def _rest_create_push(task_id: str, body: bytes, limits: Limits | None) -> m.TaskPushNotificationConfig:
    req: _PbCreatePushBody = _decode_body(_pb_create_push_decoder, body, limits)
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


def match_rest(
    method: str,
    path: str,
    query: Mapping[str, list[str]],
    body: bytes,
    *,
    blocking_when_absent: bool = True,
    limits: Limits | None = None,
) -> tuple[Operation, Struct] | None:
    """A v0.3 HTTP+JSON request (paths under ``/v1``) as the v1.0 operation and request Struct, or None
    when no v0.3 route matches (the binding answers 404/405). ``path`` is the decoded path.

    >>> match_rest("GET", "/v1/tasks/t1", {"historyLength": ["2"]}, b"")
    (<Operation.GET_TASK: 'GetTask'>, GetTaskRequest(tenant='', id='t1', history_length=2))

    Bodies are ProtoJSON of the v0.3 gRPC messages (camelCase or proto names); a bad body raises
    InvalidParamsError naming the field (``body.message.content``) or JSONParseError, and so does a body,
    query or path past a budget of ``limits`` when it is given.
    """
    if not path.startswith("/v1/"):
        return None
    if limits is not None:
        check_query(query, {}, limits)
        check_strings([("", path)], limits, "path")
    verb = method.upper()
    segs = path[4:].split("/")
    if len(segs) == 1:
        if verb == "POST" and segs[0] == "message:send":
            return _O.SEND_MESSAGE, _rest_send(body, blocking_when_absent, limits)
        if verb == "POST" and segs[0] == "message:stream":
            return _O.SEND_STREAMING_MESSAGE, _rest_send(body, blocking_when_absent, limits)
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
            return _O.CREATE_PUSH_CONFIG, _rest_create_push(task, body, limits)
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
