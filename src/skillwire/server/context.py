"""What every binding tells the request handler about a call, whatever the wire.

These are frozen msgspec Structs rather than dataclasses: one is built for every request, and a Struct costs a
tenth of a frozen dataclass to build.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from skillwire.security.principal import ANONYMOUS, Principal

__all__ = ["ANONYMOUS", "CallContext", "partition", "requested_extensions", "split_partition"]


class CallContext(msgspec.Struct, frozen=True):
    #: The negotiated protocol version (``Major.Minor``).
    protocol_version: str = "1.0"
    tenant: str = ""
    #: Who is calling (anonymous when the agent declares no security).
    principal: Principal = ANONYMOUS
    #: Extension URIs the client activated.
    extensions: frozenset[str] = frozenset()
    #: The binding that carried the call: ``JSONRPC``, ``HTTP+JSON`` or ``GRPC``.
    binding: str = "JSONRPC"
    #: Service parameters and other transport headers, lower-cased names.
    headers: Mapping[str, str] = msgspec.field(default_factory=dict)
    #: The base URL the client reached (as the public card is built for it; ``""`` when unknown, as on gRPC
    #: without a public URL).
    base_url: str = ""
    #: Size of the request as received (body bytes, or the gRPC message), so work that grows with the input
    #: (schema validation) can move off the event loop for large requests.
    request_bytes: int = 0
    #: The caller's ``X-Request-Id`` (header or gRPC metadata) when it is a short printable token, else one
    #: made up for the request: the id on its log lines and its span (``""``: no request, as for a task
    #: taken back at start-up).
    request_id: str = ""
    #: When the caller stops waiting, as a ``time.monotonic()`` value: the gRPC deadline it sent (None:
    #: none given, as on the HTTP bindings).
    deadline: float | None = None


def partition(tenant: str, principal: Principal) -> str:
    """The store and bus key of the tasks ``principal`` owns in ``tenant``: the tenant itself when anonymous
    (an agent without security), else the tenant and the principal's owner key, so that one caller's GetTask,
    ListTasks, CancelTask, SubscribeToTask and follow-up messages never reach another's tasks (they answer
    TaskNotFound, as for a task that does not exist). NUL separates them: it is refused in tenants."""
    owner = principal.owner
    return f"{tenant}\x00{owner}" if owner else tenant


def split_partition(key: str) -> tuple[str, str]:
    """(tenant, owner) of a :func:`partition` key."""
    tenant, _, owner = key.partition("\x00")
    return tenant, owner


def requested_extensions(headers: Mapping[str, str]) -> frozenset[str]:
    """The extension URIs a client asks for, on any binding: the ``A2A-Extensions`` header or gRPC metadata
    (v1.0) and ``X-A2A-Extensions`` (v0.3), comma-separated; ``headers`` has lower-cased names."""
    v10, v03 = headers.get("a2a-extensions"), headers.get("x-a2a-extensions")
    if not v10 and not v03:  # the common case, on every request
        return _NONE
    value = f"{v10},{v03}" if v10 and v03 else v10 or v03 or ""
    return frozenset(part.strip() for part in value.split(",") if part.strip())


_NONE: frozenset[str] = frozenset()
