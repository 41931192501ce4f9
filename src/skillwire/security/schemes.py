"""Security schemes: what an agent declares on its card and checks on every request.

A scheme has a name (its key in the card's ``securitySchemes``), the entry the card shows, and
``authenticate(presented)``, which reads the request's credentials for this scheme: None when the request
presents none, a :class:`Principal` when they verify, and :class:`~skillwire.errors.UnauthenticatedError`
when they are there and wrong. Which schemes a call needs is the :class:`~skillwire.security.Security`
policy's business, not a scheme's.

Here: :class:`APIKey` (header, query parameter or cookie), :class:`HTTPBasic` (hashed passwords) and
:class:`MutualTLS` (the client certificate's subject). Bearer tokens (JWTs, OAuth 2, OpenID Connect,
introspection) are in :mod:`skillwire.security.tokens`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import inspect
import os
import secrets
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from http.cookies import CookieError, SimpleCookie
from typing import Any, ClassVar, Literal, Protocol
from urllib.parse import parse_qs

from skillwire.errors import UnauthenticatedError
from skillwire.security.principal import Principal

__all__ = [
    "APIKey",
    "Certificate",
    "HTTPBasic",
    "MutualTLS",
    "Presented",
    "Scheme",
    "hash_password",
    "keys_from_env",
]


class Certificate(Protocol):
    """A verified client certificate, as the TLS layer hands it over (``skillwire.server.bindings.tls``)."""

    @property
    def subject(self) -> str: ...


class Presented:
    """The credentials a request carries, whatever the binding: its headers (gRPC metadata), query string
    and cookies, and the client certificate of a mutual TLS connection."""

    __slots__ = ("_cookies", "_query", "headers", "peer", "query_string")

    def __init__(
        self, headers: Mapping[str, str], query_string: bytes = b"", peer: Certificate | None = None
    ) -> None:
        #: lower-cased names
        self.headers = headers
        self.query_string = query_string
        self.peer = peer
        self._query: dict[str, list[str]] | None = None
        self._cookies: dict[str, str] | None = None

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())

    def query(self, name: str) -> str | None:
        if not self.query_string:
            return None
        if self._query is None:
            self._query = parse_qs(self.query_string.decode("latin-1"), keep_blank_values=True)
        values = self._query.get(name)
        return values[0] if values else None

    def cookie(self, name: str) -> str | None:
        raw = self.headers.get("cookie")
        if not raw:
            return None
        if self._cookies is None:
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(raw)
            except CookieError:
                self._cookies = {}
            else:
                self._cookies = {key: morsel.value for key, morsel in jar.items()}
        return self._cookies.get(name)

    def authorization(self, scheme: str) -> str | None:
        """The credentials of an ``Authorization: <scheme> <credentials>`` header (scheme compared without
        case), or None."""
        value = self.headers.get("authorization")
        if not value:
            return None
        given, _, credentials = value.strip().partition(" ")
        return credentials.strip() if given.lower() == scheme.lower() else None


class Scheme(ABC):
    """A security scheme an agent declares and enforces (subclass it for one of your own)."""

    #: What the card's entry is called (``apiKeySecurityScheme``, ...).
    kind: ClassVar[str] = ""

    def __init__(self, name: str, *, description: str = "") -> None:
        if not name or not isinstance(name, str):
            raise ValueError("a security scheme needs a name (its key in the card's securitySchemes)")
        self.name = name
        self.description = description

    @abstractmethod
    def card(self) -> dict[str, Any]:
        """The scheme's card entry: ``{kind: {...}}``, the SecurityScheme oneof as ProtoJSON."""

    def challenge(self) -> str | None:
        """The ``WWW-Authenticate`` value asking for this scheme's credentials, if HTTP has one."""
        return None

    @abstractmethod
    async def authenticate(self, presented: Presented) -> Principal | None:
        """None if the request presents no credentials for this scheme; the principal if they verify;
        raises UnauthenticatedError if they are there and do not."""

    async def start(self) -> None:
        """Open what the scheme needs (an HTTP client for a JWKS); called once at the agent's start-up."""
        return None

    async def close(self) -> None:
        """Release what :meth:`start` opened."""
        return None

    def _entry(self, **fields: Any) -> dict[str, Any]:
        body = {k: v for k, v in fields.items() if v not in (None, "", {}, [])}
        if self.description:
            body["description"] = self.description
        return {self.kind: body}

    def _principal(
        self, subject: str, scopes: Iterable[str] = (), claims: Mapping[str, Any] | None = None
    ) -> Principal:
        granted = frozenset(scopes)
        return Principal(
            subject=subject,
            scheme=self.name,
            scopes=granted,
            claims=dict(claims or {}),
            granted={self.name: granted},
        )

    def _adopt(self, verdict: Principal | str) -> Principal:
        """A verifier callable's answer as this scheme's principal: a subject (scopes from ``scopes=``), or a
        Principal whose scheme and ``granted`` are filled in when it leaves them out."""
        if isinstance(verdict, str):
            return self._principal(verdict, getattr(self, "_scopes", {}).get(verdict, ()))
        if verdict.scheme:
            return verdict
        return self._principal(verdict.subject, verdict.scopes, verdict.claims)

    def _refuse(self, why: str) -> UnauthenticatedError:
        challenge = self.challenge()
        return UnauthenticatedError(
            f"{why} (security scheme {self.name!r})",
            challenges=[challenge] if challenge else [],
            metadata={"scheme": self.name},
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


#: What a callable given as ``keys=``/``verify=`` returns: the principal, its subject, or None (refused).
Verdict = Principal | str | None
Verifier = Callable[[str], Verdict | Awaitable[Verdict]]


def keys_from_env(variable: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``principal:key`` pairs, comma-separated, from the environment variable ``variable`` (empty when it is
    unset): ``keys_from_env("AGENT_KEYS")`` for ``AGENT_KEYS="alice:k1,bob:k2"`` is
    ``{"alice": "k1", "bob": "k2"}``."""
    keys: dict[str, str] = {}
    for pair in ((os.environ if env is None else env).get(variable) or "").split(","):
        if not pair.strip():
            continue
        principal, sep, key = pair.strip().partition(":")
        if not sep or not principal or not key:
            raise ValueError(
                f"{variable}: expected comma-separated principal:key pairs, got {pair.strip()!r}"
            )
        keys[principal] = key
    return keys


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


class APIKey(Scheme):
    """An API key in a header, a query parameter or a cookie.

    ``keys`` maps each principal to its key, or is a callable ``verify(key) -> Principal | subject | None``
    (sync or async) for keys kept elsewhere. Keys are compared by their SHA-256 digest and
    :func:`hmac.compare_digest`, so the time an answer takes says nothing about any stored key.
    ``scopes`` grants scopes to principals. On gRPC every location is read from the metadata of that name
    (lower-cased): gRPC has neither query strings nor cookies."""

    kind = "apiKeySecurityScheme"

    def __init__(
        self,
        name: str = "apiKey",
        *,
        keys: Mapping[str, str] | Verifier,
        location: Literal["header", "query", "cookie"] = "header",
        parameter: str = "X-API-Key",
        scopes: Mapping[str, Iterable[str]] | None = None,
        description: str = "",
    ) -> None:
        super().__init__(name, description=description)
        if location not in ("header", "query", "cookie"):
            raise ValueError(f"APIKey location must be header, query or cookie, not {location!r}")
        self.location = location
        self.parameter = parameter
        self._scopes = {p: frozenset(s) for p, s in (scopes or {}).items()}
        self._verify: Verifier | None = None
        #: SHA-256 of each key -> (that digest, its principal)
        self._by_digest: dict[bytes, tuple[bytes, str]] = {}
        if callable(keys):
            self._verify = keys
        else:
            for principal, key in keys.items():
                if not key:
                    raise ValueError(f"APIKey {name!r}: principal {principal!r} has an empty key")
                digest = _digest(key)
                if digest in self._by_digest:
                    raise ValueError(f"APIKey {name!r}: two principals share one key")
                self._by_digest[digest] = (digest, principal)

    def card(self) -> dict[str, Any]:
        return self._entry(location=self.location, name=self.parameter)

    def challenge(self) -> str:
        # No registered HTTP scheme names API keys; this one says where the key goes, in RFC 9110 syntax.
        return f'ApiKey in="{self.location}", name="{self.parameter}"'

    def _read(self, presented: Presented) -> str | None:
        if self.location == "header":
            return presented.header(self.parameter)
        found = (
            presented.query(self.parameter) if self.location == "query" else presented.cookie(self.parameter)
        )
        return found if found is not None else presented.header(self.parameter)  # gRPC: metadata

    async def authenticate(self, presented: Presented) -> Principal | None:
        key = self._read(presented)
        if key is None:
            return None
        if self._verify is not None:
            verdict = self._verify(key)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            return self._verdict(verdict)
        # The table is keyed by digests, so finding an entry compares digests, never keys: how long it takes
        # says nothing about a stored key (a digest's prefix gives no preimage). The hit is then compared once
        # more in constant time, so no path rests on a short-circuiting ``==`` alone.
        digest = _digest(key)
        hit = self._by_digest.get(digest)
        if hit is None or not hmac.compare_digest(digest, hit[0]):
            raise self._refuse("The API key is not valid")
        return self._principal(hit[1], self._scopes.get(hit[1], ()))

    def _verdict(self, verdict: Verdict) -> Principal:
        if verdict is None or verdict == "":
            raise self._refuse("The API key is not valid")
        return self._adopt(verdict)


# -- HTTP basic ------------------------------------------------------------------------------------------

_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
_MAX_PASSWORD = 1024


def hash_password(password: str, *, salt: bytes | None = None) -> str:
    """A password hash for :class:`HTTPBasic` ``users``: ``scrypt$16384$8$1$<salt>$<hash>`` (base64). Keep the
    hash in configuration, never the password: ``python -c "from skillwire.security import hash_password;
    print(hash_password('s3cret'))"``."""
    salt = salt or secrets.token_bytes(16)
    derived = hashlib.scrypt(password.encode(), salt=salt, dklen=32, **_SCRYPT)
    b64 = base64.b64encode
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${b64(salt).decode()}${b64(derived).decode()}"


def _check_password(password: str, stored: str) -> bool:
    try:
        kind, n, r, p, salt, expected = stored.split("$")
        if kind != "scrypt":
            return False
        raw_salt, raw_expected = base64.b64decode(salt), base64.b64decode(expected)
        derived = hashlib.scrypt(
            password.encode(), salt=raw_salt, n=int(n), r=int(r), p=int(p), dklen=len(raw_expected)
        )
    except (ValueError, binascii.Error):
        return False
    return hmac.compare_digest(derived, raw_expected)


#: What an unknown user's password is checked against, so that an unknown user costs one scrypt like a wrong
#: password (and is then refused whatever the check says). The hash of a random password nobody kept, made
#: once by :func:`hash_password` and written here: making it at import cost 55 ms of every start-up.
_DUMMY_HASH = "scrypt$16384$8$1$nXup4M50satE5nQwskwtug==$mq9lhNiMvuVG7IwrUJcYdFt9DyTmq+L66hwhECBftG0="


class HTTPBasic(Scheme):
    """HTTP basic authentication against hashed passwords (``users``: user name -> :func:`hash_password`
    hash), or a callable ``verify("user:password") -> Principal | subject | None``.

    A scrypt check costs tens of milliseconds of CPU, so it runs on a worker thread (never on the event loop),
    at most ``concurrency`` at a time, and a verified pair is remembered for ``cache_seconds`` (by an HMAC
    under a key of this process, never the password itself) so that a client sending the same credentials on
    every call pays once. An unknown user costs the same as a wrong password."""

    kind = "httpAuthSecurityScheme"

    def __init__(
        self,
        name: str = "basic",
        *,
        users: Mapping[str, str] | Verifier,
        realm: str = "skillwire",
        scopes: Mapping[str, Iterable[str]] | None = None,
        cache_seconds: float = 60.0,
        concurrency: int = 2,
        description: str = "",
    ) -> None:
        super().__init__(name, description=description)
        self.realm = realm
        self._scopes = {u: frozenset(s) for u, s in (scopes or {}).items()}
        self._verify: Verifier | None = users if callable(users) else None
        self._users: dict[str, str] = {} if callable(users) else dict(users)
        for user, stored in self._users.items():
            if not stored.startswith("scrypt$"):
                raise ValueError(
                    f"HTTPBasic {name!r}: the password of {user!r} must be a hash_password() hash, not the password"
                )
        self._cache_seconds = cache_seconds
        self._cache: OrderedDict[bytes, tuple[float, str]] = OrderedDict()
        self._cache_key = secrets.token_bytes(32)
        self._slots = asyncio.Semaphore(concurrency)

    def card(self) -> dict[str, Any]:
        return self._entry(scheme="basic")

    def challenge(self) -> str:
        return f'Basic realm="{self.realm}", charset="UTF-8"'

    async def authenticate(self, presented: Presented) -> Principal | None:
        encoded = presented.authorization("basic")
        if encoded is None:
            return None
        try:
            pair = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (ValueError, binascii.Error):
            raise self._refuse("The basic credentials are not base64 of user:password") from None
        user, sep, password = pair.partition(":")
        if not sep or len(password) > _MAX_PASSWORD:
            raise self._refuse("The basic credentials are not user:password")
        if self._verify is not None:
            verdict = self._verify(pair)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if verdict is None or verdict == "":
                raise self._refuse("The user name or password is not valid")
            return self._adopt(verdict)
        token = hmac.new(self._cache_key, pair.encode(), hashlib.sha256).digest()
        hit = self._cache.get(token)
        now = time.monotonic()
        if hit is not None and hit[0] > now:
            return self._principal(hit[1], self._scopes.get(hit[1], ()))
        stored = self._users.get(user)
        async with self._slots:
            ok = await asyncio.to_thread(_check_password, password, stored or _DUMMY_HASH)
        if not ok or stored is None:
            raise self._refuse("The user name or password is not valid")
        self._cache[token] = (now + self._cache_seconds, user)
        if len(self._cache) > 1024:
            self._cache.popitem(last=False)
        return self._principal(user, self._scopes.get(user, ()))


class MutualTLS(Scheme):
    """The client certificate of a mutual TLS connection that skillwire terminates (``skillwire serve
    --tls-cert ... --tls-client-ca ...``): its subject (RFC 4514, such as ``CN=alice,O=Example``) is the
    principal. The TLS handshake already checked the certificate against the client CA; ``subjects``
    (a collection, or a callable ``verify(subject) -> Principal | subject | None``) narrows who is let in."""

    kind = "mtlsSecurityScheme"

    def __init__(
        self,
        name: str = "mtls",
        *,
        subjects: Iterable[str] | Verifier | None = None,
        scopes: Mapping[str, Iterable[str]] | None = None,
        description: str = "",
    ) -> None:
        super().__init__(name, description=description)
        self._verify: Verifier | None = subjects if callable(subjects) else None
        self._subjects = None if subjects is None or callable(subjects) else frozenset(subjects)
        self._scopes = {s: frozenset(v) for s, v in (scopes or {}).items()}

    def card(self) -> dict[str, Any]:
        return self._entry()

    async def authenticate(self, presented: Presented) -> Principal | None:
        peer = presented.peer
        if peer is None:
            return None
        subject = peer.subject
        if self._verify is not None:
            verdict = self._verify(subject)
            if inspect.isawaitable(verdict):
                verdict = await verdict
            if verdict is None or verdict == "":
                raise self._refuse(f"The client certificate {subject!r} is not allowed")
            return self._adopt(verdict)
        elif self._subjects is not None and subject not in self._subjects:
            raise self._refuse(f"The client certificate {subject!r} is not allowed")
        return self._principal(subject, self._scopes.get(subject, ()))
