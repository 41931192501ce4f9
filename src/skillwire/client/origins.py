"""Which origins the client talks to, and what it sends them.

An agent card is written by whoever serves it, and it names the URLs its interfaces are at; those may be
anywhere. So the client trusts the origin (scheme, host and port) of the URL it was given, and the origins
the caller allows, and nothing a card says::

    client = await Client.connect("https://a.example", credentials={"apiKey": key})
    # a card naming https://b.example/rpc: UntrustedOriginError, nothing sent to b.example
    client = await Client.connect(
        "https://a.example", credentials={"apiKey": key}, allowed_origins=["https://b.example"]
    )

The rules, applied when :meth:`Client.connect` has chosen an interface:

* **Credentials stay home.** When the client has credentials, the interface must be on the origin named or
  an allowed one, else :class:`UntrustedOriginError` is raised before anything is sent there. Credentials
  are the secrets of ``credentials=``, the ``headers=`` whose names look like credentials
  (:func:`is_credential_header`: ``Authorization``, ``Cookie``, ``X-API-Key``, ``*token*`` ...) and, on a
  shared ``http=`` client, its ``auth``, such headers and the cookies it sends every host (``cookies=``).
  Without any, the client follows the card wherever it points (a card on ``www.example.com`` may name
  ``api.example.com``): it sends the messages there, and ``headers=`` that are not credentials.
* **No downgrade.** When the URL named is ``https://``, an interface without TLS (``http://``, or a
  plaintext gRPC target) is refused with :class:`InsecureDowngradeError`, credentials or not.
* Allowing an origin (``allowed_origins=``, ``skillwire ... --allow-origin``) allows both.
* A request that carries credentials never follows a redirect (httpx keeps a header such as ``X-API-Key``
  across one), whatever the shared ``http=`` client's ``follow_redirects`` says.

An origin is written ``scheme://host:port`` (:func:`origin_of`). A gRPC target is one as well: ``grpc://``
and a bare ``host:port`` are plaintext, like ``http://``; ``grpcs://`` is TLS, like ``https://``, and
``https://host`` is ``https://host:443`` for either. A target in grpc's own syntax (``dns:///host:443``,
``unix:/path``) stands for itself: only its exact text allows it. Mutual TLS (a client certificate on the
``http=`` client) is not covered: the certificate proves who the client is but gives away no secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import httpx

from skillwire.client.errors import InsecureDowngradeError, UntrustedOriginError
from skillwire.protocol import models as m

__all__ = [
    "OriginPolicy",
    "agent_url",
    "grpc_target",
    "has_ambient_credentials",
    "is_credential_header",
    "is_short_url",
    "origin_of",
]

_SECURE_SCHEMES = {"grpcs": True, "https": True, "grpc": False, "http": False}
_DEFAULT_PORTS = {"http": 80, "https": 443}
#: grpc's port when a target names none, with TLS or without.
_GRPC_DEFAULT_PORT = 443
#: A gRPC authority this module reads as host and port; anything else stands for itself (nothing that a
#: resolver might read otherwise, such as user info or a path, can pass for a host).
_AUTHORITY = re.compile(r"(?:\[(?P<ip6>[0-9A-Fa-f:.]+)\]|(?P<host>[A-Za-z0-9.-]+))(?::(?P<port>\d{1,5}))?")

#: Header names that carry credentials, and words that make a header name one (``X-Auth-Token`` ...).
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
_CREDENTIAL_WORDS = ("auth", "token", "key", "secret", "session", "password", "credential", "cookie")


#: An agent's address typed short: ``host:port`` or ``:port``, a path after it allowed (``localhost:8000/a2a``).
_SHORT_URL = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]*):\d{1,5}(?:/.*)?")


def is_short_url(text: str) -> bool:
    """Whether ``text`` is an agent's address typed short (``host:port`` or ``:port``): a module name
    (``agent:agent``) is not, a port being digits only."""
    return _SHORT_URL.fullmatch(text.strip()) is not None


def agent_url(text: str) -> str:
    """An agent's URL as typed: without a scheme it is plain ``http://`` (``host:port`` is
    ``http://host:port``) and ``:port`` is ``http://127.0.0.1:port``, as httpie reads them; a URL with a
    scheme is kept::

    agent_url(":8000")                  # "http://127.0.0.1:8000"
    agent_url("localhost:8000/a2a")     # "http://localhost:8000/a2a"
    agent_url("https://agent.example")  # "https://agent.example"
    """
    text = text.strip()
    if "://" in text:
        return text
    return "http://" + ("127.0.0.1" + text if text.startswith(":") else text)


def grpc_target(url: str) -> tuple[str, bool]:
    """The grpc target for an interface ``url`` and whether it needs TLS::

    grpc_target("grpcs://agent.example:443")  # ("agent.example:443", True)
    grpc_target("[::1]:50051")                 # ("[::1]:50051", False)
    """
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    secure = _SECURE_SCHEMES.get(scheme.lower()) if sep else False
    if secure is None:  # grpc's own target syntax: dns:///host:port, ipv4:..., unix://...
        return url, False
    authority = rest.partition("/")[0] if sep else url.rstrip("/")
    return authority, secure


def _written(secure: bool, host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if secure else 'http'}://{shown.lower()}:{port}"


def _http_origin(url: str) -> str | None:
    """The origin of an http(s) URL as httpx reads it (the parser that sends the requests)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return None
    default = _DEFAULT_PORTS.get(parsed.scheme)
    if default is None or not parsed.raw_host:
        return None
    return _written(parsed.scheme == "https", parsed.raw_host.decode("ascii"), parsed.port or default)


