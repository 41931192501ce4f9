"""The HTTP+JSON (REST) binding: an ASGI endpoint over the Dispatcher.

Errors are AIP-193 bodies, ``{"error": {"code": <HTTP status>, "status": <google.rpc.Code name>,
"message": ..., "details": [ErrorInfo, ...]}}``, with the HTTP status of the v1.0.1 table. Responses are
``application/json`` (the spec prefers ``application/a2a+json``; the conformance suite expects
``application/json``, see docs/conformance.md); requests may use either. A request body whose
Content-Type is not JSON gets HTTP 415. Streams are SSE whose events are bare StreamResponse objects; an
error before the first event is a plain JSON error response, an error after it is a last ``data:`` event
holding the AIP-193 error object. A busy server answers 503 ``UNAVAILABLE`` with ``Retry-After``.

Request data (body, query, path) is held to the decoded-JSON budgets of ``limits`` (400 INVALID_ARGUMENT
naming the budget; :mod:`skillwire.wire.budget`); a body larger than ``limits.offload_decode_bytes`` is
decoded on a worker thread, off the event loop; a ``Content-Length`` over ``limits.max_body_bytes`` is
refused with 413 before the body is read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qs

import msgspec

from skillwire.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidRequestError,
    MethodNotFoundError,
    VersionNotSupportedError,
)
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import StreamResponse
from skillwire.protocol.operations import Operation, spec_of
from skillwire.protocol.versions import negotiate_version
from skillwire.server.asgi import (
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
from skillwire.server.jsonrpc import is_json_content_type, requested_extensions, v03_codec
from skillwire.wire.budget import exceeded
from skillwire.wire.rest import RestCall, encode_status, match_route, parse_call
from skillwire.wire.sse import encode_event

__all__ = ["RestEndpoint"]


log = logging.getLogger("skillwire.rest")

_encoder = msgspec.json.Encoder()


class RestEndpoint:
    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        limits: Limits,
        keepalive: float,
        activate: Callable[[frozenset[str]], frozenset[str]],
        base_url: Callable[[Scope, Mapping[str, str]], str] | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.limits = limits
        self.max_body_bytes = limits.max_body_bytes
        self.keepalive = keepalive
        self._activate = activate
        #: the base URL of a request (the app's public URL, or where the client reached it)
        self._base_url = base_url

    async def _error(
        self, send: Send, error: A2AError, status: int | None = None, headers: Any = None
    ) -> None:
        extra = error_headers(error)
        if extra:
            headers = [*(headers or []), *extra]
        await send_bytes(
            send, status or error.http_status, encode_status(error, status), extra_headers=headers
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve the request if a route matches it; return False (sending nothing) if none does."""
        method, path = scope["method"], scope["path"]
        headers = header_map(scope)
        try:
            query = parse_qs(
                scope.get("query_string", b"").decode("latin-1"),
                keep_blank_values=True,
                max_num_fields=self.limits.max_json_nodes,
            )
        except ValueError:  # more fields than max_num_fields
            limit = self.limits.max_json_nodes
            await self._error(send, exceeded("query", f"more than {limit} values", "max_json_nodes", limit))
            return True
        version_header = headers.get("a2a-version") or (query.pop("A2A-Version", None) or [None])[-1]
        legacy = path.startswith("/v1/") and _speaks_v03(version_header)
        call = None
        if not legacy:
            try:
                call = match_route(method, path)
            except MethodNotFoundError as exc:
                await self._error(send, exc, 405, [(b"allow", exc.metadata.get("allow", "").encode())])
                return True
            if call is None:
                return False
        content_type = headers.get("content-type")
        if (
            method in ("POST", "PUT", "PATCH")
            and content_type is not None
            and not is_json_content_type(content_type)
        ):
            error: A2AError = ContentTypeNotSupportedError(
                f"Content-Type {content_type[:100]!r} is not supported: send application/json",
                metadata={"contentType": content_type[:100]},
            )
            await self._error(send, error, 415)
            return True
        try:
            body = await read_body(receive, self.max_body_bytes, headers.get("content-length"))
        except BodyTooLarge:
            error = InvalidRequestError(f"Request body exceeds the limit of {self.max_body_bytes} bytes")
            await self._error(send, error, 413)
            return True
        except ClientGone:
            return True

        activated = self._activate(requested_extensions(headers))
        echo = [(b"a2a-extensions", ",".join(sorted(activated)).encode())] if activated else None
        try:
            version = negotiate_version(version_header)
            if len(body) > self.limits.offload_decode_bytes:  # off the event loop: its cost grows with it
                decoded = await asyncio.to_thread(self._decode, method, path, call, query, body, version)
            else:
                decoded = self._decode(method, path, call, query, body, version)
            if decoded is None:
                return False
            operation, params = decoded
            context = CallContext(
                protocol_version=version,
                tenant=getattr(params, "tenant", "") or "",
                extensions=activated,
                binding="HTTP+JSON",
                headers=headers,
                base_url=self._base_url(scope, headers) if self._base_url is not None else "",
                request_bytes=len(body),
            )
            result = await self.dispatcher.call(operation, params, context)
            streaming = spec_of(operation).streaming
            if streaming:
                try:
                    first = await anext(result)
                except StopAsyncIteration:
                    first = None
        except A2AError as error:
            await self._error(send, error, headers=echo)
            return True
        except Exception:
            log.exception("%s failed", path)
            await self._error(send, InternalError(), headers=echo)
            return True

        if not streaming:
            if legacy:
                body_out = v03_codec().encode_rest_result(operation, result)
            else:
                body_out = b"{}" if result is None else _encoder.encode(result)
            await send_bytes(send, 200, body_out, extra_headers=echo)
            return True

        def frame(event: StreamResponse) -> bytes:
            if legacy:
                return encode_event(
                    v03_codec().encode_rest_stream_event(event, final=v03_codec().is_final(event))
                )
            return encode_event(_encoder.encode(event))

        def frame_error(exc: Exception) -> bytes:
            if not isinstance(exc, A2AError):
                log.error("stream failed", exc_info=exc)
                exc = InternalError()
            return encode_event(encode_status(exc))

        await stream_sse(
            receive,
            send,
            result,
            frame=frame,
            frame_error=frame_error,
            keepalive=self.keepalive,
            write_timeout=self.limits.write_timeout,
            first=None if first is None else frame(first),
            extra_headers=echo,
        )
        return True

    def _decode(
        self,
        method: str,
        path: str,
        call: RestCall | None,
        query: dict[str, list[str]],
        body: bytes,
        version: str,
    ) -> tuple[Operation, Any] | None:
        """(operation, request Struct) of a request, within the decoded-JSON budgets; None when no v0.3
        route matches (``call`` is None for a v0.3 request)."""
        if call is None:
            return v03_codec().match_rest(method, path, query, body, limits=self.limits)  # type: ignore[no-any-return]
        if version != "1.0":
            raise VersionNotSupportedError(
                "These paths speak A2A 1.0: send 'A2A-Version: 1.0' (a request without it means 0.3,"
                " whose REST paths start with /v1/)",
                metadata={"requestedVersion": version, "supportedVersions": "1.0, 0.3"},
            )
        return call.operation, parse_call(call, query, body, self.limits)


def _speaks_v03(version_header: str | None) -> bool:
    """Whether a request is a v0.3 one: no (or a blank) A2A-Version, or 0.3.x."""
    if version_header is None or not version_header.strip():
        return True
    return version_header.strip().split(".")[:2] == ["0", "3"]
