"""One codec per protocol version and HTTP binding, chosen once per call after negotiation.

A codec turns the bytes of one binding at one protocol version into v1.0 values and back, in both
directions, so that neither the server bindings nor the client transports ask which version they speak:

=========  ===============================  ==========================================================
direction  JSON-RPC (:class:`JsonRpcCodec`)  HTTP+JSON (:class:`RestCodec`)
=========  ===============================  ==========================================================
server     ``decode_call`` (an envelope),    ``match`` (method, path), ``decode_call`` (path, query,
           ``encode_result``,                body), ``encode_result``, ``encode_event``,
           ``encode_event``, ``encode_error`` ``encode_error``
client     ``encode_call``,                  ``encode_call`` (method, path, body, query),
           ``decode_result``,                ``decode_result``, ``decode_event``, ``decode_error``
           ``decode_event``, ``decode_error``
=========  ===============================  ==========================================================

The v1.0 codecs live beside their envelopes (:mod:`skillwire.wire.jsonrpc`, :mod:`skillwire.wire.rest`);
the v0.3 ones in :mod:`skillwire.wire.v03.codec`, imported on first use (most deployments never see a
v0.3 call). A codec decodes into the v1.0 request Structs of :mod:`skillwire.protocol.operations` and
encodes the v1.0 results the request handler returns; what the handler sees never depends on the version.

A client-side decode raises ``ValueError`` (msgspec's errors among them) for an answer that is not what its
version says; the transport reports it as an invalid response. An error the agent sent is returned as its
A2AError, for the transport to raise. Adding a protocol
version is one module holding its two codecs and one line in :data:`_CODECS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Protocol

from skillwire.errors import A2AError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import StreamResponse
from skillwire.protocol.operations import Operation
from skillwire.wire.jsonrpc import Envelope, RequestId

__all__ = ["Decoded", "JsonRpcCodec", "Query", "RestCodec", "jsonrpc_codec", "rest_codec"]

#: Query parameters as the binding parsed them: name -> every value given.
Query = Mapping[str, list[str]]
#: A decoded call: its operation and v1.0 request Struct, or None for a request no route serves.
Decoded = tuple[Operation, Any] | None


class JsonRpcCodec(Protocol):
    #: The protocol version (``Major.Minor``) this codec speaks.
    version: str
    #: Whether a streaming call's error before its first event is answered as a one-event SSE stream
    #: (v0.3 clients read a streaming call's answer only as SSE).
    stream_errors_as_events: bool

    def decode_call(self, envelope: Envelope, limits: Limits | None) -> tuple[Operation, Any]:
        """The operation and v1.0 request Struct of a valid envelope; A2AError otherwise (-32601, -32602)."""
        ...

    def encode_result(self, operation: Operation, result: Any) -> bytes:
        """The JSON of the ``result`` member for a unary call's v1.0 result."""
        ...

    def encode_event(self, event: StreamResponse) -> bytes:
        """The JSON of the ``result`` member of one stream event."""
        ...

    def encode_logged_event(self, event: StreamResponse, logged: bytes) -> bytes:
        """:meth:`encode_event`, given ``logged``: the event's JSON as the store's log holds it (the 1.1
        StreamResponse, generation and all), which a version that sends the same or a part of it reuses."""
        ...

    def encode_error(self, request_id: RequestId, error: A2AError) -> bytes:
        """A whole error response."""
        ...

    def encode_call(self, request_id: int, operation: Operation, request: Any) -> bytes:
        """A whole request for a v1.0 request Struct."""
        ...

    def decode_result(self, operation: Operation, request: Any, raw: bytes) -> Any:
        """The v1.0 response Struct (None for an empty one) from the raw ``result`` member."""
        ...

    def decode_event(self, raw: bytes) -> StreamResponse:
        """One stream event from the raw ``result`` member of an SSE event."""
        ...

    def decode_error(self, error: Any) -> A2AError:
        """The A2AError of a decoded ``error`` member."""
        ...


class RestCodec(Protocol):
    version: str

    def match(self, method: str, path: str) -> Any:
        """A route for ``method path`` (handed back to :meth:`decode_call`), or None when this codec has no
        route with that path; MethodNotFoundError with ``metadata["allow"]`` when only the method is wrong."""
        ...

    def decode_call(
        self, route: Any, method: str, path: str, query: Query, body: bytes, limits: Limits
    ) -> Decoded:
        """The operation and v1.0 request Struct of a request, or None when no route matches after all."""
        ...

    def encode_result(self, operation: Operation, result: Any) -> bytes:
        """The response body for a unary call's v1.0 result."""
        ...

    def encode_event(self, event: StreamResponse) -> bytes:
        """The ``data`` of one SSE event."""
        ...

    def encode_logged_event(self, event: StreamResponse, logged: bytes) -> bytes:
        """:meth:`encode_event`, given the event's JSON as the store's log holds it (see JsonRpcCodec)."""
        ...

    def encode_error(self, error: A2AError, status: int | None = None) -> bytes:
        """An error body (also the ``data`` of a stream's last event)."""
        ...

    def encode_call(
        self, operation: Operation, request: Any
    ) -> tuple[str, str, bytes | None, dict[str, str]]:
        """(method, path under the interface URL, body or None, query) for a v1.0 request Struct."""
        ...

    def decode_result(self, operation: Operation, request: Any, body: bytes) -> Any:
        """The v1.0 response Struct (None for an empty one) from a success body."""
        ...

    def decode_event(self, data: bytes) -> StreamResponse | A2AError:
        """One stream event from its SSE ``data``, or the error the stream ended with."""
        ...

    def decode_error(self, operation: Operation, status: int, body: Any) -> A2AError | None:
        """The A2AError of an error answer (``body`` decoded JSON, or None), or None if it holds none."""
        ...


#: protocol version -> the module holding its codecs (``JSONRPC`` and ``REST``).
_CODECS: dict[str, str] = {
    "1.1": "skillwire.wire.codec_v11",
    "1.0": "skillwire.wire.codec_v10",
    "0.3": "skillwire.wire.v03.codec",
}


_loaded: dict[str, Any] = {}


def _module(version: str) -> Any:
    module = _loaded.get(version)
    if module is None:
        name = _CODECS.get(version)
        if name is None:
            raise ValueError(f"no codec for protocol version {version!r}; known: {', '.join(_CODECS)}")
        module = _loaded[version] = importlib.import_module(name)
    return module


def jsonrpc_codec(version: str) -> JsonRpcCodec:
    """The JSON-RPC codec of a protocol version (``"1.0"``, ``"0.3"``); ValueError for another."""
    codec: JsonRpcCodec = _module(version).JSONRPC
    return codec


def rest_codec(version: str) -> RestCodec:
    """The HTTP+JSON codec of a protocol version (``"1.0"``, ``"0.3"``); ValueError for another."""
    codec: RestCodec = _module(version).REST
    return codec
