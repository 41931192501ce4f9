"""The JSON-RPC 2.0 binding: the shared HTTP endpoint (:mod:`skillwire.server.bindings.endpoint`) with JSON-RPC's
envelope and answers.

JSON-RPC errors travel with HTTP 200 (the body carries the error), except for a body over the size limit
(413, refused before reading when ``Content-Length`` says so), a method other than POST (405), missing or
wrong credentials (401 with ``WWW-Authenticate``), credentials that fall short (403), and a busy
server (503 with ``Retry-After``; the body is the -32603 error with ErrorInfo ``SERVER_BUSY``). A
notification (no ``id``) is answered 204 with no body. The protocol version (``A2A-Version`` header, or
query parameter) picks the codec (:func:`skillwire.wire.codec.jsonrpc_codec`); a version that is not served
is answered, in the v1.0 shape, once the envelope is known to be valid, so under the request's id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

from skillwire.errors import (
    A2AError,
    InvalidRequestError,
    PermissionDeniedError,
    ServerBusyError,
    UnauthenticatedError,
)
from skillwire.protocol.models import StreamResponse
from skillwire.protocol.operations import Operation
from skillwire.protocol.versions import negotiate_version
from skillwire.server.bindings.asgi import SSE_HEADERS, Scope, error_headers
from skillwire.server.bindings.endpoint import DecodedCall, EarlyAnswer, HttpEndpoint, Request
from skillwire.wire.codec import JsonRpcCodec, jsonrpc_codec
from skillwire.wire.generations import codec_version
from skillwire.wire.jsonrpc import JsonRpcFailure, RequestId, ResultFramer, parse_envelope
from skillwire.wire.sse import encode_event

__all__ = ["JsonRpcEndpoint"]

_V10 = jsonrpc_codec("1.0")
#: Errors answered with their own HTTP status (401, 403) rather than under 200.
_AUTH_ERRORS = (UnauthenticatedError, PermissionDeniedError)
_SSE_EXTRA = [h for h in SSE_HEADERS if h[0] != b"content-type"]


class _Frames:
    """One call's answers: the codec's encoding under the call's id."""

    def __init__(self, codec: JsonRpcCodec, request_id: RequestId, expects_response: bool) -> None:
        self.codec = codec
        self.request_id = request_id
        self.expects_response = expects_response
        self._framer = ResultFramer(request_id)

    def result(self, operation: Operation, result: Any) -> tuple[int, bytes]:
        if not self.expects_response:
            return 204, b""
        return 200, self._framer.frame_raw(self.codec.encode_result(operation, result))

    def event(self, event: StreamResponse, logged: bytes | None = None) -> bytes:
        codec = self.codec
        raw = codec.encode_event(event) if logged is None else codec.encode_logged_event(event, logged)
        return self._framer.frame_raw(raw)

    def error(self, error: A2AError, streaming: bool) -> EarlyAnswer:
        body = self.codec.encode_error(self.request_id, error)
        busy = isinstance(error, ServerBusyError)
        if streaming and self.codec.stream_errors_as_events and self.expects_response and not busy:
            # v0.3 clients read a streaming call's answer only as SSE: the error is its one event (but they
            # check the HTTP status first, so busy is a 503 like on every other call)
            return EarlyAnswer(
                200, encode_event(body), _SSE_EXTRA, content_type=b"text/event-stream", error=error
            )
        status = 503 if busy else error.http_status if isinstance(error, _AUTH_ERRORS) else 200
        if not self.expects_response:
            return EarlyAnswer(204 if status == 200 else status, b"", error_headers(error), error=error)
        return EarlyAnswer(status, body, error_headers(error), error=error)

    def stream_error(self, error: A2AError) -> bytes:
        return self.codec.encode_error(self.request_id, error)


class JsonRpcEndpoint(HttpEndpoint):
    binding = "JSONRPC"

    def accept(self, scope: Scope, headers: Mapping[str, str]) -> bool:
        if scope["method"] != "POST":
            error = InvalidRequestError("JSON-RPC requests must be sent with POST")
            raise EarlyAnswer(405, _V10.encode_error(None, error), [(b"allow", b"POST")], error=error)
        return True

    def checks_content_type(self, route: Any) -> bool:
        return True

    def refuse(self, route: Any, error: A2AError, status: int) -> EarlyAnswer:
        # only a size the server will not read and missing or insufficient credentials change the HTTP
        # status (as a plain HTTP client or proxy expects them); the body says the rest
        if isinstance(error, _AUTH_ERRORS):
            return EarlyAnswer(
                error.http_status, _V10.encode_error(None, error), error_headers(error), error=error
            )
        return EarlyAnswer(413 if status == 413 else 200, _V10.encode_error(None, error), error=error)

    def decode(self, request: Request) -> DecodedCall:
        header = request.headers.get("a2a-version")
        if header is None and request.scope.get("query_string"):
            query = parse_qs(request.scope["query_string"].decode("latin-1"))
            header = (query.get("A2A-Version") or query.get("a2a-version") or [None])[0]
        refusal: A2AError | None = None
        try:
            version = negotiate_version(header)
            codec = jsonrpc_codec(codec_version(version, request.extensions))
        except A2AError as error:  # answered once the envelope is known to be valid, in the v1.0 shape
            codec, refusal, version = _V10, error, "1.0"
        try:
            envelope = parse_envelope(request.body, self.limits)
        except JsonRpcFailure as failure:
            raise _Frames(codec, failure.request_id, failure.expects_response).error(
                failure.error, False
            ) from None
        frames = _Frames(codec, envelope.id, envelope.expects_response)
        try:
            if refusal is not None:
                raise refusal
            operation, params = codec.decode_call(envelope, self.limits)
        except A2AError as error:
            raise frames.error(error, False) from None
        return DecodedCall(operation, params, version, frames)
