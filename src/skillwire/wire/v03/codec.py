"""The A2A v0.3 codecs: JSON-RPC (:data:`JSONRPC`) and HTTP+JSON under ``/v1`` (:data:`REST`), both
directions, over the conversions of this package (see :mod:`skillwire.wire.v03` for where v0.3 and v1.0 do
not map one to one). The interface is :mod:`skillwire.wire.codec`'s.

Beyond the conversions, two things are the codec's:

* a v0.3 client reads a streaming call's answer only as SSE, so an error before the first event is sent as
  that stream's one event (:attr:`JsonRpc03.stream_errors_as_events`);
* v1.0 ``historyLength: 0`` asks for no history, which v0.3 cannot say (0 is "all" there): the client
  direction leaves it out of the request and trims the history of the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET

from skillwire.errors import A2AError
from skillwire.protocol import models as m
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import StreamResponse
from skillwire.protocol.operations import Operation
from skillwire.wire import codec_v10
from skillwire.wire.codec import Decoded, Query
from skillwire.wire.errors import error_from_status
from skillwire.wire.jsonrpc import Envelope, RequestId, encode_plain_error
from skillwire.wire.rest import encode_status
from skillwire.wire.v03 import client, errors, rest, server

__all__ = ["JSONRPC", "REST", "JsonRpc03", "Rest03"]

R = TypeVar("R")


def _answer(decode: Callable[[], R]) -> R:
    """``decode()``, with an answer that is not v0.3 reported as ValueError (the conversions say so with
    InvalidParams or JSONParse errors, named as a server would name them)."""
    try:
        return decode()
    except A2AError as exc:
        raise ValueError(f"not a valid A2A v0.3 answer: {exc.message}") from None


def _trim_history(request: Any, result: Any) -> Any:
    """An answer to a request that asked for ``historyLength: 0``, without history."""
    config = getattr(request, "configuration", None)
    length = config.history_length if config is not None else getattr(request, "history_length", None)
    task = result.task if isinstance(result, m.SendMessageResponse) else result
    if length == 0 and isinstance(task, m.Task):
        task.history = []
    return result


class JsonRpc03:
    version = "0.3"
    stream_errors_as_events = True

    def decode_call(self, envelope: Envelope, limits: Limits | None) -> tuple[Operation, Any]:
        raw = None if envelope.params is UNSET else envelope.params
        return server.decode_request(
            envelope.method, raw, limits=limits if envelope.may_exceed_shape else None
        )

    def encode_result(self, operation: Operation, result: Any) -> bytes:
        return server.encode_result(operation, result)

    def encode_event(self, event: StreamResponse) -> bytes:
        return server.encode_stream_event(event, final=server.is_final(event))

    def encode_logged_event(self, event: StreamResponse, logged: bytes) -> bytes:
        return self.encode_event(event)  # v0.3 events are shaped differently: nothing to reuse

    def encode_error(self, request_id: RequestId, error: A2AError) -> bytes:
        return encode_plain_error(
            request_id, errors.error_code(error), error.message, errors.error_data(error)
        )

    def encode_call(self, request_id: int, operation: Operation, request: Any) -> bytes:
        method, params = client.encode_request(operation, request)
        envelope: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params:
            envelope["params"] = params
        return msgspec.json.encode(envelope)

    def decode_result(self, operation: Operation, request: Any, raw: bytes) -> Any:
        return _trim_history(request, _answer(lambda: client.decode_result(operation, raw)))

    def decode_event(self, raw: bytes) -> StreamResponse:
        return _answer(lambda: client.decode_event(raw))

    def decode_error(self, error: Any) -> A2AError:
        return errors.decode_error(error)


class Rest03:
    version = "0.3"

    def match(self, method: str, path: str) -> bool:
        return True  # every v0.3 route is under /v1, which the binding chose this codec for

    def decode_call(
        self, route: Any, method: str, path: str, query: Query, body: bytes, limits: Limits
    ) -> Decoded:
        return rest.match_rest(method, path, query, body, limits=limits)

    def encode_result(self, operation: Operation, result: Any) -> bytes:
        return rest.encode_rest_result(operation, result)

    def encode_event(self, event: StreamResponse) -> bytes:
        return rest.encode_rest_stream_event(event, final=server.is_final(event))

    def encode_logged_event(self, event: StreamResponse, logged: bytes) -> bytes:
        return self.encode_event(event)  # v0.3 events are shaped differently: nothing to reuse

    def encode_error(self, error: A2AError, status: int | None = None) -> bytes:
        return encode_status(error, status)  # the AIP-193 body of v1.0: v0.3 left REST errors unspecified

    def encode_call(
        self, operation: Operation, request: Any
    ) -> tuple[str, str, bytes | None, dict[str, str]]:
        return client.encode_rest_request(operation, request)

    def decode_result(self, operation: Operation, request: Any, body: bytes) -> Any:
        return _trim_history(request, _answer(lambda: client.decode_rest_result(operation, body)))

    def decode_event(self, data: bytes) -> StreamResponse | A2AError:
        if data.startswith(b'{"error"'):
            return codec_v10.REST.decode_event(data)
        return _answer(lambda: client.decode_rest_event(data))

    def decode_error(self, operation: Operation, status: int, body: Any) -> A2AError | None:
        # skillwire answers v0.3 REST errors with an AIP-193 status; the v0.3 SDKs with a bare message
        if not isinstance(body, dict):
            return None
        return error_from_status(body.get("error")) or errors.rest_error(operation, status, body)


JSONRPC = JsonRpc03()
REST = Rest03()
