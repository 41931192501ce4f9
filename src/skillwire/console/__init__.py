"""The web console: a page that shows an A2A agent's card and drives it from a browser.

The console is three static files (``assets/``: one HTML page, one stylesheet, one ES module) shipped in the
wheel. There is no build step and nothing is fetched from elsewhere: the page talks to the agent only through
the agent's public A2A endpoints (JSON-RPC), with credentials the user types into the page, which the page
keeps in memory and the server never sees except as the headers of those calls.

Two hosts serve it:

- ``skillwire serve`` mounts it at ``/console/`` on the agent itself (:class:`ConsoleAssets` with
  :meth:`ConsoleAssets.served`), so the page and the agent share an origin;
- ``skillwire console URL`` runs a small loopback relay (:mod:`skillwire.cli.console_relay`) that serves the same
  files and forwards the page's calls to any agent, v1.0 or v0.3, skillwire or not.

This module is a layer of its own and imports nothing from skillwire: the server and the CLI import it.
It speaks plain ASGI, so it costs nothing until a browser asks for it (the files are read on first use).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

__all__ = ["CONSOLE_PATH", "CONTENT_SECURITY_POLICY", "ConsoleAssets", "asset_bytes"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: Where the console lives, below the app's root path.
CONSOLE_PATH = "/console"

_FILES: dict[str, bytes] = {
    "index.html": b"text/html; charset=utf-8",
    "console.css": b"text/css; charset=utf-8",
    "console.js": b"text/javascript; charset=utf-8",
}

#: The page runs only its own script and style and talks only to its own origin: agent text that slipped into
#: markup could still not run, load or send anything.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; "
    "media-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)

_SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


def asset_bytes() -> dict[str, int]:
    """The size in bytes of each file the console is made of (as shipped, uncompressed)."""
    folder = resources.files("skillwire.console").joinpath("assets")
    return {name: len(folder.joinpath(name).read_bytes()) for name in _FILES}


@dataclass
class _Asset:
    body: bytes
    content_type: bytes
    etag: bytes


@dataclass
class ConsoleAssets:
    """An ASGI handler of ``/console``, ``/console/`` and the console's files below the app's root path.

    ``config`` is what the page reads first from ``config.json``: ``{"mode": "served", "card": ...}`` when
    the agent serves the page itself, ``{"mode": "relay", "card": ..., "agent": ...}`` behind the relay."""

    config: dict[str, str]
    _assets: dict[str, _Asset] | None = field(default=None, init=False, repr=False)

    @classmethod
    def served(cls) -> ConsoleAssets:
        """The console as the agent serves it: the card is the agent's own, at its well-known path (relative
        to the page, so it works under any root path)."""
        return cls({"mode": "served", "card": "../.well-known/agent-card.json"})

    def handles(self, path: str) -> bool:
        """Whether ``path`` (below the root path) is the console's: the folder and its files only, so other
        paths under ``/console/`` (a tenant named "console" of the REST binding) still reach the agent."""
        if path in (CONSOLE_PATH, CONSOLE_PATH + "/"):
            return True
        name = path.removeprefix(CONSOLE_PATH + "/")
        return name != path and (name in _FILES or name == "config.json")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a request whose path (below the root path) :meth:`handles`."""
        path = scope["path"]
        method = scope["method"]
        if method not in ("GET", "HEAD"):
            await _answer(
                send, 405, b"Method not allowed\n", b"text/plain; charset=utf-8", [(b"allow", b"GET, HEAD")]
            )
            return
        if path == CONSOLE_PATH:  # the page's relative URLs need the slash
            root = scope.get("root_path", "").rstrip("/")
            query = scope.get("query_string", b"")
            location = (root + CONSOLE_PATH + "/").encode("latin-1", "replace") + (
                b"?" + query if query else b""
            )
            await _answer(send, 308, b"", b"text/plain; charset=utf-8", [(b"location", location)])
            return
        name = path.removeprefix(CONSOLE_PATH + "/") or "index.html"
        asset = self._asset(name)
        headers = [(b"etag", asset.etag), (b"cache-control", _cache_control(name))]
        if _matches(scope, asset.etag):
            await _answer(send, 304, b"", asset.content_type, headers, head=True)
            return
        await _answer(send, 200, asset.body, asset.content_type, headers, head=method == "HEAD")

    def _asset(self, name: str) -> _Asset:
        if self._assets is None:
            folder = resources.files("skillwire.console").joinpath("assets")
            assets = {n: _make(folder.joinpath(n).read_bytes(), t) for n, t in _FILES.items()}
            config = json.dumps(self.config, separators=(",", ":")).encode()
            assets["config.json"] = _make(config, b"application/json")
            self._assets = assets
        return self._assets[name]


def _make(body: bytes, content_type: bytes) -> _Asset:
    digest = hashlib.sha256(body).hexdigest()[:20]
    return _Asset(body, content_type, f'"{digest}"'.encode())


def _cache_control(name: str) -> bytes:
    # revalidated each time (an upgrade must show at once); the ETag keeps it to a 304
    return b"no-store" if name == "config.json" else b"no-cache"


def _matches(scope: Scope, etag: bytes) -> bool:
    for key, value in scope.get("headers", ()):
        if key.lower() == b"if-none-match":
            tags = [tag.strip().removeprefix(b"W/") for tag in value.split(b",")]
            return etag in tags or b"*" in tags
    return False


async def _answer(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    extra: list[tuple[bytes, bytes]],
    *,
    head: bool = False,
) -> None:
    headers = (
        []
        if status == 304
        else [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    )
    headers += [*extra, *_SECURITY_HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head or status == 304 else body})
