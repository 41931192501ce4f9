"""What a web page may make the agent do: requests a browser marks as coming from another site are refused,
and the origins the operator allows get CORS.

A page on another origin cannot read the agent's answers (the browser withholds them without CORS), but it
can still *send*: a form post, ``navigator.sendBeacon``, ``fetch(..., {mode: "no-cors"})``. Such "simple"
requests carry no custom header and no JSON Content-Type, and the browser adds the user's cookies, so
without a check they would run skills on an agent on the user's machine (``skillwire serve`` on loopback, no
security) or on one whose API key lives in a cookie. So, on every route that reads or changes tasks (the
JSON-RPC endpoint and the HTTP+JSON routes):

* a POST whose Content-Type is not JSON, or that has none, is refused before its body is read (the
  bindings' content-type error: JSON-RPC -32005, HTTP+JSON 415), so no simple request reaches a handler;
* a request the browser marks as coming from elsewhere is refused, 403 PERMISSION_DENIED, unless its
  ``Origin`` is one the operator allows: ``Sec-Fetch-Site`` other than ``same-origin`` or ``none`` (note
  that another port of the same host is ``same-site``, and refused), or, from a browser that does not send
  ``Sec-Fetch-Site``, an ``Origin`` that is not the one the request was sent to (its ``Host``);
* requests with neither header (curl, the SDKs, skillwire's client, gRPC) are not affected, and neither are
  the page the agent serves itself (``/console/``: same origin) nor ``skillwire console``'s relay (it drops
  the browser's headers).

CORS, for browser clients on other origins the operator names (``--cors-origin``, ``cors_origins=``; none
by default): their requests are served, every answer to them carries ``Access-Control-Allow-Origin`` (and
exposes the A2A headers a client reads), and a preflight (``OPTIONS`` with
``Access-Control-Request-Method``) is answered 204 with the methods and headers asked for; a preflight from
any other origin is answered 403 without CORS headers, so the browser sends nothing. Credentials travel in
headers the page sets (``Authorization``, an API key header), never as cookies:
``Access-Control-Allow-Credentials`` is not sent. An origin is ``scheme://host[:port]``, exactly; there is
no wildcard, since an agent any page may drive is an agent any page may drive with the user's cookies.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from skillwire.errors import PermissionDeniedError
from skillwire.server.bindings.asgi import Message, Scope, Send, send_bytes

__all__ = ["BrowserPolicy", "is_preflight", "origin_of", "parse_origin"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
#: What ``Sec-Fetch-Site`` says of a request its own page (or the user) made.
_OWN = frozenset({"same-origin", "none"})
_METHODS = b"GET, POST, PUT, PATCH, DELETE"
#: The response headers a browser client needs to read (the rest are withheld from it by default).
_EXPOSED = b"A2A-Extensions, A2A-Version, Retry-After, WWW-Authenticate, ETag, X-Request-Id"
_MAX_AGE = b"600"
_VARY = b"Origin, Access-Control-Request-Method, Access-Control-Request-Headers"


def parse_origin(text: str) -> str:
    """``text`` as an origin the way a browser writes one: ``scheme://host[:port]``, lower case, without the
    scheme's default port (a trailing ``/`` is allowed). ValueError when it is not one."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        raise ValueError(f"not an origin: {text!r}") from None
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        raise ValueError(f"not an origin: {text!r} (expected http:// or https://host[:port])")
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        raise ValueError(f"not an origin: {text!r} (an origin has no path, query or user)")
    scheme, host = parts.scheme.lower(), parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" if port in (None, _DEFAULT_PORTS[scheme]) else f"{scheme}://{host}:{port}"


class BrowserPolicy:
    """The origins whose pages may call the agent besides its own (see the module):
    ``BrowserPolicy(["https://app.example"])``; ValueError for an entry that is not an origin."""

    def __init__(self, origins: Iterable[str] = ()) -> None:
        self.origins = frozenset(parse_origin(origin) for origin in origins)

    def allows(self, origin: str | None) -> bool:
        """Whether pages of ``origin`` (an ``Origin`` header) may call the agent cross-origin."""
        if not origin or not self.origins:
            return False
        try:
            return parse_origin(origin) in self.origins
        except ValueError:
            return False

    def refusal(self, headers: Mapping[str, str]) -> PermissionDeniedError | None:
        """Why a request with these headers (lower-case names) is refused as a cross-site one, or None."""
        site = headers.get("sec-fetch-site")
        origin = headers.get("origin")
        if site is None and origin is None:  # not a browser (or one that sends neither: none does on POST)
            return None
        if site is not None:
            if site.strip().lower() in _OWN:
                return None
        elif _same_origin(origin, headers.get("host")):
            return None
        if self.allows(origin):
            return None
        shown = (origin or "(none)")[:100]
        return PermissionDeniedError(
            f"A web page of another site ({shown}) may not call this agent: the agent allows cross-site"
            " requests only from the origins its operator names (--cors-origin)",
            metadata={"origin": shown, "secFetchSite": (site or "")[:20]},
        )

    def cors_headers(self, origin: str) -> list[tuple[bytes, bytes]]:
        """The headers of an answer to a request from the allowed ``origin``."""
        return [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-expose-headers", _EXPOSED),
            (b"vary", b"Origin"),
        ]

    async def preflight(self, scope: Scope, headers: Mapping[str, str], send: Send) -> None:
        """Answer a CORS preflight: 204 with the grant for an allowed origin, else 403 without one."""
        origin = headers.get("origin")
        if origin is None or not self.allows(origin):
            body = b'{"error":"this origin may not call the agent (the operator allows origins with --cors-origin)"}'
            await send_bytes(send, 403, body, extra_headers=[(b"vary", _VARY)])
            return
        grant = [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-allow-methods", _METHODS),
            (b"access-control-max-age", _MAX_AGE),
            (b"vary", _VARY),
        ]
        asked = headers.get("access-control-request-headers")
        if asked:
            grant.append((b"access-control-allow-headers", asked.encode("latin-1")))
        if headers.get("access-control-request-private-network", "").lower() == "true":
            grant.append((b"access-control-allow-private-network", b"true"))
        await send({"type": "http.response.start", "status": 204, "headers": grant})
        await send({"type": "http.response.body", "body": b""})

    def with_cors(self, origin: str, send: Send) -> Send:
        """``send`` that adds the CORS headers of ``origin`` to the answer's start."""
        extra = self.cors_headers(origin)

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)

        return sending


def is_preflight(scope: Scope) -> bool:
    """Whether the request is a CORS preflight (``OPTIONS`` with ``Access-Control-Request-Method``)."""
    return scope["method"] == "OPTIONS" and any(
        name.lower() == b"access-control-request-method" for name, _ in scope.get("headers", ())
    )


def origin_of(scope: Scope) -> str | None:
    """The request's ``Origin`` header, if it has one."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"origin":
            return str(value.decode("latin-1"))
    return None


def _same_origin(origin: str | None, host: str | None) -> bool:
    """Whether ``origin`` (an ``Origin`` header) names the host and port the request was sent to."""
    if not origin or not host:
        return False
    try:
        parts = urlsplit(origin.strip())
    except ValueError:
        return False
    return parts.scheme.lower() in _DEFAULT_PORTS and parts.netloc.lower() == host.strip().lower()
