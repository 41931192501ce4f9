"""Agent card discovery: ``GET /.well-known/agent-card.json`` with caching headers.

The card is encoded once per base URL (the interfaces carry absolute URLs) and served with ``ETag`` and
``Cache-Control``; a matching ``If-None-Match`` gets 304. The base URL is the public URL, else an allowed
Host, else the address the connection reached, never any Host a client writes (:mod:`skillwire.server.bindings.hosts`);
a card built from the Host header is served with ``Vary: Host``.

With card signers the card is signed for each base URL (the v1.0 card: the v0.3 members written beside it
are not part of it), each signature's ``jku`` naming ``{base}/.well-known/jwks.json`` unless its signer names
another, where the signers' public keys are served as a JWKS (:mod:`skillwire.wire.card_signing`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from email.utils import formatdate
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec

from skillwire.errors import MethodNotFoundError
from skillwire.protocol.models import AgentCard, AgentInterface
from skillwire.server.bindings.asgi import Receive, Scope, Send, header_map, send_bytes
from skillwire.server.bindings.hosts import AllowedHosts, base_url_of
from skillwire.wire.rest import encode_status

if TYPE_CHECKING:
    from skillwire.wire.card_signing import CardSigner

__all__ = ["CARD_PATH", "CARD_PATHS", "JWKS_PATH", "CardEndpoint"]

CARD_PATH = "/.well-known/agent-card.json"
#: Where the card is served: its path, and the one clients before A2A 0.3 read (the same card).
CARD_PATHS = frozenset({CARD_PATH, "/.well-known/agent.json"})
#: Where the public keys of the card's signers are served, as a JWKS (RFC 7517), when the card is signed.
JWKS_PATH = "/.well-known/jwks.json"
_MAX_CACHED_BASES = 32


class CardEndpoint:
    def __init__(
        self,
        card: Callable[[str], AgentCard],
        *,
        public_url: str | None = None,
        allowed_hosts: AllowedHosts | None = None,
        signers: Sequence[CardSigner] = (),
        max_age: int = 300,
        extra: Callable[[str, AgentCard], dict[str, Any]] | None = None,
    ) -> None:
        """``card(base_url)`` builds the card for a base URL such as ``http://127.0.0.1:8000``; ``extra``
        gives members to add beside the card's own (the v0.3 fields); ``signers`` sign it."""
        self._build = card
        self._extra = extra
        self.public_url = public_url.rstrip("/") if public_url else None
        self.allowed_hosts = allowed_hosts
        self.signers = tuple(signers)
        self._cache_control = f"public, max-age={max_age}".encode()
        self._encoded: dict[str, tuple[bytes, bytes]] = {}
        self._last_modified = formatdate(time.time(), usegmt=True).encode()
        self._jwks = msgspec.json.encode({"keys": [signer.public_jwk() for signer in self.signers]})

    def base_url(self, scope: Scope, headers: Mapping[str, str] | None = None) -> str:
        """The base URL a request's card is built for, such as ``http://127.0.0.1:8000/a2a``: the public URL
        if set, else its Host if allowed, else the address the connection reached, under the prefix the app
        is mounted at (ASGI ``root_path``) (``headers``: the request's headers when already parsed)."""
        if self.public_url:
            return self.public_url
        return base_url_of(scope, headers if headers is not None else header_map(scope), self.allowed_hosts)

    @property
    def varies_by_host(self) -> bool:
        """Whether the card served depends on the request's Host header."""
        return self.public_url is None and self.allowed_hosts is not None

    def sign(self, card: AgentCard, base_url: str) -> AgentCard:
        """``card`` signed by every signer, for ``base_url`` (whose JWKS each ``jku`` names); signatures it
        had are replaced (they were not made for the interfaces it has now). Unchanged without signers."""
        if not self.signers:
            return card
        jwks = f"{base_url}{JWKS_PATH}" if base_url else None
        signatures = [signer.signature(card, jku=signer.jku or jwks) for signer in self.signers]
        return msgspec.structs.replace(card, signatures=signatures)

    def encoded(self, base_url: str) -> tuple[bytes, bytes]:
        """(card JSON, quoted ETag) for ``base_url``."""
        hit = self._encoded.get(base_url)
        if hit is None:
            card = self.sign(self._build(base_url), base_url)
            if self._extra is None:
                body = msgspec.json.encode(card)
            else:
                body = msgspec.json.encode({**msgspec.to_builtins(card), **self._extra(base_url, card)})
            etag = b'"' + hashlib.sha256(body).hexdigest()[:32].encode() + b'"'
            if len(self._encoded) >= _MAX_CACHED_BASES:
                self._encoded.clear()
            hit = self._encoded[base_url] = (body, etag)
        return hit

    def invalidate(self) -> None:
        self._encoded.clear()
        self._last_modified = formatdate(time.time(), usegmt=True).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await send_bytes(
                send,
                405,
                encode_status(MethodNotFoundError("The agent card is read with GET"), 405),
                extra_headers=[(b"allow", b"GET, HEAD")],
            )
            return
        body, etag = self.encoded(self.base_url(scope))
        headers = [
            (b"etag", etag),
            (b"cache-control", self._cache_control),
            (b"last-modified", self._last_modified),
        ]
        if self.varies_by_host:
            headers.append((b"vary", b"Host"))
        match = header_map(scope).get("if-none-match")
        if match is not None and (
            match.strip() == "*" or etag.decode() in [m.strip() for m in match.split(",")]
        ):
            await send({"type": "http.response.start", "status": 304, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["method"] == "HEAD":
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        await send_bytes(send, 200, body, extra_headers=headers)

    async def jwks(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``GET /.well-known/jwks.json``: the public keys of the card's signers."""
        await send_key_set(scope, send, self._jwks, self._cache_control)


async def send_key_set(scope: Scope, send: Send, body: bytes, cache_control: bytes) -> None:
    """Answer a GET (or HEAD) with the JWKS ``body``; other methods get 405."""
    if scope["method"] not in ("GET", "HEAD"):
        error = MethodNotFoundError("The key set is read with GET")
        await send_bytes(send, 405, encode_status(error, 405), extra_headers=[(b"allow", b"GET, HEAD")])
        return
    headers = [
        (b"content-type", b"application/jwk-set+json"),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", cache_control),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


def jsonrpc_interface(base_url: str, path: str) -> AgentInterface:
    """The JSON-RPC interface at ``path`` below ``base_url``: the base URL itself for ``/`` at a host's root
    (``http://host``), else with the path (``http://host/a2a/``: a POST to ``/a2a`` would be redirected by
    the app it is mounted in)."""
    at_root = urlsplit(base_url).path in ("", "/")
    url = base_url if path == "/" and at_root else base_url.rstrip("/") + path
    return AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
