"""The gRPC binding of the client: ``lf.a2a.v1.A2AService`` over a ``grpc.aio`` channel.

Needs the ``skillwire[grpc]`` extra (grpcio, protobuf, googleapis-common-protos and a2a-sdk, whose generated
``a2a_pb2`` / ``a2a_pb2_grpc`` modules define the service). It is the same small transport as the HTTP ones::

    transport = GrpcTransport("127.0.0.1:50051", headers={"Authorization": "Bearer t"})
    task = await transport.send(Operation.GET_TASK, GetTaskRequest(id="t1"))
    async for event in transport.stream(Operation.SUBSCRIBE_TO_TASK, SubscribeToTaskRequest(id="t1")):
        ...
    await transport.aclose()

``url`` is the card's GRPC interface url: ``host:port``, ``[::1]:port``, or either behind ``grpc://``
(plaintext) or ``grpcs://`` (TLS with the system's root certificates); ``http://`` and ``https://`` are read
the same way, and anything else is handed to grpc as a target of its own syntax (``dns:///host:443``,
``unix:/path``). The channel is opened on the first call, on the running event loop, and closed by
:meth:`GrpcTransport.aclose`; a ``channel`` passed in (for credentials or options of your own) is used as is
and left open. ``credentials`` (``grpc.ChannelCredentials``) open a TLS channel with them instead of the
system's root certificates, whatever the scheme: a private CA, a client certificate for mutual TLS::

    credentials = grpc.ssl_channel_credentials(ca_pem, private_key=key_pem, certificate_chain=cert_pem)
    transport = GrpcTransport("https://agent.internal:50051", credentials=credentials)

Replies of any size are accepted, as on HTTP.

Every call carries the metadata ``a2a-version: 1.0`` and the ``headers``, names lower-cased (``authorization``,
``a2a-extensions`` ...). Headers that mean something only to HTTP/1.1 or that HTTP/2 and grpc reserve
(``content-type``, ``host``, ``connection``, ``te``, ``grpc-*`` ...) are left out; a ``-bin`` header's value
is sent as its UTF-8 bytes.

Messages are converted by :mod:`skillwire.wire.protobuf`, directly but with the results of ProtoJSON, so the
msgspec Structs stay the one source of truth: a request Struct becomes its protobuf message as
``json_format.Parse`` would make it from msgspec's JSON (one it cannot hold is :class:`InvalidParamsError`,
raised before anything is sent); a reply becomes the operation's ``response_type`` (its row of
:data:`~skillwire.protocol.operations.OPERATIONS`, which also gives the rpc name and whether it streams) as if
printed with ``json_format`` (fields without presence printed even when empty) and decoded by msgspec (one that
does not decode is :class:`InvalidResponseError`). Numbers in ``data`` and
``metadata`` are doubles in protobuf (``google.protobuf.Value``): an integral one comes back as an int (42, not
42.0, up to 2**53), which is what the agent meant unless it meant the float 42.0.

Errors, the same things as the HTTP bindings raise:

* a status whose ``grpc-status-details-bin`` trailer holds a ``google.rpc.Status`` with an ``ErrorInfo`` of a
  known ``reason``: that :mod:`skillwire.errors` class, with the status message, the ErrorInfo metadata and
  the ``BadRequest`` field violations;
* otherwise the status code decides (a proxy's answer, an agent that sends no details):

  =====================================================  ================================================
  ``UNAVAILABLE``, ``DEADLINE_EXCEEDED``, ``CANCELLED``  :class:`AgentConnectionError` (retried; a stream
                                                         broken midway is resumed by the Client)
  ``RESOURCE_EXHAUSTED``                                 :class:`HTTPStatusError` 429 (``retry_after``
                                                         from a ``RetryInfo`` detail)
  ``UNAUTHENTICATED``, ``PERMISSION_DENIED``             :class:`HTTPStatusError` 401, 403
  ``INVALID_ARGUMENT``                                   :class:`InvalidParamsError`
  ``NOT_FOUND``                                          :class:`TaskNotFoundError` (the only NOT_FOUND)
  ``UNIMPLEMENTED``                                      :class:`MethodNotFoundError`
  anything else                                          :class:`InternalError`, the code in the message
  =====================================================  ================================================

  (the HTTP statuses are google.rpc's own mapping of those codes). ``CANCELLED`` reaching the client means
  the server cancelled the call (it was stopping, say): a call this client cancels raises nothing.

``timeout`` (seconds) is the deadline of each unary call. Streams get none: a quiet task may send nothing
for a long time, and gRPC sends no keep-alive events. A connection that is closed or reset ends the stream
with AgentConnectionError; to notice a peer that vanished without a word, give a ``channel`` with
``grpc.keepalive_time_ms``. A stream the consumer stops early (``aclose()``, ``break`` inside ``aclosing``)
cancels its call; the task behind it goes on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any

import msgspec

from skillwire.client.transport import call_headers

# First: without the grpc extra, this ImportError says what to install.
from skillwire.wire.grpc_service import RPCS, Rpc, StatusDetails, read_status

# isort: split
import grpc  # type: ignore[import-untyped]
from a2a.types import a2a_pb2_grpc

from skillwire.client.bodies import MAX_RESPONSE_BYTES
from skillwire.client.errors import AgentConnectionError, HTTPStatusError, InvalidResponseError
from skillwire.client.origins import grpc_target
from skillwire.client.transport import A2A_VERSION
from skillwire.errors import (
    ERRORS_BY_REASON,
    A2AError,
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from skillwire.protocol import models as m
from skillwire.protocol.operations import Operation, spec_of
from skillwire.wire.protobuf import ConversionError, message_to_struct, struct_to_message
from skillwire.wire.protobuf_generations import put_generations, read_generations

__all__ = ["GrpcTransport", "error_from_rpc", "grpc_target"]

#: Headers that are not gRPC metadata: HTTP/1.1 connection management, and what HTTP/2 and grpc set.
_NOT_METADATA = frozenset(
    {
        "accept",
        "accept-encoding",
        "connection",
        "content-length",
        "content-type",
        "host",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "user-agent",
    }
)

#: A reply (decompressed) of at most the client's budget for an answer, as over HTTP (grpc's own default,
#: 4 MiB, is below the server's largest answer).
_CHANNEL_OPTIONS = (("grpc.max_receive_message_length", MAX_RESPONSE_BYTES),)


def _metadata(headers: Mapping[str, str] | None) -> tuple[tuple[str, str | bytes], ...]:
    out: dict[str, str] = {}
    for name, value in (headers or {}).items():
        key = name.strip().lower()
        if not key or key in _NOT_METADATA or key.startswith((":", "grpc-")):
            continue
        out[key] = value
    out["a2a-version"] = A2A_VERSION
    return tuple((k, v.encode() if k.endswith("-bin") else v) for k, v in out.items())


# -- protobuf <-> Struct -----------------------------------------------------------------------------------


def _rpc(operation: Operation) -> Rpc:
    """The operation's rpc; UnsupportedOperationError for one the service does not define."""
    rpc = RPCS.get(operation)
    if rpc is None:
        raise UnsupportedOperationError(f"{operation} has no gRPC rpc: call it over JSON-RPC or HTTP+JSON")
    return rpc


