"""The server direction over v0.3 JSON-RPC: a v0.3 call decodes into the v1.0 request Struct of its
operation (:func:`decode_request`), and the v1.0 handler's result encodes as the v0.3 ``result``
(:func:`encode_result`, :func:`encode_stream_event` with :func:`is_final`).

Where v0.3 and v1.0 do not map one to one:

* ``blocking`` absent means blocking, as the v0.3 SDK servers (a2a-python 0.3, a2a-js, and a2a-sdk 1.x's
  compat layer) and v0.3 clients read it: a2a-sdk 0.3's legacy ``A2AClient`` sends no ``configuration``
  and expects the finished task. Only ``blocking: false`` returns at once (``returnImmediately: true``).
  ``blocking_when_absent=False`` (on :func:`decode_request` and
  :func:`~skillwire.wire.v03.rest.match_rest`) gives the other reading of the v0.3 text, where an absent
  boolean is false. Over HTTP+JSON, where proto3 JSON cannot tell ``false`` from absent, only a request
  without any ``configuration`` is the absent case (:mod:`skillwire.wire.v03.rest`).
* ``historyLength: 0`` means "no limit", as in the v0.3 proto and the v0.3 SDKs, so it decodes to unset.
* A v0.3 push config set without an ``id`` gets the task id as its id, and a get without
  ``pushNotificationConfigId`` reads that one (the v0.3 SDK convention of one default config per task).
* ``metadata`` on ``tasks/get``, ``tasks/resubscribe`` and the push-config methods has no v1.0 field and is
  ignored.
* Stream events carry v0.3 ``final`` on status updates; :func:`is_final` says when it is true.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import Struct

from skillwire.errors import JSONParseError, MethodNotFoundError
from skillwire.protocol import models as m
from skillwire.protocol.limits import Limits
from skillwire.protocol.operations import OPERATIONS_BY_METHOD, Operation
from skillwire.protocol.states import INTERRUPTED_STATES, TERMINAL_STATES
from skillwire.wire.budget import check_shape, shape_may_exceed
from skillwire.wire.v03.cards import v03_card
from skillwire.wire.v03.shapes import (
    _DeletePushParams,
    _encoder,
    _event_out,
    _GetPushParams,
    _invalid,
    _message_in,
    _message_out,
    _push_in,
    _push_out,
    _SendConfig,
    _SendParams,
    _task_out,
    _TaskIdParams,
    _TaskPushConfig,
    _TaskQueryParams,
)

__all__ = ["METHODS", "decode_request", "encode_result", "encode_stream_event", "is_final"]

_O = Operation


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


#: The v1.0 JSON-RPC method names, for the hint a request of the wrong version gets.
_V10_METHODS = frozenset(OPERATIONS_BY_METHOD)


def decode_request(
    method: str,
    params: bytes | msgspec.Raw | None,
    *,
    blocking_when_absent: bool = True,
    limits: Limits | None = None,
) -> tuple[Operation, Struct]:
    """A v0.3 JSON-RPC call as the v1.0 operation and request Struct that serve it.

    >>> decode_request("tasks/get", b'{"id": "t1", "historyLength": 2}')
    (<Operation.GET_TASK: 'GetTask'>, GetTaskRequest(tenant='', id='t1', history_length=2))

    Raises MethodNotFoundError for a method v0.3 does not have and InvalidParamsError naming the first bad
    field (``params.message.parts[0].kind``). With ``limits``, the decoded params are held to its shape
    budgets (parts, metadata keys, strings; :func:`~skillwire.wire.budget.check_shape`), named as sent
    (``params.message.parts``); depth and value count are the caller's to check on the whole body first.
    """
    entry = _METHODS.get(method)
    if entry is None:
        if method in _V10_METHODS:  # a v1.0 client that left the header out
            raise MethodNotFoundError(
                f"Method not found: {method} is a method of A2A 1.0; a request without A2A-Version speaks 0.3:"
                " send 'A2A-Version: 1.0'"
            )
        raise MethodNotFoundError(f"Method not found: {method[:100]}")
    if entry.decoder is None:
        return entry.operation, entry.convert(None, blocking_when_absent)
    raw = b"{}" if params is None else bytes(params) if isinstance(params, msgspec.Raw) else params
    try:
        decoded = entry.decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise _invalid(exc, "params") from None
    except (msgspec.DecodeError, RecursionError):
        raise JSONParseError("Invalid JSON payload: `params` is not JSON") from None
    if limits is not None and shape_may_exceed(raw, limits):
        check_shape(decoded, limits, "params")
    return entry.operation, entry.convert(decoded, blocking_when_absent)


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
