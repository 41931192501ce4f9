"""The relay of ``skillwire console URL`` (:mod:`skillwire.cli.console`): the web console for any A2A agent,
through a relay on this machine. Loaded only when the command runs.

A page from one origin cannot call an agent on another unless the agent allows it (CORS), and most agents
do not. So the command serves the console's files on a loopback port and forwards every other request the
page makes, path and query unchanged, to the agent's origin: to the browser, the agent and the page share
an origin. The relay is a dumb pipe for the page only:

- it listens on loopback only and answers only requests whose ``Host`` is a loopback name (a web page that
  rebinds its own name to 127.0.0.1 is refused), and forwards only requests carrying the
  ``X-Skillwire-Console`` header the page sends (another page cannot send it without a CORS preflight,
  which the relay never grants), so no other site can drive the agent through it;
- it forwards to the one origin it was started for, whatever the page asks;
- it adds no credentials: the page sends the ones typed into it (kept in the page's memory), and the
  browser's cookies, ``Origin`` and ``Referer`` are not passed on, nor the agent's ``Set-Cookie`` back;
- it is budgeted: at most :data:`MAX_CONCURRENT` calls at once (503 beyond), request bodies of at most
  :data:`MAX_BODY` (413), and an agent it cannot reach is a 502 with a JSON reason.

Responses stream through as they come (server-sent events included), and a call whose page went away is
ended upstream too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from skillwire.console import ConsoleAssets
from skillwire.errors import SkillwireError
from skillwire.server.bindings.asgi import header_map
from skillwire.server.bindings.hosts import AllowedHosts, local_hosts

if TYPE_CHECKING:
    import httpx

__all__ = ["MAX_BODY", "MAX_CONCURRENT", "Relay"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: Calls the relay forwards at once (each open stream is one).
MAX_CONCURRENT = 32
#: The largest request body forwarded (the page's messages, files included).
MAX_BODY = 16 * 1024 * 1024
#: How long the relay waits to connect to the agent.
CONNECT_TIMEOUT = 10.0

CARD_PATH = "/.well-known/agent-card.json"

#: Request headers not passed on: the connection's own, and what the browser adds about the user and the
#: page (cookies, where the page is) that an agent called from the command line would not see either.
_DROP_REQUEST = frozenset(
    {
        b"host",
        b"connection",
        b"keep-alive",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"content-length",
        b"accept-encoding",
        b"cookie",
        b"origin",
        b"referer",
        b"x-skillwire-console",
    }
)
_DROP_RESPONSE = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"set-cookie",
        b"set-cookie2",
        b"access-control-allow-origin",
        b"access-control-allow-credentials",
    }
)


class Relay:
    """The ASGI app of ``skillwire console``: the console's files, and every other call forwarded to
    ``agent_url``'s origin. ``agent_url`` is the agent's URL or its card's (a path ending in ``.json``);
    ``verify`` is httpx's (True: the system's CAs; a path or SSLContext: those)."""

    def __init__(
        self,
        agent_url: str,
        *,
        verify: ssl.SSLContext | bool = True,
        max_concurrent: int = MAX_CONCURRENT,
        max_body: int = MAX_BODY,
        connect_timeout: float = CONNECT_TIMEOUT,
        bind: str = "127.0.0.1",
    ) -> None:
        import httpx  # here, not at the top: the other commands start without it

        parts = urlsplit(agent_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SkillwireError(f"{agent_url!r}: expected the agent's http:// or https:// URL")
        self.origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        path = parts.path or "/"
        card = path if path.endswith(".json") else path.rstrip("/") + CARD_PATH
        card += f"?{parts.query}" if parts.query else ""
        self.card_url = self.origin + card
        # the page asks for the card at its own origin, at the path the agent has it at
        self.console = ConsoleAssets({"mode": "relay", "card": card, "agent": self.origin})
        self.max_concurrent = max_concurrent
        self.max_body = max_body
        self._verify = verify
        self._timeout = httpx.Timeout(None, connect=connect_timeout)
        self._client: httpx.AsyncClient | None = None
        self._active = 0
        #: the Host headers answered: the loopback names of ``bind`` (the address the relay listens on)
        self._hosts = AllowedHosts(local_hosts(bind))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = header_map(scope)
        if not self._hosts.allows(headers.get("host")):
            await _json(
                send, 400, "This relay answers requests to a loopback address (127.0.0.1, localhost) only"
            )
            return
        path = scope["path"]
        if self.console.handles(path):
            await self.console(scope, receive, send)
        elif path == "/" and scope["method"] in ("GET", "HEAD") and "x-skillwire-console" not in headers:
            await send(
                {
                    "type": "http.response.start",
                    "status": 308,
                    "headers": [(b"location", b"/console/"), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
        elif headers.get("x-skillwire-console") != "1":
            await _json(
                send, 403, "The relay forwards the console page's calls only (X-Skillwire-Console: 1)"
            )
        elif self._active >= self.max_concurrent:
            await _json(send, 503, "The relay is busy: too many calls at once", ((b"retry-after", b"1"),))
        else:
            self._active += 1
            try:
                await self._forward(scope, receive, send, headers.get("content-length"))
            finally:
                self._active -= 1

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._client = self._new_client()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _new_client(self) -> httpx.AsyncClient:
        import httpx

        return httpx.AsyncClient(
            verify=self._verify, timeout=self._timeout, follow_redirects=False, trust_env=False
        )

    async def _forward(self, scope: Scope, receive: Receive, send: Send, declared: str | None) -> None:
        import httpx

        if self._client is None:  # served without a lifespan
            self._client = self._new_client()
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await _json(send, 413, f"The request body is over the relay's {self.max_body} bytes")
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_body:
                await _json(send, 413, f"The request body is over the relay's {self.max_body} bytes")
                return
            if not message.get("more_body", False):
                break
        target = self.origin + scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        headers = [
            (k, v)
            for k, v in scope["headers"]
            if k.lower() not in _DROP_REQUEST and not k.lower().startswith(b"sec-")
        ]
        headers.append((b"accept-encoding", b"identity"))
        request = self._client.build_request(scope["method"], target, headers=headers, content=bytes(body))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            try:
                response = await _until(gone, self._client.send(request, stream=True))
            except httpx.HTTPError as exc:
                await _json(send, 502, f"The agent at {self.origin} could not be reached: {_reason(exc)}")
                return
            if response is None:  # the page went away first
                return
            try:
                out = [(k, v) for k, v in response.headers.raw if k.lower() not in _DROP_RESPONSE]
                await send({"type": "http.response.start", "status": response.status_code, "headers": out})
                chunks = response.aiter_raw()
                while True:
                    chunk = await _until(gone, anext(chunks, None))
                    if chunk is None:
                        break
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            except httpx.HTTPError:
                pass  # the agent cut the stream: the page sees it end, as it would without the relay
            finally:
                await response.aclose()
        finally:
            gone.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await gone


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _until(gone: asyncio.Future[None], work: Awaitable[Any]) -> Any:
    """What ``work`` gives, or None once ``gone`` (the page left) is done first (``work`` is cancelled)."""
    import httpx

    task = asyncio.ensure_future(work)
    await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
        await task
    return None


def _reason(exc: httpx.HTTPError) -> str:
    import httpx

    if isinstance(exc, httpx.ConnectTimeout):
        return "connecting timed out"
    if isinstance(exc, httpx.ConnectError):
        return "the connection was refused or failed"
    return type(exc).__name__


async def _json(send: Send, status: int, text: str, extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    body = json.dumps({"error": text}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"x-content-type-options", b"nosniff"),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