def _to_struct(message: Any, type_: type[msgspec.Struct]) -> Any:
    """The answer Struct of ``message``, with the A2A 1.1 generations it carries (unknown fields of a v1.0
    message: :mod:`skillwire.wire.protobuf_generations`)."""
    try:
        return read_generations(message, message_to_struct(message, type_, with_defaults=True))
    except (ValueError, msgspec.DecodeError) as exc:  # ConversionError is a ValueError
        raise InvalidResponseError(f"not a valid {type_.__name__}: {exc}") from None


def _to_message(request: msgspec.Struct, message_type: Any) -> Any:
    """The request message of ``request``; its 1.1 fields (``currentGeneration``, ``ifGenerationMatch``)
    as the 1.1 field numbers, which a v1.0 server skips."""
    try:
        message = struct_to_message(_plain(request), message_type)
    except ConversionError as exc:
        name = message_type.DESCRIPTOR.full_name
        raise InvalidParamsError(f"the request is not a valid {name}: {exc}") from None
    put_generations(request, message)
    return message


def _plain(request: msgspec.Struct) -> msgspec.Struct:
    """``request`` without the fields v1.0's messages lack (sent otherwise: see _to_message, _cursor)."""
    replace = msgspec.structs.replace
    if isinstance(request, m.GetTaskRequest) and request.current_generation is not None:
        return replace(request, current_generation=None)
    if isinstance(request, m.SubscribeToTaskRequest) and request.after_generation is not None:
        return replace(request, after_generation=None)
    configuration = request.configuration if isinstance(request, m.SendMessageRequest) else None
    if configuration is not None and configuration.if_generation_match is not None:
        return replace(request, configuration=replace(configuration, if_generation_match=None))
    return request


def _cursor(request: msgspec.Struct) -> tuple[tuple[str, str], ...]:
    """A SubscribeToTask's resume cursor, as the ``last-event-id`` metadata the server reads."""
    if isinstance(request, m.SubscribeToTaskRequest) and request.after_generation is not None:
        return (("last-event-id", str(request.after_generation)),)
    return ()


# -- errors -----------------------------------------------------------------------------------------------

