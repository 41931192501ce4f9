"""JSON-RPC 2.0 envelope codec (sans-IO).

``parse_request(body, limits)`` turns the bytes of one HTTP request body into a :class:`JsonRpcRequest`
whose ``params`` are already decoded into the operation's request Struct, or raises an :class:`A2AError`
(wrapped in :class:`JsonRpcFailure` so the request id travels with it). ``encode_result`` and
``encode_error`` build response bytes. Batches are not part of A2A and are refused with -32600.

The decoded-JSON budgets of ``limits`` (:mod:`skillwire.wire.budget`) hold before anything is decoded
(depth and values, over the whole body) and after (parts, metadata keys, strings, over the params): a body
past one is -32602 naming the budget, answered under the request's id when it can be read cheaply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET, Struct, UnsetType

from skillwire.errors import (
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    MethodNotFoundError,
)
from skillwire.protocol.limits import Limits
from skillwire.protocol.operations import OPERATIONS_BY_METHOD, OperationSpec
from skillwire.wire.budget import check_json, check_shape, shape_may_exceed
from skillwire.wire.protojson import Decoder

__all__ = [
    "Envelope",
    "JsonRpcFailure",
    "JsonRpcRequest",
    "ResultFramer",
    "decode_method_params",
    "decode_params",
    "encode_error",
    "encode_plain_error",
    "encode_result",
    "error_object",
    "field_error",
    "parse_envelope",
    "parse_request",
    "read_response",
]

RequestId = str | int | None

_DEFAULT_LIMITS = Limits()


class _Envelope(Struct):
    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: msgspec.Raw | UnsetType = UNSET


@dataclass(frozen=True, slots=True)
class JsonRpcRequest:
    id: RequestId
    spec: OperationSpec
    params: Any
    #: False for a notification (no ``id`` member): it gets no response.
    expects_response: bool = True


class JsonRpcFailure(Exception):
    """An error found while parsing, with the request id to answer under (``None`` if unknown)."""

    def __init__(self, error: A2AError, request_id: RequestId = None, expects_response: bool = True) -> None:
        super().__init__(error.message)
        self.error = error
        self.request_id = request_id
        self.expects_response = expects_response


_envelope_decoder = msgspec.json.Decoder(_Envelope)
_param_decoders: dict[type[Struct], Decoder] = {}


def _decoder_for(spec: OperationSpec) -> Decoder:
    dec = _param_decoders.get(spec.request_type)
    if dec is None:
        dec = _param_decoders[spec.request_type] = Decoder(spec.request_type)
    return dec


class _IdOnly(Struct):
    id: msgspec.Raw | UnsetType = UNSET


_id_decoder = msgspec.json.Decoder(_IdOnly)


def _request_id(body: bytes) -> tuple[RequestId, bool]:
    """(id, whether there is one) of a body refused before decoding, when they can be read without
    decoding the rest (msgspec skips other members without building them); else (None, True)."""
    try:
        raw = _id_decoder.decode(body).id
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None, True
    if raw is UNSET:
        return None, False
    if len(raw) > 256:
        return None, True
    value = msgspec.json.decode(raw)
    return (
        (value, True) if isinstance(value, str | int | None) and not isinstance(value, bool) else (None, True)
    )


_MISSING = re.compile(r"^Object missing required field `([^`]+)`$")


def field_error(err: msgspec.ValidationError, root: str = "params") -> tuple[str, str]:
    """msgspec's "reason - at `$.a.b`" as ("params.a.b", "reason"); a missing field names itself."""
    text = str(err)
    reason, sep, where = text.rpartition(" - at `")
    if not sep:
        reason, path = text, root
    else:
        path = root + where.rstrip("`")[1:]
    missing = _MISSING.match(reason)
    if missing:
        return f"{path}.{missing.group(1)}", "required field is missing"
    if path == root and reason.startswith("Expected `object`"):
        return path, f"`{root}` must be an object"
    return path, reason


@dataclass(frozen=True, slots=True)
class Envelope:
    """A JSON-RPC request whose envelope is valid; its params are not decoded yet."""

    id: RequestId
    method: str
    params: msgspec.Raw | UnsetType
    #: False for a notification (no ``id`` member): it gets no response.
    expects_response: bool
    #: False when the body is too small to break a shape budget, so the decoded params need no walk.
    may_exceed_shape: bool = True


