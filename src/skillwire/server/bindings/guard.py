"""Authentication at the door of every binding: the agent's :class:`~skillwire.security.Security` policy
applied to a request before anything else is done for it (its body is not even read).

The HTTP bindings call :meth:`Guard.http` right after the route is known, gRPC :meth:`Guard.grpc` before
the request is converted; both answer with the :class:`Principal` or raise the 401/403 error. The agent card
at ``/.well-known/agent-card.json`` is the one route that never passes here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from skillwire.errors import InvalidParamsError
from skillwire.security.policy import Security
from skillwire.security.principal import Principal
from skillwire.security.schemes import Presented
from skillwire.server.bindings.asgi import Scope

__all__ = ["Guard", "PeerName", "checked_tenant"]


class PeerName(msgspec.Struct, frozen=True):
    """A verified client certificate's subject (RFC 4514), as the TLS layer handed it over."""

    subject: str


class Guard:
    def __init__(self, security: Security) -> None:
        self.security = security

    async def http(self, scope: Scope, headers: Mapping[str, str]) -> Principal:
        return await self.security.authenticate(
            Presented(headers, scope.get("query_string", b""), _http_peer(scope))
        )

    async def grpc(self, metadata: Mapping[str, str], context: Any) -> Principal:
        return await self.security.authenticate(Presented(metadata, b"", _grpc_peer(context)))

    def check_tenant(self, principal: Principal, tenant: str) -> None:
        self.security.check_tenant(principal, tenant)


def checked_tenant(guard: Guard | None, principal: Principal, params: Any) -> str:
    """The tenant a call names (``""``: the default), refused if it could be taken for another caller's
    partition (NUL: see ``context.partition``) or, with security on, if the policy does not grant it."""
    tenant: str = getattr(params, "tenant", "") or ""
    if tenant:
        if "\x00" in tenant:
            raise InvalidParamsError(
                "tenant must not contain NUL", field_violations=[("tenant", "must not contain NUL")]
            )
        if guard is not None:
            guard.check_tenant(principal, tenant)
    return tenant


def _http_peer(scope: Scope) -> PeerName | None:
    """The client certificate's subject from the ASGI TLS extension, which skillwire's uvicorn protocols
    fill once per connection (``skillwire serve --tls-client-ca``; any ASGI server implementing the extension
    does too). A certificate the server says failed verification is no certificate."""
    tls = (scope.get("extensions") or {}).get("tls")
    if not isinstance(tls, dict) or tls.get("client_cert_error"):
        return None
    name = tls.get("client_cert_name")
    return PeerName(name) if isinstance(name, str) and name else None


_GRPC_PEERS: dict[bytes, PeerName | None] = {}


def _grpc_peer(context: Any) -> PeerName | None:
    """The client certificate's subject of a gRPC call over mutual TLS, read from its PEM as on HTTP (the
    same string for the same certificate); remembered per certificate, as a connection's calls share one."""
    try:
        auth = context.auth_context() or {}
    except Exception:  # no auth context on this grpc
        return None
    pems = auth.get("x509_pem_cert") or ()
    if not pems:
        return None
    key = pems[0] if isinstance(pems[0], bytes) else str(pems[0]).encode()
    if key not in _GRPC_PEERS:
        from skillwire.server.bindings.tls import peer_certificate_from_grpc

        peer = peer_certificate_from_grpc(context)
        if len(_GRPC_PEERS) >= 256:
            _GRPC_PEERS.clear()
        _GRPC_PEERS[key] = PeerName(peer.subject) if peer is not None else None
    return _GRPC_PEERS[key]
