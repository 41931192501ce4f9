"""The HTTP+JSON (REST) binding: the shared HTTP endpoint (:mod:`skillwire.server.bindings.endpoint`) with REST's
routes and answers.

Errors are AIP-193 bodies, ``{"error": {"code": <HTTP status>, "status": <google.rpc.Code name>,
"message": ..., "details": [ErrorInfo, ...]}}``, with the HTTP status of the v1.0.1 table. Responses are
``application/json`` (the spec prefers ``application/a2a+json``; the conformance suite expects
``application/json``, see docs/conformance.md); requests may use either. A request body whose
Content-Type is not JSON gets HTTP 415. Streams are SSE whose events are bare StreamResponse objects; an
error before the first event is a plain JSON error response, an error after it is a last ``data:`` event
holding the AIP-193 error object. A busy server answers 503 ``UNAVAILABLE`` with ``Retry-After``.

The codec is chosen from the path and the ``A2A-Version`` header (or query parameter): paths under ``/v1/``
without a version, or at 0.3, are v0.3's (:mod:`skillwire.wire.v03.codec`); every other path is v1.0's,
where a version other than 1.0 is VersionNotSupported. Request data (body, query, path) is held to the
decoded-JSON budgets of ``limits`` (400 INVALID_ARGUMENT naming the budget; :mod:`skillwire.wire.budget`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs

import msgspec

from skillwire.errors import A2AError, MethodNotFoundError, VersionNotSupportedError
from skillwire.protocol.models import StreamResponse
from skillwire.protocol.operations import Operation
from skillwire.protocol.versions import negotiate_version
from skillwire.server.bindings.asgi import Scope, error_headers
from skillwire.server.bindings.endpoint import DecodedCall, EarlyAnswer, HttpEndpoint, Request
from skillwire.wire.budget import exceeded
from skillwire.wire.codec import RestCodec, rest_codec
from skillwire.wire.generations import codec_version

__all__ = ["RestEndpoint"]

_V10 = rest_codec("1.0")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


class _Frames:
    expects_response = True

    def __init__(self, codec: RestCodec) -> None:
        self.codec = codec

    def event(self, event: StreamResponse, logged: bytes | None = None) -> bytes:
        """A REST event is the codec's encoding as it is."""
        codec = self.codec
        return codec.encode_event(event) if logged is None else codec.encode_logged_event(event, logged)

    def result(self, operation: Operation, result: Any) -> tuple[int, bytes]:
        return 200, self.codec.encode_result(operation, result)

    def error(self, error: A2AError, streaming: bool) -> EarlyAnswer:
        return EarlyAnswer(
            error.http_status, self.codec.encode_error(error), error_headers(error), error=error
        )

    def stream_error(self, error: A2AError) -> bytes:
        return self.codec.encode_error(error)


_FRAMES_10 = _Frames(_V10)  # stateless: one serves every v1.0 call
_V11 = rest_codec("1.1")
_FRAMES_11 = _Frames(_V11)


class _Route(msgspec.Struct, frozen=True):
    codec: RestCodec
    frames: _Frames
    route: Any
    method: str
    query: dict[str, list[str]]
    version_header: str | None


def _speaks_v03(version_header: str | None) -> bool:
    """Whether a request is a v0.3 one: no (or a blank) A2A-Version, or 0.3.x."""
    if version_header is None or not version_header.strip():
        return True
    return version_header.strip().split(".")[:2] == ["0", "3"]


class RestEndpoint(HttpEndpoint):
    binding = "HTTP+JSON"

    def operation_of(self, route: Any) -> Operation | None:
        operation = getattr(getattr(route, "route", None), "operation", None)
        return operation if isinstance(operation, Operation) else None

    def accept(self, scope: Scope, headers: Mapping[str, str]) -> _Route | None:
        method, path = scope["method"], scope["path"]
        try:
            query = parse_qs(
                scope.get("query_string", b"").decode("latin-1"),
                keep_blank_values=True,
                max_num_fields=self.limits.max_json_nodes,
            )
        except ValueError:  # more fields than max_num_fields
            limit = self.limits.max_json_nodes
            error = exceeded("query", f"more than {limit} values", "max_json_nodes", limit)
            raise EarlyAnswer(error.http_status, _V10.encode_error(error), error=error) from None
        version_header = headers.get("a2a-version") or (query.pop("A2A-Version", None) or [None])[-1]
        codec = rest_codec("0.3") if path.startswith("/v1/") and _speaks_v03(version_header) else _V10
        raw = scope.get("raw_path")
        if raw and codec is _V10:  # its routes match the path as sent, so an id may hold "/" or ":" (escaped)
            path = raw.partition(b"?")[0].decode("latin-1")
        try:
            route = codec.match(method, path)
        except MethodNotFoundError as exc:
            allow = [(b"allow", exc.metadata.get("allow", "").encode())]
            raise EarlyAnswer(405, codec.encode_error(exc, 405), allow, error=exc) from None
        if route is None:
            return None
        return _Route(
            codec, _FRAMES_10 if codec is _V10 else _Frames(codec), route, method, query, version_header
        )

    def checks_content_type(self, route: _Route) -> bool:
        return route.method in _BODY_METHODS

    def refuse(self, route: _Route, error: A2AError, status: int) -> EarlyAnswer:
        return EarlyAnswer(status, route.codec.encode_error(error, status), error_headers(error), error=error)

    def decode(self, request: Request) -> DecodedCall | None:
        r: _Route = request.route
        frames, codec = r.frames, r.codec
        try:
            version = negotiate_version(r.version_header)
            if version != codec.version and not (codec is _V10 and version == "1.1"):
                raise VersionNotSupportedError(
                    "These paths speak A2A 1.0: send 'A2A-Version: 1.0' (a request without it means 0.3,"
                    " whose REST paths start with /v1/)",
                    metadata={"requestedVersion": version, "supportedVersions": "1.0, 1.1, 0.3"},
                )
            if codec is _V10 and codec_version(version, request.extensions) == "1.1":
                codec, frames = _V11, _FRAMES_11  # 1.0's routes and requests, with the generations
            scope = request.scope
            decoded = codec.decode_call(r.route, r.method, scope["path"], r.query, request.body, self.limits)
        except A2AError as error:
            raise frames.error(error, False) from None
        return None if decoded is None else DecodedCall(decoded[0], decoded[1], version, frames)
