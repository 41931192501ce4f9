"""Client transports for agents that speak A2A **v0.3**: the same :class:`Transport` as the v1.0 ones.

They take the v1.0 request Structs and give back the v1.0 response Structs and StreamResponse events, so a
:class:`~skillwire.client.Client` over one of them works as it does over v1.0; :mod:`skillwire.wire.v03`
does the translating::

    card = v03.card_from_v03(card_json)                      # interfaces at protocol version "0.3"
    transport = V03JsonRpcTransport(card.supported_interfaces[0].url, http)
    task = await transport.send(Operation.GET_TASK, GetTaskRequest(id="t1"))

Every request carries ``A2A-Version: 0.3``: v0.3 servers do not need it, and a server that speaks both
versions (skillwire) answers in v0.3 because of it. Errors are raised as on the v1.0 transports: protocol
errors as their :mod:`skillwire.errors` class, :class:`AgentConnectionError`, :class:`HTTPStatusError`
(429 and 503 always), and :class:`InvalidResponseError` for an answer that is not v0.3.

What v0.3 cannot say raises UnsupportedOperationError before anything is sent (ListTasks). A stream lasts
until the server ends it; v0.3's ``final`` flag is not needed to stop reading.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import msgspec

from skillwire.client.errors import InvalidResponseError
from skillwire.client.transport import (
    JsonRpcTransport,
    RestTransport,
    _json,
    _status_error,
    error_from_details,
)
from skillwire.errors import A2AError, MethodNotFoundError
from skillwire.protocol import models as m
from skillwire.protocol.operations import Operation
from skillwire.wire import v03

__all__ = ["A2A_VERSION_03", "V03JsonRpcTransport", "V03RestTransport"]

#: The ``A2A-Version`` these transports send.
A2A_VERSION_03 = "0.3"
_O = Operation
R = TypeVar("R")


def _decoded(decode: Callable[[Any], R], raw: Any) -> R:
    """``decode(raw)``, with a failure to read the agent's answer as InvalidResponseError."""
    try:
        return decode(raw)
    except ValueError as exc:
        raise InvalidResponseError(str(exc)) from None
    except A2AError as exc:  # v03.decode_event reports a bad event as InvalidParams/JSONParse
        raise InvalidResponseError(f"not a valid A2A v0.3 stream event: {exc.message}") from None


def _trim_history(request: Any, result: Any) -> Any:
    """v1.0 ``historyLength: 0`` asks for no history, which v0.3 cannot say (0 is "all" there)."""
    config = getattr(request, "configuration", None)
    length = config.history_length if config is not None else getattr(request, "history_length", None)
    task = result.task if isinstance(result, m.SendMessageResponse) else result
    if length == 0 and isinstance(task, m.Task):
        task.history = []
    return result


def _framework_default(decoded: Any) -> bool:
    """Starlette's and FastAPI's own 404/405 body (``{"detail": "Not Found"}``): no route, no A2A error."""
    return isinstance(decoded, dict) and set(decoded) == {"detail"}


class V03JsonRpcTransport(JsonRpcTransport):
    """The v0.3 JSON-RPC binding: v0.3 method names and params POSTed to ``url``; streams as SSE."""

    version = A2A_VERSION_03

    def _envelope(self, operation: Operation, request: msgspec.Struct) -> bytes:
        method, params = v03.encode_request(operation, request)
        envelope: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
        if params:
            envelope["params"] = params
        return msgspec.json.encode(envelope)

    def _rpc_error(self, error: Any) -> A2AError:
        return v03.decode_error(error)

    def _result(self, operation: Operation, request: msgspec.Struct, raw: msgspec.Raw) -> Any:
        return _trim_history(request, _decoded(lambda r: v03.decode_result(operation, r), raw))

    def _event(self, raw: msgspec.Raw) -> m.StreamResponse:
        return _decoded(v03.decode_event, raw)


class V03RestTransport(RestTransport):
    """The v0.3 HTTP+JSON binding: ProtoJSON of the v0.3 gRPC messages at ``/v1/...`` under ``url``."""

    version = A2A_VERSION_03

    def _error(self, operation: Operation, response: httpx.Response, body: bytes) -> Exception:
        if response.status_code in (429, 503):
            return _status_error(response, body)
        decoded = _json(body)
        if isinstance(decoded, dict):
            # skillwire answers v0.3 REST errors with an AIP-193 status; the v0.3 SDKs with a bare message
            error = error_from_details(decoded.get("error")) or v03.rest_error(
                operation, response.status_code, decoded
            )
            if error is not None:
                return error
        if response.status_code in (404, 405) and (not body or _framework_default(decoded)):
            return MethodNotFoundError(f"{response.request.method} {response.request.url.path}: not found")
        if response.is_success:
            return InvalidResponseError(f"unexpected content type {response.headers.get('content-type')!r}")
        return _status_error(response, body)

    def _failure(self, response: httpx.Response, body: bytes) -> Exception:
        # _HttpTransport._sse calls this for a stream answered without SSE
        subscribe = response.request.url.path.endswith(":subscribe")
        return self._error(_O.SUBSCRIBE_TO_TASK if subscribe else _O.SEND_STREAMING_MESSAGE, response, body)

    def _target(self, operation: Operation, request: Any) -> tuple[str, str, bytes | None, dict[str, str]]:
        return v03.encode_rest_request(operation, request)

    def _result(self, operation: Operation, request: msgspec.Struct, content: bytes) -> Any:
        return _trim_history(request, _decoded(lambda raw: v03.decode_rest_result(operation, raw), content))

    def _event(self, data: bytes) -> m.StreamResponse:
        return _decoded(v03.decode_rest_event, data)
