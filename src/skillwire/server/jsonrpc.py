"""The JSON-RPC 2.0 binding: an ASGI endpoint over the Dispatcher.

JSON-RPC errors travel with HTTP 200 (the body carries the error), except for a body over the size limit
(413, refused before reading when ``Content-Length`` says so), a method other than POST (405), and a busy
server (503 with ``Retry-After``; the body is the -32603 error with ErrorInfo ``SERVER_BUSY``). A stream's
first event is pulled before the response starts, so an error raised up front is a plain JSON-RPC error
response rather than a one-event stream.

A body is decoded within the decoded-JSON budgets of ``limits`` (:mod:`skillwire.wire.budget`; -32602
beyond one), on a worker thread when it is larger than ``limits.offload_decode_bytes`` so that a big body
does not hold the event loop, on the loop otherwise (small calls are the common case, and a thread hop
would cost them more than their decoding).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any
from urllib.parse import parse_qs

from msgspec import UNSET

from skillwire.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidRequestError,
    ServerBusyError,
)
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import StreamResponse
from skillwire.protocol.operations import Operation, spec_of
from skillwire.protocol.versions import negotiate_version
from skillwire.server.asgi import (
    SSE_HEADERS,
    BodyTooLarge,
    ClientGone,
    Receive,
    Scope,
    Send,
    error_headers,
    header_map,
    read_body,
    send_bytes,
    stream_sse,
)
from skillwire.server.context import CallContext
from skillwire.server.handler import Dispatcher
from skillwire.wire.jsonrpc import (
    JsonRpcFailure,
    RequestId,
    ResultFramer,
    decode_params,
    encode_error,
    encode_plain_error,
    parse_envelope,
)
from skillwire.wire.sse import encode_event

__all__ = ["JsonRpcEndpoint", "is_json_content_type", "requested_extensions", "v03_codec"]


def v03_codec() -> ModuleType:
    """The v0.3 codec, imported on the first v0.3 request (most deployments never see one)."""
    from skillwire.wire import v03

    return v03


log = logging.getLogger("skillwire.jsonrpc")

_JSON_TYPES = ("application/json", "application/a2a+json")


def is_json_content_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media in _JSON_TYPES or (media.startswith("application/") and media.endswith("+json"))


def _encode_error(version: str, request_id: RequestId, error: A2AError) -> bytes:
    if version == "0.3":
        return encode_plain_error(
            request_id, v03_codec().error_code(error), error.message, v03_codec().error_data(error)
        )
    return encode_error(request_id, error)


def requested_extensions(headers: dict[str, str]) -> frozenset[str]:
    """The extension URIs a client activates: ``A2A-Extensions`` (v1.0) or ``X-A2A-Extensions`` (v0.3)."""
    value = ",".join(v for v in (headers.get("a2a-extensions"), headers.get("x-a2a-extensions")) if v)
    return frozenset(part.strip() for part in value.split(",") if part.strip())


class JsonRpcEndpoint:
    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        limits: Limits,
        keepalive: float,
        activate: Callable[[frozenset[str]], frozenset[str]] = lambda requested: frozenset(),
        base_url: Callable[[Scope, Mapping[str, str]], str] | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.limits = limits
        self.max_body_bytes = limits.max_body_bytes
        self.keepalive = keepalive
        #: requested extension URIs -> the ones this agent activates (declared on its card)
        self._activate = activate
        #: the base URL of a request (the app's public URL, or where the client reached it)
        self._base_url = base_url

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            body = encode_error(None, InvalidRequestError("JSON-RPC requests must be sent with POST"))
            await send_bytes(send, 405, body, extra_headers=[(b"allow", b"POST")])
            return
        headers = header_map(scope)
        content_type = headers.get("content-type")
        if content_type is not None and not is_json_content_type(content_type):
            error: A2AError = ContentTypeNotSupportedError(
                f"Content-Type {content_type[:100]!r} is not supported: send application/json",
                metadata={"contentType": content_type[:100]},
            )
            await send_bytes(send, 200, encode_error(None, error))
            return
        try:
            body = await read_body(receive, self.max_body_bytes, headers.get("content-length"))
        except BodyTooLarge:
            error = InvalidRequestError(f"Request body exceeds the limit of {self.max_body_bytes} bytes")
            await send_bytes(send, 413, encode_error(None, error))
            return
        except ClientGone:
            return

        version_header = headers.get("a2a-version")
        if version_header is None and scope.get("query_string"):
            query = parse_qs(scope["query_string"].decode("latin-1"))
            version_header = (query.get("A2A-Version") or query.get("a2a-version") or [None])[0]
        try:
            if len(body) > self.limits.offload_decode_bytes:  # off the event loop: its cost grows with it
                call = await asyncio.to_thread(self._decode, body, version_header)
            else:
                call = self._decode(body, version_header)
        except _Refused as refused:
            await send_bytes(send, 200 if refused.answer else 204, refused.answer)
            return
        request_id, expects_response, version = call.request_id, call.expects_response, call.version
        operation, params = call.operation, call.params

        streaming = spec_of(operation).streaming
        activated = self._activate(requested_extensions(headers))
        echo = [(b"a2a-extensions", ",".join(sorted(activated)).encode())] if activated else None
        context = CallContext(
            protocol_version=version,
            tenant=getattr(params, "tenant", "") or "",
            extensions=activated,
            binding="JSONRPC",
            headers=headers,
            base_url=self._base_url(scope, headers) if self._base_url is not None else "",
            request_bytes=len(body),
        )
        try:
            result = await self.dispatcher.call(operation, params, context)
            if streaming:
                stream: AsyncIterator[StreamResponse] = result
                try:
                    first = await anext(stream)
                except StopAsyncIteration:
                    first = None
        except A2AError as error:
            body = _encode_error(version, request_id, error)
            if streaming and version == "0.3" and expects_response and not isinstance(error, ServerBusyError):
                # v0.3 clients read a streaming call's answer only as SSE: the error is its one event (but
                # they check the HTTP status first, so busy is a 503 like on every other call)
                await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
                await send({"type": "http.response.body", "body": encode_event(body)})
                return
            await self._answer(send, expects_response, body, echo, error)
            return
        except Exception:
            log.exception("%s failed", operation.value)
            await self._answer(
                send, expects_response, _encode_error(version, request_id, InternalError()), echo
            )
            return

        framer = ResultFramer(request_id)
        if not streaming:
            if version == "0.3":
                answer = framer.frame_raw(v03_codec().encode_result(operation, result))
            else:
                answer = framer.frame(result)
            await self._answer(send, expects_response, answer, echo)
            return
        if not expects_response:  # a streaming notification: the task runs, nobody listens
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
            await send_bytes(send, 204, b"")
            return

        def frame(event: StreamResponse) -> bytes:
            if version == "0.3":
                return encode_event(
                    framer.frame_raw(
                        v03_codec().encode_stream_event(event, final=v03_codec().is_final(event))
                    )
                )
            return encode_event(framer.frame(event))

        def frame_error(exc: Exception) -> bytes:
            if not isinstance(exc, A2AError):
                log.error("stream failed", exc_info=exc)
                exc = InternalError()
            return encode_event(_encode_error(version, request_id, exc))

        head = None if first is None else frame(first)
        await stream_sse(
            receive,
            send,
            stream,
            frame=frame,
            frame_error=frame_error,
            keepalive=self.keepalive,
            write_timeout=self.limits.write_timeout,
            first=head,
            extra_headers=echo,
        )

    def _decode(self, body: bytes, version_header: str | None) -> _Call:
        """The call in ``body``, within the decoded-JSON budgets; raises _Refused with the answer."""
        try:
            version: str | None = negotiate_version(version_header)
        except A2AError:
            version = None  # answered once the envelope is known to be valid, in the v1.0 shape
        try:
            envelope = parse_envelope(body, self.limits)
        except JsonRpcFailure as failure:
            answer = _encode_error(version or "1.0", failure.request_id, failure.error)
            raise _Refused(answer, failure.expects_response) from None
        request_id, expects_response = envelope.id, envelope.expects_response
        try:
            if version is None:
                negotiate_version(version_header)  # raises again, now with the request id known
            if version == "0.3":
                raw = None if envelope.params is UNSET else envelope.params
                limits = self.limits if envelope.may_exceed_shape else None
                operation, params = v03_codec().decode_request(envelope.method, raw, limits=limits)
            else:
                request = decode_params(envelope, self.limits)
                operation, params = request.spec.operation, request.params
        except JsonRpcFailure as failure:
            raise _Refused(
                encode_error(failure.request_id, failure.error), failure.expects_response
            ) from None
        except A2AError as error:
            raise _Refused(_encode_error(version or "1.0", request_id, error), expects_response) from None
        return _Call(request_id, expects_response, version or "1.0", operation, params)

    async def _answer(
        self,
        send: Send,
        expects_response: bool,
        body: bytes,
        headers: list[tuple[bytes, bytes]] | None = None,
        error: A2AError | None = None,
    ) -> None:
        """A JSON-RPC answer: HTTP 200 (204 for a notification), except 503 with Retry-After when busy."""
        extra = error_headers(error) if error is not None else None
        if extra:
            headers = [*(headers or []), *extra]
        status = 503 if isinstance(error, ServerBusyError) else 200
        if expects_response:
            await send_bytes(send, status, body, extra_headers=headers)
        else:
            await send_bytes(send, 204 if status == 200 else status, b"", extra_headers=headers)


@dataclass(frozen=True, slots=True)
class _Call:
    request_id: RequestId
    expects_response: bool
    version: str
    operation: Operation
    params: Any


class _Refused(Exception):
    """A request answered without a call: ``answer`` is the error response (empty for a notification)."""

    def __init__(self, answer: bytes, expects_response: bool) -> None:
        super().__init__()
        self.answer = answer if expects_response else b""
