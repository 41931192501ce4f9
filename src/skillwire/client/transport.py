"""The client's transport: one small protocol, one implementation per HTTP binding, I/O only.

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

What the bytes mean is the codec's of the protocol version the transport was made for
(:mod:`skillwire.wire.codec`; ``version="0.3"`` calls a v0.3 agent with the same v1.0 Structs); every request
carries that ``A2A-Version``. Retrying and resuming are the Client's business, not this layer's.

An answer is read within ``max_response_bytes`` (a stream: each event), uncompressed
(:mod:`skillwire.client.bodies`).
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol, TypeVar

import httpx
import msgspec

from skillwire.client.bodies import IDENTITY, MAX_RESPONSE_BYTES, raw_chunks, read_body
from skillwire.client.errors import AgentConnectionError, HTTPStatusError, InvalidResponseError
from skillwire.client.retry import parse_retry_after
from skillwire.errors import A2AError, MethodNotFoundError
from skillwire.protocol import models as m
from skillwire.protocol.operations import OPERATIONS, Operation, spec_of
from skillwire.wire.codec import JsonRpcCodec, RestCodec, jsonrpc_codec, rest_codec
from skillwire.wire.jsonrpc import read_response
from skillwire.wire.sse import SSEDecoder

__all__ = [
    "A2A_VERSION",
    "IDEMPOTENCY_KEY",
    "RESPONSE_TYPES",
    "JsonRpcTransport",
    "RestTransport",
    "Transport",
    "call_headers",
]

A2A_VERSION = "1.0"
R = TypeVar("R")

#: What ``send`` decodes each unary operation's result into (``None``: an empty result).
RESPONSE_TYPES: dict[Operation, type[msgspec.Struct] | None] = {
    s.operation: s.response_type for s in OPERATIONS if not s.streaming
}


class Transport(Protocol):
    """Carries one operation to the agent. Implementations: :class:`JsonRpcTransport`, :class:`RestTransport`
    and :class:`~skillwire.client.grpc.GrpcTransport`."""

    async def send(self, operation: Operation, request: msgspec.Struct) -> Any:
        """The decoded response of a unary operation."""
        ...

    def stream(self, operation: Operation, request: msgspec.Struct) -> AsyncIterator[m.StreamResponse]:
        """The events of a streaming operation (an async generator: close it if you stop early)."""
        ...


def _json(body: bytes) -> Any:
    try:
        return msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None


def _status_error(response: httpx.Response, body: bytes, error: A2AError | None = None) -> HTTPStatusError:
    """``error``: the A2A error the body holds (its message and reason then say what happened)."""
    text = (
        f"{error.message} ({error.reason})"
        if error is not None
        else body[:200].decode("utf-8", "replace").strip()
    )
    retry_after = parse_retry_after(response.headers.get("retry-after"))
    return HTTPStatusError(response.status_code, text, retry_after=retry_after, error=error)


def _decoded(decode: Callable[..., R], *args: Any) -> R:
    """``decode(*args)``, an answer that does not decode reported as InvalidResponseError."""
    try:
        return decode(*args)
    except ValueError as exc:  # msgspec's errors among them
        raise InvalidResponseError(str(exc)) from None


def _framework_default(decoded: Any) -> bool:
    """Starlette's and FastAPI's own 404/405 body (``{"detail": "Not Found"}``): no route, no A2A error."""
    return isinstance(decoded, dict) and set(decoded) == {"detail"}


def _check(operation: Operation, streaming: bool) -> None:
    if spec_of(operation).streaming != streaming:
        raise ValueError(
            f"{operation.value} {'does not stream: use send()' if streaming else 'streams: use stream()'}"
        )


@asynccontextmanager
async def _connection_errors() -> AsyncIterator[None]:
    try:
        yield
    except httpx.TransportError as exc:
        raise AgentConnectionError.of(exc) from exc


class _HttpTransport:
    def __init__(
        self,
        url: str,
        http: httpx.AsyncClient,
        *,
        version: str = A2A_VERSION,
        timeout: httpx.Timeout | None = None,
        headers: dict[str, str] | None = None,
        auth: httpx.Auth | None = None,
        follow_redirects: bool | None = None,
    ) -> None:
        self.url = url
        self._http = http
        self._timeout: Any = timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT
        #: The ``A2A-Version`` every request carries: the protocol version of this transport's codec.
        self.version = version
        self._headers = {**(headers or {}), "A2A-Version": version, **IDENTITY}
        #: The most bytes read of one answer, or of one event of a stream (InvalidResponseError past it).
        self.max_response_bytes = MAX_RESPONSE_BYTES
        #: Per-request credentials (:class:`skillwire.client.auth.CardAuth`); else the httpx client's own.
        self._auth: Any = auth if auth is not None else httpx.USE_CLIENT_DEFAULT
        #: False for a transport with credentials (a redirect would carry them elsewhere); None: the
        #: httpx client's own setting.
        self._follow: Any = follow_redirects if follow_redirects is not None else httpx.USE_CLIENT_DEFAULT
        #: What the bytes mean at ``version`` (ValueError for a version without a codec).
        self.codec = self._codec_of(version)
        self._ids = itertools.count(1)

    #: The binding's codec for a protocol version.
    _codec_of: Callable[[str], Any]

    def _url(self, path: str, query: dict[str, str]) -> httpx.URL:
        """``path`` (and its query) under the interface URL."""
        return httpx.URL(self.url.rstrip("/") + path, params=query or None)

    async def _request(
        self, method: str, url: str | httpx.URL, body: bytes | None
    ) -> tuple[httpx.Response, bytes]:
        """One unary HTTP exchange with this transport's headers, timeout and credentials: the response and
        its body (read within the budget); a failed connection is AgentConnectionError."""
        headers = {**self._headers, "Content-Type": "application/json"} if body is not None else self._headers
        headers = _traced(headers)
        async with _connection_errors():
            request = self._http.build_request(
                method, url, content=body, headers=headers, timeout=self._timeout
            )
            response = await self._http.send(
                request, stream=True, auth=self._auth, follow_redirects=self._follow
            )
            try:
                return response, await read_body(response, self.max_response_bytes)
            finally:
                await response.aclose()

    async def _sse(
        self, operation: Operation, method: str, url: str, body: bytes | None
    ) -> AsyncGenerator[bytes, None]:
        """The ``data`` of each SSE event of the response; error responses are raised."""
        headers = {**self._headers, "Accept": "text/event-stream"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        headers = _traced(headers)
        async with _connection_errors():
            request = self._http.build_request(
                method, url, content=body, headers=headers, timeout=self._timeout
            )
            response = await self._http.send(
                request, stream=True, auth=self._auth, follow_redirects=self._follow
            )
            try:
                if not response.headers.get("content-type", "").startswith("text/event-stream"):
                    raise self._failure(
                        operation, response, await read_body(response, self.max_response_bytes)
                    )
                decoder = SSEDecoder(self.max_response_bytes)
                async for chunk in raw_chunks(response):
                    try:
                        events = list(decoder.feed(chunk))
                    except ValueError as exc:  # an event past the budget
                        raise InvalidResponseError(str(exc)) from None
                    for data in events:
                        yield data
            finally:
                await response.aclose()

    def _failure(self, operation: Operation, response: httpx.Response, body: bytes) -> Exception:
        """What an answer that is not a success of the binding raises."""
        decoded = _json(body)
        error = self._error(operation, response.status_code, decoded)
        if response.status_code in (429, 503):  # for the retry policy, whatever the body says
            return _status_error(response, body, error)
        if error is not None:
            return error
        if response.status_code in (404, 405) and (not body or _framework_default(decoded)):
            return MethodNotFoundError(f"{response.request.method} {response.request.url.path}: not found")
        if response.is_success:
            return InvalidResponseError(f"unexpected content type {response.headers.get('content-type')!r}")
        return _status_error(response, body)

    def _error(self, operation: Operation, status: int, decoded: Any) -> A2AError | None:  # pragma: no cover
        raise NotImplementedError


class JsonRpcTransport(_HttpTransport):
    """The JSON-RPC 2.0 binding: every call POSTs an envelope to ``url``; streams come back as SSE."""

    codec: JsonRpcCodec
    _codec_of = staticmethod(jsonrpc_codec)

    def _error(self, operation: Operation, status: int, decoded: Any) -> A2AError | None:
        return (
            self.codec.decode_error(decoded["error"])
            if isinstance(decoded, dict) and "error" in decoded
            else None
        )

    def _unwrap(self, body: bytes) -> bytes | None:
        """The raw ``result`` of a response (None when absent); an ``error`` is raised."""
        result, error = _decoded(read_response, body)
        if error is not None:
            raise self.codec.decode_error(error)
        return result

    async def send(self, operation: Operation, request: msgspec.Struct) -> Any:
        _check(operation, streaming=False)
        call = self.codec.encode_call(next(self._ids), operation, request)
        response, body = await self._request("POST", self.url, call)
        if response.status_code != 200:
            raise self._failure(operation, response, body)
        result = self._unwrap(body)
        if spec_of(operation).response_type is None:
            return None
        if result is None:
            raise InvalidResponseError(f"{operation.value} returned no result")
        return _decoded(self.codec.decode_result, operation, request, result)

    async def stream(self, operation: Operation, request: msgspec.Struct) -> AsyncIterator[m.StreamResponse]:
        _check(operation, streaming=True)
        call = self.codec.encode_call(next(self._ids), operation, request)
        # aclosing: a consumer that stops early closes the HTTP response here, not in a finalizer task
        async with contextlib.aclosing(self._sse(operation, "POST", self.url, call)) as events:
            async for data in events:
                result = self._unwrap(data)
                if result is None:
                    raise InvalidResponseError("a stream event without a result")
                yield _decoded(self.codec.decode_event, result)


class RestTransport(_HttpTransport):
    """The HTTP+JSON binding: the operation's route under ``url`` (v0.3: under ``url/v1``), AIP-193 errors."""

    codec: RestCodec
    _codec_of = staticmethod(rest_codec)

    def _error(self, operation: Operation, status: int, decoded: Any) -> A2AError | None:
        return self.codec.decode_error(operation, status, decoded)

    async def send(self, operation: Operation, request: msgspec.Struct) -> Any:
        _check(operation, streaming=False)
        method, path, body, query = self.codec.encode_call(operation, request)
        response, content = await self._request(method, self._url(path, query), body)
        if not response.is_success:
            raise self._failure(operation, response, content)
        return _decoded(self.codec.decode_result, operation, request, content)

    async def stream(self, operation: Operation, request: msgspec.Struct) -> AsyncIterator[m.StreamResponse]:
        _check(operation, streaming=True)
        method, path, body, query = self.codec.encode_call(operation, request)
        url = str(self._url(path, query))
        async with contextlib.aclosing(self._sse(operation, method, url, body)) as events:
            async for data in events:
                event = _decoded(self.codec.decode_event, data)
                if isinstance(event, A2AError):
                    raise event
                yield event


def trace_context() -> dict[str, str]:
    """The current trace context as headers (W3C ``traceparent``, ...) when OpenTelemetry is in use in this
    process, so a call made inside a traced request or skill continues its trace at the agent called; else
    nothing, at the cost of one dict lookup (OpenTelemetry is never imported here). Every transport sends it."""
    propagate = sys.modules.get("opentelemetry.propagate")
    if propagate is None:
        return {}
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier


#: The ``Idempotency-Key`` of the call under way: the Client sets it around a call and its retries, and every
#: transport sends it (:func:`call_headers`), so that a retry is recognised as the same request.
IDEMPOTENCY_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar("idempotency_key", default=None)


def call_headers() -> dict[str, str]:
    """The headers of the call under way beside the transport's own: the trace context, the idempotency key."""
    context = trace_context()
    key = IDEMPOTENCY_KEY.get()
    if key is not None:
        context = {**context, "Idempotency-Key": key}
    return context


def _traced(headers: dict[str, str]) -> dict[str, str]:
    context = call_headers()
    return {**headers, **context} if context else headers
