"""The client's transport: one small protocol, one implementation per HTTP binding.

A transport knows how to carry an operation and nothing about what the operation means::

    transport = JsonRpcTransport("http://agent.example/", http)
    task = await transport.send(Operation.GET_TASK, GetTaskRequest(id="t1"))
    async for event in transport.stream(Operation.SUBSCRIBE_TO_TASK, SubscribeToTaskRequest(id="t1")):
        ...

``send`` returns the operation's v1.0 response Struct (:data:`RESPONSE_TYPES`; ``None`` for a delete);
``stream`` yields :class:`StreamResponse` events. Both bindings raise the same things:

* a protocol error as its :mod:`skillwire.errors` class (JSON-RPC ``code`` or REST ErrorInfo ``reason``),
  keeping the message and the ErrorInfo metadata;
* :class:`AgentConnectionError` when the connection fails or breaks (also mid-stream);
* :class:`HTTPStatusError` for an HTTP failure with no protocol error in it (429 and 503 among them, with
  ``Retry-After``), so that a retry policy can decide.

Every request carries ``A2A-Version: 1.0``. Retrying and resuming are the Client's business, not this layer's.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol
from urllib.parse import quote

import httpx
import msgspec

from skillwire.client.errors import AgentConnectionError, HTTPStatusError, InvalidResponseError
from skillwire.client.retry import parse_retry_after
from skillwire.errors import (
    BAD_REQUEST_TYPE,
    ERROR_INFO_TYPE,
    ERRORS_BY_CODE,
    A2AError,
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
)
from skillwire.protocol import models as m
from skillwire.protocol.operations import Operation
from skillwire.wire.sse import SSEDecoder

__all__ = [
    "A2A_VERSION",
    "RESPONSE_TYPES",
    "JsonRpcTransport",
    "RestTransport",
    "Transport",
    "error_from_details",
]

A2A_VERSION = "1.0"
_O = Operation

#: What ``send`` decodes each operation's result into (``None``: an Empty result).
RESPONSE_TYPES: dict[Operation, type[msgspec.Struct] | None] = {
    _O.SEND_MESSAGE: m.SendMessageResponse,
    _O.GET_TASK: m.Task,
    _O.LIST_TASKS: m.ListTasksResponse,
    _O.CANCEL_TASK: m.Task,
    _O.CREATE_PUSH_CONFIG: m.TaskPushNotificationConfig,
    _O.GET_PUSH_CONFIG: m.TaskPushNotificationConfig,
    _O.LIST_PUSH_CONFIGS: m.ListTaskPushNotificationConfigsResponse,
    _O.DELETE_PUSH_CONFIG: None,
    _O.GET_EXTENDED_AGENT_CARD: m.AgentCard,
}

STREAMING_OPERATIONS = frozenset({_O.SEND_STREAMING_MESSAGE, _O.SUBSCRIBE_TO_TASK})


class Transport(Protocol):
    """Carries one operation to the agent. Implementations: :class:`JsonRpcTransport`, :class:`RestTransport`."""

    async def send(self, operation: Operation, request: msgspec.Struct) -> Any:
        """The decoded response of a unary operation."""
        ...

    def stream(self, operation: Operation, request: msgspec.Struct) -> AsyncIterator[m.StreamResponse]:
        """The events of a streaming operation (an async generator: close it if you stop early)."""
        ...


# -- errors ------------------------------------------------------------------------------------------------

_ERRORS_BY_REASON: dict[str, type[A2AError]] = {cls.reason: cls for cls in ERRORS_BY_CODE.values()}
#: ErrorInfo is required of the A2A-specific errors only, so a standard error may come without one: these
#: google.rpc codes stand for one standard JSON-RPC error each.
_ERRORS_BY_STATUS: dict[str, type[A2AError]] = {
    "INVALID_ARGUMENT": InvalidParamsError,  # -32602
    "INTERNAL": InternalError,  # -32603
}


def _build_error(cls: type[A2AError], message: Any, details: Any) -> A2AError:
    metadata: dict[str, Any] = {}
    violations: list[tuple[str, str]] = []
    for detail in details if isinstance(details, list) else ():
        if not isinstance(detail, dict):
            continue
        if detail.get("@type") == ERROR_INFO_TYPE and isinstance(detail.get("metadata"), dict):
            metadata.update(detail["metadata"])
        elif detail.get("@type") == BAD_REQUEST_TYPE:
            for v in detail.get("fieldViolations") or ():
                if isinstance(v, dict):
                    violations.append((str(v.get("field", "")), str(v.get("description", ""))))
    text = message if isinstance(message, str) and message else None
    return cls(text, metadata=metadata, field_violations=violations)


def _reason(details: Any) -> str | None:
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and detail.get("@type") == ERROR_INFO_TYPE:
            reason = detail.get("reason")
            return reason if isinstance(reason, str) else None
    return None


def error_from_jsonrpc(error: Any) -> A2AError:
    """The A2AError for a JSON-RPC ``error`` object: the class comes from ``code``."""
    if not isinstance(error, dict):
        return InternalError(f"malformed JSON-RPC error: {error!r}"[:200])
    code = error.get("code")
    cls = ERRORS_BY_CODE.get(code) if isinstance(code, int) else None
    if cls is None:  # an unknown code: fall back on the ErrorInfo reason, then on the base class
        cls = _ERRORS_BY_REASON.get(_reason(error.get("data")) or "", A2AError)
    return _build_error(cls, error.get("message"), error.get("data"))


def error_from_details(status: Any) -> A2AError | None:
    """The A2AError for an AIP-193 ``error`` object: the class comes from the ErrorInfo ``reason`` or, for an
    error without one, from a standard ``status`` (INTERNAL, INVALID_ARGUMENT); None otherwise."""
    if not isinstance(status, dict):
        return None
    cls = _ERRORS_BY_REASON.get(_reason(status.get("details")) or "")
    if cls is None:
        code = status.get("status")
        cls = _ERRORS_BY_STATUS.get(code) if isinstance(code, str) else None
    if cls is None:
        return None
    return _build_error(cls, status.get("message"), status.get("details"))


def _retry_after(response: httpx.Response) -> float | None:
    return parse_retry_after(response.headers.get("retry-after"))


def _json(body: bytes) -> Any:
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None


def _status_error(response: httpx.Response, body: bytes) -> HTTPStatusError:
    text = body[:200].decode("utf-8", "replace").strip()
    return HTTPStatusError(response.status_code, text, retry_after=_retry_after(response))


def _decode(raw: bytes | msgspec.Raw, type_: type[Any]) -> Any:
    try:
        return msgspec.json.decode(raw, type=type_)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise InvalidResponseError(f"not a valid {type_.__name__}: {exc}") from None


@asynccontextmanager
async def _connection_errors() -> AsyncIterator[None]:
    try:
        yield
    except httpx.TransportError as exc:
        raise AgentConnectionError(f"{type(exc).__name__}: {exc}") from exc


class _HttpTransport:
    def __init__(
        self,
        url: str,
        http: httpx.AsyncClient,
        *,
        timeout: httpx.Timeout | None = None,
        headers: dict[str, str] | None = None,
        auth: httpx.Auth | None = None,
    ) -> None:
        self.url = url
        self._http = http
        self._timeout: Any = timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT
        self._headers = {**(headers or {}), "A2A-Version": self.version}
        #: Per-request credentials (:class:`skillwire.client.auth.CardAuth`); else the httpx client's own.
        self._auth: Any = auth if auth is not None else httpx.USE_CLIENT_DEFAULT

    #: The ``A2A-Version`` every request carries.
    version = A2A_VERSION

    def _url(self, path: str, query: dict[str, str]) -> httpx.URL:
        """``path`` (and its query) under the interface URL."""
        return httpx.URL(self.url.rstrip("/") + path, params=query or None)

    async def _request(self, method: str, url: str | httpx.URL, body: bytes | None) -> httpx.Response:
        """One unary HTTP exchange with this transport's headers, timeout and credentials; a failed
        connection is AgentConnectionError."""
        headers = {**self._headers, "Content-Type": "application/json"} if body is not None else self._headers
        async with _connection_errors():
            return await self._http.request(
                method, url, content=body, headers=headers, timeout=self._timeout, auth=self._auth
            )

    async def _sse(self, method: str, url: str, body: bytes | None) -> AsyncGenerator[bytes, None]:
        """The ``data`` of each SSE event of the response; error responses are raised."""
        headers = {**self._headers, "Accept": "text/event-stream"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        async with _connection_errors():
            request = self._http.build_request(
                method, url, content=body, headers=headers, timeout=self._timeout
            )
            response = await self._http.send(request, stream=True, auth=self._auth)
            try:
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    raise self._failure(response, await response.aread())
                decoder = SSEDecoder()
                async for chunk in response.aiter_bytes():
                    for data in decoder.feed(chunk):
                        yield data
            finally:
                await response.aclose()

    def _failure(self, response: httpx.Response, body: bytes) -> Exception:  # pragma: no cover - abstract
        raise NotImplementedError


# -- JSON-RPC ----------------------------------------------------------------------------------------------


class _RpcResponse(msgspec.Struct):
    jsonrpc: Any = None
    id: Any = None
    result: msgspec.Raw = msgspec.Raw(b"")
    error: Any = None


_rpc_response = msgspec.json.Decoder(_RpcResponse)


class JsonRpcTransport(_HttpTransport):
    """The JSON-RPC 2.0 binding: every call POSTs an envelope to ``url``; streams come back as SSE."""

    def __init__(
        self,
        url: str,
        http: httpx.AsyncClient,
        *,
        timeout: httpx.Timeout | None = None,
        headers: dict[str, str] | None = None,
        auth: httpx.Auth | None = None,
    ) -> None:
        super().__init__(url, http, timeout=timeout, headers=headers, auth=auth)
        self._ids = itertools.count(1)

    def _envelope(self, operation: Operation, request: msgspec.Struct) -> bytes:
        return msgspec.json.encode(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": operation.value, "params": request}
        )

    # The protocol-version seams (the v0.3 transport overrides these four).

    def _rpc_error(self, error: Any) -> A2AError:
        """The A2AError for a JSON-RPC ``error`` member."""
        return error_from_jsonrpc(error)

    def _result(self, operation: Operation, request: msgspec.Struct, raw: msgspec.Raw) -> Any:
        """The response Struct of a unary ``operation`` from its raw ``result``."""
        type_ = RESPONSE_TYPES[operation]
        return None if type_ is None else _decode(raw, type_)

    def _event(self, raw: msgspec.Raw) -> m.StreamResponse:
        """One stream event from its raw ``result``."""
        return _decode(raw, m.StreamResponse)  # type: ignore[no-any-return]

    def _unwrap(self, body: bytes) -> msgspec.Raw | None:
        """The raw ``result`` of a response envelope; an ``error`` is raised."""
        try:
            envelope = _rpc_response.decode(body)
        except (msgspec.ValidationError, msgspec.DecodeError):
            raise InvalidResponseError(f"not a JSON-RPC response: {body[:200]!r}") from None
        if envelope.error is not None:
            raise self._rpc_error(envelope.error)
        result = bytes(envelope.result)
        return None if result in (b"", b"null") else envelope.result

    def _failure(self, response: httpx.Response, body: bytes) -> Exception:
        if response.status_code not in (429, 503):
            decoded = _json(body)
            if isinstance(decoded, dict) and "error" in decoded:
                return self._rpc_error(decoded["error"])
        if response.is_success:
            return InvalidResponseError(f"unexpected content type {response.headers.get('content-type')!r}")
        return _status_error(response, body)

    async def send(self, operation: Operation, request: msgspec.Struct) -> Any:
        if operation in STREAMING_OPERATIONS:
            raise ValueError(f"{operation.value} streams: use stream()")
        response = await self._request("POST", self.url, self._envelope(operation, request))
        body = response.content
        if response.status_code != 200:
            raise self._failure(response, body)
        result = self._unwrap(body)
        if operation is _O.DELETE_PUSH_CONFIG:
            return None
        if result is None:
            raise InvalidResponseError(f"{operation.value} returned no result")
        return self._result(operation, request, result)

    async def stream(self, operation: Operation, request: msgspec.Struct) -> AsyncIterator[m.StreamResponse]:
        if operation not in STREAMING_OPERATIONS:
            raise ValueError(f"{operation.value} does not stream: use send()")
        # aclosing: a consumer that stops early closes the HTTP response here, not in a finalizer task
        async with contextlib.aclosing(
            self._sse("POST", self.url, self._envelope(operation, request))
        ) as events:
            async for data in events:
                result = self._unwrap(data)
                if result is None:
                    raise InvalidResponseError("a stream event without a result")
                yield self._event(result)


# -- HTTP+JSON ---------------------------------------------------------------------------------------------


def _query(request: msgspec.Struct, skip: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in msgspec.to_builtins(request).items():
        if key in skip or value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def _seg(value: str) -> str:
    return quote(value, safe="")


class RestTransport(_HttpTransport):
    """The HTTP+JSON binding: the v1.0 paths under ``url`` (no ``/v1``), AIP-193 errors."""

    # The protocol-version seams (the v0.3 transport overrides these, and ``_failure``).

    def _target(self, operation: Operation, request: Any) -> tuple[str, str, bytes | None, dict[str, str]]:
        """(method, path, body, query) for ``request``."""
        tenant = getattr(request, "tenant", "")
        prefix = f"/{_seg(tenant)}" if tenant else ""
        body = msgspec.json.encode(request)
        if operation in (_O.SEND_MESSAGE, _O.SEND_STREAMING_MESSAGE):
            verb = "send" if operation is _O.SEND_MESSAGE else "stream"
            return "POST", f"{prefix}/message:{verb}", body, {}
        if operation is _O.GET_TASK:
            return "GET", f"{prefix}/tasks/{_seg(request.id)}", None, _query(request, ("tenant", "id"))
        if operation is _O.LIST_TASKS:
            return "GET", f"{prefix}/tasks", None, _query(request, ("tenant",))
        if operation is _O.CANCEL_TASK:
            extra = msgspec.json.encode({"metadata": request.metadata} if request.metadata else {})
            return "POST", f"{prefix}/tasks/{_seg(request.id)}:cancel", extra, {}
        if operation is _O.SUBSCRIBE_TO_TASK:
            return "POST", f"{prefix}/tasks/{_seg(request.id)}:subscribe", b"{}", {}
        if operation is _O.GET_EXTENDED_AGENT_CARD:
            return "GET", f"{prefix}/extendedAgentCard", None, {}
        configs = f"{prefix}/tasks/{_seg(request.task_id)}/pushNotificationConfigs"
        if operation is _O.CREATE_PUSH_CONFIG:
            return "POST", configs, body, {}
        if operation is _O.LIST_PUSH_CONFIGS:
            return "GET", configs, None, _query(request, ("tenant", "taskId"))
        if operation is _O.GET_PUSH_CONFIG:
            return "GET", f"{configs}/{_seg(request.id)}", None, {}
        if operation is _O.DELETE_PUSH_CONFIG:
            return "DELETE", f"{configs}/{_seg(request.id)}", None, {}
        raise ValueError(f"no REST route for {operation!r}")  # pragma: no cover - the table is complete

    def _error(self, operation: Operation, response: httpx.Response, body: bytes) -> Exception:
        """What a unary call answered with an HTTP error raises."""
        return self._failure(response, body)

    def _result(self, operation: Operation, request: msgspec.Struct, content: bytes) -> Any:
        """The response Struct of a unary ``operation`` from its body."""
        type_ = RESPONSE_TYPES[operation]
        return None if type_ is None else _decode(content, type_)

    def _event(self, data: bytes) -> m.StreamResponse:
        """One stream event from its SSE ``data``."""
        return _decode(data, m.StreamResponse)  # type: ignore[no-any-return]

    def _failure(self, response: httpx.Response, body: bytes) -> Exception:
        if response.status_code in (429, 503):
            return _status_error(response, body)
        decoded = _json(body)
        error = error_from_details(decoded.get("error")) if isinstance(decoded, dict) else None
        if error is not None:
            return error
        if response.status_code == 404 and not body:
            return MethodNotFoundError(f"{response.request.method} {response.request.url.path}: not found")
        if response.is_success:
            return InvalidResponseError(f"unexpected content type {response.headers.get('content-type')!r}")
        return _status_error(response, body)

    async def send(self, operation: Operation, request: msgspec.Struct) -> Any:
        if operation in STREAMING_OPERATIONS:
            raise ValueError(f"{operation.value} streams: use stream()")
        method, path, body, query = self._target(operation, request)
        response = await self._request(method, self._url(path, query), body)
        content = response.content
        if not response.is_success:
            raise self._error(operation, response, content)
        return self._result(operation, request, content)

    async def stream(self, operation: Operation, request: msgspec.Struct) -> AsyncIterator[m.StreamResponse]:
        if operation not in STREAMING_OPERATIONS:
            raise ValueError(f"{operation.value} does not stream: use send()")
        method, path, body, query = self._target(operation, request)
        async with contextlib.aclosing(self._sse(method, str(self._url(path, query)), body)) as events:
            async for data in events:
                if data.startswith(b'{"error"'):
                    decoded = _json(data)
                    error = error_from_details(decoded.get("error")) if isinstance(decoded, dict) else None
                    raise error or InvalidResponseError(f"a stream error: {data[:200]!r}")
                yield self._event(data)