_ERRORS_BY_REASON = ERRORS_BY_REASON

#: Status codes that mean the call, not the operation, failed: the connection broke or never was.
_CONNECTION_CODES = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"})
#: Codes a proxy answers with, as the HTTP status google.rpc maps them to.
_HTTP_STATUSES = {"RESOURCE_EXHAUSTED": 429, "UNAUTHENTICATED": 401, "PERMISSION_DENIED": 403}
#: Codes that name one protocol error when no ErrorInfo says which.
_ERRORS_BY_STATUS: dict[str, type[A2AError]] = {
    "INVALID_ARGUMENT": InvalidParamsError,
    "NOT_FOUND": TaskNotFoundError,
    "UNIMPLEMENTED": MethodNotFoundError,
}


def error_from_rpc(error: Any) -> Exception:
    """The exception to raise for a failed call (a ``grpc.aio.AioRpcError``), as the module docstring says."""
    code = error.code().name
    status = read_status(error.trailing_metadata()) or StatusDetails("")
    message = status.message or error.details() or ""
    cls = _ERRORS_BY_REASON.get(status.reason)
    if cls is None:
        if code in _CONNECTION_CODES:
            return AgentConnectionError(f"gRPC {code}: {message}" if message else f"gRPC {code}")
        if code in _HTTP_STATUSES:
            return HTTPStatusError(
                _HTTP_STATUSES[code], f"gRPC {code}: {message}", retry_after=status.retry_after
            )
        cls = _ERRORS_BY_STATUS.get(code)
        if cls is None:
            cls, message = InternalError, f"gRPC {code}: {message}" if message else f"gRPC {code}"
    return cls(message or None, metadata=status.metadata, field_violations=status.violations)


# -- the transport ----------------------------------------------------------------------------------------


class GrpcTransport:
    """The gRPC binding (``lf.a2a.v1.A2AService``) at ``url``; see the module docstring.

    ::

        async with GrpcTransport("grpc://127.0.0.1:50051", timeout=30.0) as transport:
            client = Client(transport)
            task = await client.send("hello")
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
        channel: grpc.aio.Channel | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self.url = url
        self.target, self.secure = grpc_target(url)
        self.credentials = credentials
        self.timeout = timeout
        self.metadata = _metadata(headers)
        self._channel: Any = channel
        self._owns_channel = channel is None
        self._stub: Any = None
        self._closed = False

    def _open(self) -> Any:
        if self._closed:
            raise RuntimeError("this GrpcTransport is closed")
        if self._channel is None:
            credentials = self.credentials or (grpc.ssl_channel_credentials() if self.secure else None)
            self._channel = (
                grpc.aio.secure_channel(self.target, credentials, options=_CHANNEL_OPTIONS)
                if credentials is not None
                else grpc.aio.insecure_channel(self.target, options=_CHANNEL_OPTIONS)
            )
        if self._stub is None:
            self._stub = a2a_pb2_grpc.A2AServiceStub(self._channel)  # type: ignore[no-untyped-call]
        return self._stub

    async def send(self, operation: Operation, request: msgspec.Struct) -> Any:
        spec = spec_of(operation)
        if spec.streaming:
            raise ValueError(f"{spec.method} streams: use stream()")
        message = _to_message(request, _rpc(operation).request)
        rpc = getattr(self._open(), spec.method)
        try:
            reply = await rpc(message, metadata=_traced(self.metadata), timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc) from exc
        return None if spec.response_type is None else _to_struct(reply, spec.response_type)

    async def stream(self, operation: Operation, request: msgspec.Struct) -> AsyncIterator[m.StreamResponse]:
        spec = spec_of(operation)
        if not spec.streaming or spec.response_type is None:
            raise ValueError(f"{spec.method} does not stream: use send()")
        message = _to_message(request, _rpc(operation).request)
        metadata = _traced((*self.metadata, *_cursor(request)))
        call = getattr(self._open(), spec.method)(message, metadata=metadata)
        try:
            async for reply in call:
                yield _to_struct(reply, spec.response_type)
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc) from exc
        finally:
            call.cancel()  # a consumer that stopped early ends the call; a finished call ignores this

    async def aclose(self) -> None:
        """Close the channel this transport opened (a channel passed in is the caller's to close)."""
        self._closed = True
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None and self._owns_channel:
            await channel.close()

    async def __aenter__(self) -> GrpcTransport:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _traced(metadata: tuple[tuple[str, str | bytes], ...]) -> tuple[tuple[str, str | bytes], ...]:
    """``metadata`` with the current trace context and idempotency key, as the HTTP transports send them."""
    context = call_headers()
    return (*metadata, *((k.lower(), v) for k, v in context.items())) if context else metadata
