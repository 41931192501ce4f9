"""What every binding tells the request handler about a call, whatever the wire."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ANONYMOUS", "CallContext", "Caller"]


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling. Anonymous until authentication is configured."""

    id: str = "anonymous"
    authenticated: bool = False
    scopes: frozenset[str] = frozenset()


ANONYMOUS = Caller()


@dataclass(frozen=True, slots=True)
class CallContext:
    #: The negotiated protocol version (``Major.Minor``).
    protocol_version: str = "1.0"
    tenant: str = ""
    caller: Caller = ANONYMOUS
    #: Extension URIs the client activated.
    extensions: frozenset[str] = frozenset()
    #: The binding that carried the call: ``JSONRPC``, ``HTTP+JSON`` or ``GRPC``.
    binding: str = "JSONRPC"
    #: Service parameters and other transport headers, lower-cased names.
    headers: Mapping[str, str] = field(default_factory=dict)
    #: The base URL the client reached (as the public card is built for it; ``""`` when unknown, as on gRPC
    #: without a public URL).
    base_url: str = ""
    #: Size of the request as received (body bytes, or the gRPC message), so work that grows with the input
    #: (schema validation) can move off the event loop for large requests.
    request_bytes: int = 0
