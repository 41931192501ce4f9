"""Agent card discovery: ``GET /.well-known/agent-card.json`` with caching headers.

The card is encoded once per base URL (the interfaces carry absolute URLs) and served with ``ETag`` and
``Cache-Control``; a matching ``If-None-Match`` gets 304.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from email.utils import formatdate
from typing import Any
from urllib.parse import quote, urlsplit

import msgspec

from skillwire.errors import MethodNotFoundError
from skillwire.protocol.models import AgentCard, AgentInterface
from skillwire.server.asgi import Receive, Scope, Send, header_map, send_bytes
from skillwire.wire.rest import encode_status

__all__ = ["CARD_PATH", "CardEndpoint"]

CARD_PATH = "/.well-known/agent-card.json"
_MAX_CACHED_BASES = 32


class CardEndpoint:
    def __init__(
        self,
        card: Callable[[str], AgentCard],
        *,
        public_url: str | None = None,
        max_age: int = 300,
        extra: Callable[[str, AgentCard], dict[str, Any]] | None = None,
    ) -> None:
        """``card(base_url)`` builds the card for a base URL such as ``http://127.0.0.1:8000``; ``extra``
        gives members to add beside the card's own (the v0.3 fields)."""
        self._build = card
        self._extra = extra
        self.public_url = public_url.rstrip("/") if public_url else None
        self._cache_control = f"public, max-age={max_age}".encode()
        self._encoded: dict[str, tuple[bytes, bytes]] = {}
        self._last_modified = formatdate(time.time(), usegmt=True).encode()

    def base_url(self, scope: Scope, headers: Mapping[str, str] | None = None) -> str:
        """The base URL a request reached: the public URL if set, else from its Host header and the prefix
        the app is mounted at (ASGI ``root_path``), such as ``http://127.0.0.1:8000/a2a`` (``headers``: the
        request's headers when already parsed)."""
        if self.public_url:
            return self.public_url
        host = (headers if headers is not None else header_map(scope)).get("host")
        if not host:
            server = scope.get("server") or ("127.0.0.1", 80)
            host = f"{server[0]}:{server[1]}"
        root = scope.get("root_path", "").rstrip("/")
        return f"{scope.get('scheme', 'http')}://{host}{quote(root) if root else ''}"

    def encoded(self, base_url: str) -> tuple[bytes, bytes]:
        """(card JSON, quoted ETag) for ``base_url``."""
        hit = self._encoded.get(base_url)
        if hit is None:
            card = self._build(base_url)
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


def jsonrpc_interface(base_url: str, path: str) -> AgentInterface:
    """The JSON-RPC interface at ``path`` below ``base_url``: the base URL itself for ``/`` at a host's root
    (``http://host``), else with the path (``http://host/a2a/``: a POST to ``/a2a`` would be redirected by
    the app it is mounted in)."""
    at_root = urlsplit(base_url).path in ("", "/")
    url = base_url if path == "/" and at_root else base_url.rstrip("/") + path
    return AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
