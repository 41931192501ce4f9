"""What both ends of ``lf.a2a.v1.A2AService`` share: its rpcs, and the status that carries an error (sans-IO).

Needs the ``skillwire[grpc]`` extra (grpcio, protobuf, googleapis-common-protos and a2a-sdk, whose generated
``a2a_pb2`` defines the service). The gRPC server and client import it before grpc itself, so that without
the extra the ImportError says what to install.

**Rpcs**: :data:`RPCS` gives each row of :data:`~skillwire.protocol.operations.OPERATIONS` its rpc (named
``/lf.a2a.v1.A2AService/{spec.method}``): the protobuf request and answer message classes, read from the
service descriptor of ``a2a_pb2`` (the table's ``grpc_response`` and request Struct names agree with it: a
test says so)::

    spec, request, response = RPCS[Operation.GET_TASK]  # GetTask's row, GetTaskRequest, Task

**Errors**: an :class:`~skillwire.errors.A2AError` travels as a status code and a ``google.rpc.Status`` in the
``grpc-status-details-bin`` trailer, whose details hold an ``ErrorInfo`` (reason, domain ``a2a-protocol.org``,
metadata), a ``BadRequest`` for invalid arguments and a ``RetryInfo`` for a busy server (gRPC's
``Retry-After``). :func:`rich_status` writes it, :func:`read_status` reads it back::

    code, trailer = rich_status(TaskNotFoundError(), {})  # StatusCode.NOT_FOUND, the Status's bytes
    read_status(((STATUS_DETAILS_KEY, trailer),)).reason  # "TASK_NOT_FOUND"

The code is the error class's ``grpc_status`` (the v1.0.1 table in :mod:`skillwire.errors`) unless the
``overrides`` handed in name another for the class or one of its bases: :data:`GRPC_STATUSES_V1_0_0` is the
v1.0.0 table, which the TCK's gRPC status tests still expect.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

try:
    import grpc  # type: ignore[import-untyped]
    from a2a.types import a2a_pb2
    from google.protobuf import any_pb2, duration_pb2, message_factory  # type: ignore[import-untyped]
    from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
except ImportError as exc:  # pragma: no cover - depends on what is installed
    from skillwire.errors import MissingExtraError

    raise MissingExtraError(f"gRPC support needs the grpc extra ({exc})", "grpc") from exc

from skillwire.errors import (
    ERROR_DOMAIN,
    A2AError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from skillwire.protocol.operations import OPERATIONS, Operation, OperationSpec

__all__ = [
    "GRPC_STATUSES_V1_0_0",
    "RPCS",
    "SERVICE",
    "STATUS_DETAILS_KEY",
    "Rpc",
    "StatusDetails",
    "check_overrides",
    "read_status",
    "rich_status",
    "status_name",
]

SERVICE = "lf.a2a.v1.A2AService"
STATUS_DETAILS_KEY = "grpc-status-details-bin"

# -- rpcs ---------------------------------------------------------------------------------------------------


class Rpc(NamedTuple):
    """One operation's rpc, ``/lf.a2a.v1.A2AService/{spec.method}``: its row of the operation table and its
    protobuf message classes."""

    spec: OperationSpec
    #: The protobuf message the rpc takes.
    request: Any
    #: The protobuf message it answers (each event's, for a stream; ``google.protobuf.Empty`` for none).
    response: Any


def _rpcs() -> Mapping[Operation, Rpc]:
    methods = a2a_pb2.DESCRIPTOR.services_by_name[SERVICE.rpartition(".")[2]].methods_by_name
    rpcs = {}
    for spec in OPERATIONS:
        method = methods.get(spec.method)
        if method is None:  # an operation the proto has no rpc for (an extension method) is HTTP-only
            continue
        request = message_factory.GetMessageClass(method.input_type)
        rpcs[spec.operation] = Rpc(spec, request, message_factory.GetMessageClass(method.output_type))
    return MappingProxyType(rpcs)


#: The rpc of every operation of the table that the service defines.
RPCS: Mapping[Operation, Rpc] = _rpcs()

# -- errors -------------------------------------------------------------------------------------------------

#: The v1.0.0 gRPC codes that differ from v1.0.1, which the TCK 1.0-dev snapshot asserts.
GRPC_STATUSES_V1_0_0: Mapping[type[A2AError], str] = MappingProxyType(
    {
        UnsupportedOperationError: "UNIMPLEMENTED",
        PushNotificationNotSupportedError: "UNIMPLEMENTED",
        VersionNotSupportedError: "UNIMPLEMENTED",
    }
)


def check_overrides(overrides: Mapping[type[A2AError], str]) -> None:
    """ValueError unless every value of ``overrides`` names a gRPC status code other than OK."""
    for cls, name in overrides.items():
        if name not in grpc.StatusCode.__members__ or name == "OK":
            raise ValueError(f"status_overrides[{cls.__name__}] = {name!r} is not a gRPC error status")


def status_name(error: A2AError, overrides: Mapping[type[A2AError], str]) -> str:
    """The gRPC status code name for ``error``: an override if one matches its class, else its own."""
    for cls in type(error).__mro__:
        override = overrides.get(cls)
        if override is not None:
            return override
    return error.grpc_status


def rich_status(error: A2AError, overrides: Mapping[type[A2AError], str]) -> tuple[Any, bytes]:
    """The status code and the serialized ``google.rpc.Status`` (with ErrorInfo, BadRequest, and RetryInfo
    for a busy server) for ``error``."""
    code = grpc.StatusCode[status_name(error, overrides)]
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata)
    details = [_pack(info)]
    if error.field_violations:
        violations = [
            error_details_pb2.BadRequest.FieldViolation(field=field, description=description)
            for field, description in error.field_violations
        ]
        details.append(_pack(error_details_pb2.BadRequest(field_violations=violations)))
    retry_after = getattr(error, "retry_after", None)
    if isinstance(retry_after, int | float):
        delay = duration_pb2.Duration(seconds=int(retry_after), nanos=int(retry_after % 1 * 1e9))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    status = status_pb2.Status(code=code.value[0], message=error.message, details=details)
    return code, status.SerializeToString()


def _pack(message: Any) -> Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


@dataclass(frozen=True, slots=True)
class StatusDetails:
    """What a ``google.rpc.Status`` trailer says: its message and what its details hold."""

    message: str
    #: The first non-empty ErrorInfo reason ("" if none).
    reason: str = ""
    #: The metadata of every ErrorInfo.
    metadata: dict[str, str] = field(default_factory=dict)
    #: The field violations of every BadRequest.
    violations: list[tuple[str, str]] = field(default_factory=list)
    #: The first RetryInfo's delay in seconds (never negative), or None.
    retry_after: float | None = None


def read_status(trailing_metadata: Iterable[tuple[str, Any]] | None) -> StatusDetails | None:
    """The ``google.rpc.Status`` in ``trailing_metadata``, or None (none, or one that does not decode)."""
    for key, value in trailing_metadata or ():
        if key == STATUS_DETAILS_KEY and isinstance(value, bytes):
            try:
                status = status_pb2.Status.FromString(value)
            except Exception:  # protobuf's DecodeError: a trailer that is not a Status counts as none
                return None
            return _details(status)
    return None


def _details(status: Any) -> StatusDetails:
    reason, retry_after = "", None
    metadata: dict[str, str] = {}
    violations: list[tuple[str, str]] = []
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = reason or info.reason
            metadata.update(info.metadata)
        elif detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            violations.extend((v.field, v.description) for v in bad.field_violations)
        elif retry_after is None and detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            retry = error_details_pb2.RetryInfo()
            detail.Unpack(retry)
            retry_after = max(float(retry.retry_delay.ToTimedelta().total_seconds()), 0.0)
    return StatusDetails(status.message, reason, metadata, violations, retry_after)
