"""The A2A v1.0 codecs (sans-IO): JSON-RPC (:data:`JSONRPC`) and HTTP+JSON (:data:`REST`), both directions.

v1.0 is the version the request handler speaks, so these codecs only frame: a JSON-RPC ``params`` member
is the ProtoJSON request message of the method's operation, and ``result`` the response message; an
HTTP+JSON request is the route's path, query and body (:mod:`skillwire.wire.rest`), and its answer the
response message. Routes and message types come from :data:`~skillwire.protocol.operations.OPERATIONS`.
See :mod:`skillwire.wire.codec` for the interface.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import msgspec

from skillwire.errors import A2AError, UnsupportedOperationError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import StreamResponse
from skillwire.protocol.operations import Operation, spec_of
from skillwire.wire import jsonrpc, rest
from skillwire.wire.errors import error_from_jsonrpc, error_from_status
from skillwire.wire.generations import without_generations

__all__ = ["JSONRPC", "REST", "JsonRpc10", "Rest10"]

_encoder = msgspec.json.Encoder()
_event_decoder = msgspec.json.Decoder(StreamResponse)
_decoders: dict[Operation, msgspec.json.Decoder[Any]] = {}


def _response(operation: Operation, raw: bytes) -> Any:
    """The operation's v1.0 response Struct from its JSON (None for an empty answer)."""
    decoder = _decoders.get(operation)
    if decoder is None:
        type_ = spec_of(operation).response_type
        if type_ is None:
            return None
        decoder = _decoders[operation] = msgspec.json.Decoder(type_)
    return decoder.decode(raw)


def _encode_v10(value: Any) -> bytes:
    """A v1.0 answer: without the 1.1 generation fields (:mod:`skillwire.wire.generations`)."""
    return _encoder.encode(without_generations(value))


def _logged_v10(event: StreamResponse, logged: bytes) -> bytes:
    """A v1.0 event from its logged (1.1) JSON: a status or artifact update's generation is its last field,
    so its JSON ends ``,"generation":N}}`` and the v1.0 JSON is the same less that field (msgspec writes
    fields in their declared order and leaves out a 0). Anything else is encoded afresh."""
    update = event.artifact_update or event.status_update
    if update is not None and update.generation:
        tail = b',"generation":%d}}' % update.generation
        if logged.endswith(tail):
            return logged[: -len(tail)] + b"}}"
    return _encode_v10(event)


class JsonRpc10:
    version = "1.0"
    stream_errors_as_events = False

    def decode_call(self, envelope: jsonrpc.Envelope, limits: Limits | None) -> tuple[Operation, Any]:
        spec, params = jsonrpc.decode_method_params(envelope, limits)
        return spec.operation, params

    def encode_result(self, operation: Operation, result: Any) -> bytes:
        return _encode_v10(result)

    encode_event: Callable[[StreamResponse], bytes] = staticmethod(_encode_v10)
    encode_logged_event: Callable[[StreamResponse, bytes], bytes] = staticmethod(_logged_v10)

    def encode_error(self, request_id: jsonrpc.RequestId, error: A2AError) -> bytes:
        return jsonrpc.encode_error(request_id, error)

    def encode_call(self, request_id: int, operation: Operation, request: Any) -> bytes:
        return _encoder.encode(
            {"jsonrpc": "2.0", "id": request_id, "method": operation.value, "params": request}
        )

    def decode_result(self, operation: Operation, request: Any, raw: bytes) -> Any:
        return _response(operation, raw)

    def decode_event(self, raw: bytes) -> StreamResponse:
        return _event_decoder.decode(raw)

    def decode_error(self, error: Any) -> A2AError:
        return error_from_jsonrpc(error)


def _segment(value: Any) -> str:
    return quote(str(value), safe="")


def _query(fields: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in fields.items():
        if value is not None:
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


class Rest10:
    version = "1.0"

    def match(self, method: str, path: str) -> rest.RestCall | None:
        return rest.match_route(method, path)

    def decode_call(
        self,
        route: rest.RestCall,
        method: str,
        path: str,
        query: Mapping[str, list[str]],
        body: bytes,
        limits: Limits,
    ) -> tuple[Operation, Any]:
        return route.operation, rest.parse_call(route, query, body, limits)

    def encode_result(self, operation: Operation, result: Any) -> bytes:
        return b"{}" if result is None else _encode_v10(result)

    encode_event: Callable[[StreamResponse], bytes] = staticmethod(_encode_v10)
    encode_logged_event: Callable[[StreamResponse, bytes], bytes] = staticmethod(_logged_v10)

    def encode_error(self, error: A2AError, status: int | None = None) -> bytes:
        return rest.encode_status(error, status)

    def encode_call(
        self, operation: Operation, request: Any
    ) -> tuple[str, str, bytes | None, dict[str, str]]:
        """The operation's first route, its path fields (and ``tenant``, as a prefix) taken from the request;
        the other fields are the body (``body: all``) or the query."""
        routes = spec_of(operation).routes
        if not routes:
            raise UnsupportedOperationError(f"{operation} has no HTTP+JSON route: call it over JSON-RPC")
        route = routes[0]
        fields: dict[str, Any] = msgspec.to_builtins(request)
        tenant = fields.pop("tenant", "")
        path = route.path
        for name in route.path_fields:
            path = path.replace("{" + name + "}", _segment(fields.pop(name, "")))
        if tenant:
            path = f"/{_segment(tenant)}{path}"
        if route.body == "all":
            return route.method, path, _encoder.encode(fields), {}
        return route.method, path, None, _query(fields)

    def decode_result(self, operation: Operation, request: Any, body: bytes) -> Any:
        return _response(operation, body)

    def decode_event(self, data: bytes) -> StreamResponse | A2AError:
        if data.startswith(b'{"error"'):
            return _stream_error(data)
        return _event_decoder.decode(data)

    def decode_error(self, operation: Operation, status: int, body: Any) -> A2AError | None:
        return error_from_status(body.get("error")) if isinstance(body, dict) else None


def _stream_error(data: bytes) -> A2AError:
    """The error a stream's last event holds (an AIP-193 ``{"error": ...}``); ValueError if it holds none."""
    try:
        decoded = msgspec.json.decode(data)
    except msgspec.DecodeError:
        decoded = None
    error = error_from_status(decoded.get("error")) if isinstance(decoded, dict) else None
    if error is None:
        raise ValueError(f"a stream error: {data[:200]!r}")
    return error


JSONRPC = JsonRpc10()
REST = Rest10()