def parse_envelope(body: bytes, limits: Limits = _DEFAULT_LIMITS) -> Envelope:
    """Check the JSON-RPC 2.0 envelope; raises JsonRpcFailure (-32700 / -32600, and -32602 for a body
    nesting deeper than ``limits.max_json_depth`` or holding more than ``limits.max_json_nodes`` values)."""
    if not body.isascii():
        try:
            body.decode("utf-8")  # msgspec skips unknown members without checking their text
        except UnicodeDecodeError:
            raise JsonRpcFailure(JSONParseError("Invalid JSON payload: the body is not UTF-8")) from None
    try:
        check_json(body, limits, "request")
    except InvalidParamsError as error:
        raise JsonRpcFailure(error, *_request_id(body)) from None
    try:
        env = _envelope_decoder.decode(body)
    except msgspec.ValidationError:
        raise JsonRpcFailure(InvalidRequestError("A JSON-RPC request must be a single JSON object")) from None
    except (msgspec.DecodeError, RecursionError):
        raise JsonRpcFailure(JSONParseError()) from None

    # An invalid Request object is answered even without an `id`: only a valid one is a notification.
    rid: RequestId = None
    has_id = env.id is not UNSET
    if has_id:
        if isinstance(env.id, bool) or not isinstance(env.id, str | int | None):
            raise JsonRpcFailure(InvalidRequestError("`id` must be a string, an integer or null"))
        rid = env.id
    if env.jsonrpc != "2.0":
        raise JsonRpcFailure(InvalidRequestError('`jsonrpc` must be exactly "2.0"'), rid)
    if not isinstance(env.method, str):
        raise JsonRpcFailure(InvalidRequestError("`method` must be a string"), rid)
    return Envelope(rid, env.method, env.params, has_id, shape_may_exceed(body, limits))


def decode_method_params(env: Envelope, limits: Limits | None = _DEFAULT_LIMITS) -> tuple[OperationSpec, Any]:
    """The v1.0 operation of ``env.method`` and its decoded params; raises MethodNotFoundError or
    InvalidParamsError (also for params past a shape budget of ``limits``; None skips that check)."""
    spec = OPERATIONS_BY_METHOD.get(env.method)
    if spec is None:
        raise MethodNotFoundError(f"Method not found: {env.method[:100]}")
    try:
        params = _decoder_for(spec).decode(b"{}" if env.params is UNSET else env.params)
    except msgspec.ValidationError as exc:
        field, reason = field_error(exc)
        raise InvalidParamsError(
            f"Invalid params: {field}: {reason}", field_violations=[(field, reason)]
        ) from None
    except (msgspec.DecodeError, RecursionError):  # pragma: no cover - the envelope already parsed
        raise JSONParseError() from None
    if env.may_exceed_shape and limits is not None:
        check_shape(params, limits, "params")
    return spec, params


def decode_params(env: Envelope, limits: Limits = _DEFAULT_LIMITS) -> JsonRpcRequest:
    """Look the method up and decode its params; raises JsonRpcFailure (-32601 / -32602, also for params
    past a shape budget of ``limits``)."""
    try:
        spec, params = decode_method_params(env, limits)
    except A2AError as error:
        raise JsonRpcFailure(error, env.id, env.expects_response) from None
    return JsonRpcRequest(env.id, spec, params, env.expects_response)


def parse_request(body: bytes, limits: Limits = _DEFAULT_LIMITS) -> JsonRpcRequest:
    """``parse_envelope`` then ``decode_params``."""
    return decode_params(parse_envelope(body, limits), limits)


class _Result(Struct):
    jsonrpc: str
    id: RequestId
    result: Any


class _ErrorObj(Struct, omit_defaults=True):
    code: int
    message: str
    data: list[dict[str, Any]] | None = None


class _ErrorResponse(Struct):
    jsonrpc: str
    id: RequestId
    error: _ErrorObj


_encoder = msgspec.json.Encoder()


def encode_result(request_id: RequestId, result: Any) -> bytes:
    """A success response; ``result`` is a Struct, a builtin value or ``None``."""
    return _encoder.encode(_Result("2.0", request_id, result))


class ResultFramer:
    """Frames many results under one request id (each SSE event of a stream), encoding the id once."""

    def __init__(self, request_id: RequestId) -> None:
        self._head = b'{"jsonrpc":"2.0","id":' + _encoder.encode(request_id) + b',"result":'

    def frame(self, result: Any) -> bytes:
        return self._head + _encoder.encode(result) + b"}"

    def frame_raw(self, result: bytes) -> bytes:
        """A response whose ``result`` is already encoded JSON."""
        return self._head + result + b"}"


def error_object(error: A2AError) -> _ErrorObj:
    return _ErrorObj(error.code, error.message, error.details())


def encode_error(request_id: RequestId, error: A2AError) -> bytes:
    return _encoder.encode(_ErrorResponse("2.0", request_id, error_object(error)))


class _PlainErrorObj(Struct):
    code: int
    message: str
    data: Any


class _PlainErrorResponse(Struct):
    jsonrpc: str
    id: RequestId
    error: _PlainErrorObj


def encode_plain_error(request_id: RequestId, code: int, message: str, data: Any) -> bytes:
    """An error response with a free-form ``data`` member (the v0.3 shape)."""
    return _encoder.encode(_PlainErrorResponse("2.0", request_id, _PlainErrorObj(code, message, data)))


class _Response(Struct):
    jsonrpc: Any = None
    id: Any = None
    result: msgspec.Raw = msgspec.Raw(b"")
    error: Any = None


_response_decoder = msgspec.json.Decoder(_Response)


def read_response(body: bytes) -> tuple[bytes | None, Any]:
    """(raw ``result`` or None when it is absent or null, decoded ``error`` or None) of a response; ValueError
    for a body that is not a JSON-RPC response."""
    try:
        envelope = _response_decoder.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError):
        raise ValueError(f"not a JSON-RPC response: {body[:200]!r}") from None
    result = bytes(envelope.result)
    return (None if result in (b"", b"null") else result), envelope.error