def _grpc_origin(url: str) -> str | None:
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if scheme and scheme not in _SECURE_SCHEMES:
        return None  # grpc's own syntax
    authority, secure = grpc_target(url)
    match = _AUTHORITY.fullmatch(authority)
    if match is None:
        return None
    port = int(match["port"]) if match["port"] else _GRPC_DEFAULT_PORT
    return _written(secure, match["ip6"] or match["host"], port)


def origin_of(url: str, *, grpc: bool = False) -> str:
    """The origin of ``url`` as ``scheme://host:port`` (host lower-cased, default port written out); with
    ``grpc``, ``url`` is a gRPC interface's target. An address that has no such form stands for itself::

    origin_of("https://Agent.example/a2a")                # "https://agent.example:443"
    origin_of("127.0.0.1:50051", grpc=True)               # "http://127.0.0.1:50051"
    origin_of("dns:///agent.example:443", grpc=True)      # "dns:///agent.example:443"
    """
    text = url.strip()
    return (_grpc_origin(text) if grpc else _http_origin(text)) or text


def _allowed_origin(entry: str) -> str:
    """An entry of ``allowed_origins``: an http, https, grpc or grpcs URL (a path is ignored), a
    ``host:port`` (plaintext), or a target in grpc's own syntax, which stands for itself."""
    text = entry.strip()
    scheme = text.partition("://")[0].lower() if "://" in text else ""
    origin = _http_origin(text) if scheme in _DEFAULT_PORTS else _grpc_origin(text)
    if origin is not None:
        match = _AUTHORITY.fullmatch(text)
        if match is not None and not match["port"]:
            raise ValueError(f"allowed origin {entry!r}: give its scheme (https://{text}) or its port")
        return origin
    if scheme in _SECURE_SCHEMES:
        raise ValueError(f"allowed origin {entry!r} is not scheme://host[:port]")
    return text


def is_credential_header(name: str) -> bool:
    """Whether a header named ``name`` carries credentials: ``Authorization``, ``Proxy-Authorization``,
    ``Cookie``, and any name with auth, token, key, secret, session, password or credential in it."""
    lowered = name.strip().lower()
    return lowered in _CREDENTIAL_HEADERS or any(word in lowered for word in _CREDENTIAL_WORDS)


def has_ambient_credentials(http: httpx.AsyncClient) -> bool:
    """Whether a shared httpx client adds credentials to every request by itself: its ``auth``, cookies set
    for no domain (``cookies=``: sent to every host; one an answer set stays with its domain), or headers
    that :func:`is_credential_header` says are credentials."""
    return (
        http.auth is not None
        or any(not cookie.domain for cookie in http.cookies.jar)
        or any(is_credential_header(name) for name in http.headers)
    )


class OriginPolicy:
    """The origins a client may send to: the one of the URL it was given, and ``allowed``; ``credentialed``
    says whether it has credentials to send (see the module docstring for the rules)."""

    def __init__(self, named_url: str, allowed: Iterable[str] = (), *, credentialed: bool) -> None:
        self.named = origin_of(named_url)
        self.allowed = frozenset(_allowed_origin(entry) for entry in allowed)
        self.credentialed = credentialed

    @classmethod
    def for_connect(
        cls,
        named_url: str,
        allowed: Iterable[str],
        *,
        credentials: object,
        headers: Mapping[str, str],
        http: httpx.AsyncClient | None,
    ) -> OriginPolicy:
        """The policy of :meth:`Client.connect`: credentialed when it has ``credentials``, a header that
        carries credentials, or a shared ``http`` client that adds some to every request."""
        credentialed = (
            credentials is not None
            or any(is_credential_header(name) for name in headers)
            or (http is not None and has_ambient_credentials(http))
        )
        return cls(named_url, allowed, credentialed=credentialed)

    @property
    def follow_redirects(self) -> bool | None:
        """False when requests carry credentials; None (the httpx client's own setting) otherwise."""
        return False if self.credentialed else None

    def check(self, interface: m.AgentInterface, card_url: str) -> None:
        """Raise unless the client may use ``interface``, which the card at ``card_url`` names."""
        binding = interface.protocol_binding.upper()
        target = origin_of(interface.url, grpc=binding == "GRPC")
        if target == self.named or target in self.allowed:
            return
        where = f"the agent card at {card_url} names its {binding} interface at {interface.url}"
        kind: type[UntrustedOriginError]
        if self.named.startswith("https://") and not target.startswith("https://"):
            kind = InsecureDowngradeError
            why = (
                f"{where}, which is not encrypted although you named an https URL ({self.named}): refusing"
                " the downgrade, as your messages and any credentials would travel in clear text"
            )
        elif self.credentialed:
            kind = UntrustedOriginError
            why = (
                f"{where}, on another origin ({target}) than the one you named ({self.named}): credentials"
                " are only sent to the origin you named, so nothing was sent there"
            )
        else:
            return
        raise kind(
            why, card_url=card_url, interface_url=interface.url, origin=target, named_origin=self.named
        )
