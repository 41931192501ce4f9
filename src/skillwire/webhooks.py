"""Signed push-notification deliveries: the sender's signing keys, and the receiver's verifier.

Each webhook delivery carries a JWT (a compact JWS, header ``alg``, ``kid``, ``typ: "JWT"``) in the
:data:`HEADER` header, ``A2A-Notification-Signature``. ``Authorization`` is left to the credentials the push
config's ``authentication`` names, and ``X-A2A-Notification-Token`` to its ``token`` (A2A spec, section 10).
Its claims:

========================  ==============================================================================
``iss``                   the agent that sent it
``aud``                   the webhook URL it was sent to
``iat``, ``exp``          when it was signed, and ``lifetime`` seconds later
``jti``                   random, once per delivery: a receiver refuses one it has seen (replay)
``body_sha256``           base64url (no padding) of the SHA-256 of the exact body bytes (:data:`BODY_CLAIM`)
========================  ==============================================================================

The public keys are a JWKS (:meth:`WebhookSigner.public_jwks`). Receiving, in a Starlette (or FastAPI)
endpoint::

    verifier = WebhookVerifier("https://agent.example/.well-known/webhook-jwks.json",
                               issuer="https://agent.example", audience="https://me.example/hook")

    async def hook(request):
        try:
            delivery = await verifier.verify_request(request)
        except WebhookVerificationError as error:
            return PlainTextResponse(str(error), status_code=error.status)
        event = json.loads(delivery.body)  # the StreamResponse, as verified
        return Response(status_code=204)

JWS and keys are joserfc's, imported on first use; the token rules, the key sets and JWKS fetching are those
of the bearer-token schemes (:mod:`skillwire.security`).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import inspect
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from skillwire.errors import WebhookVerificationError
from skillwire.security.claims import DEFAULT_ALGORITHMS, JWTRules
from skillwire.security.jwks import (
    Clock,
    Documents,
    FixedURL,
    IdPUnavailable,
    KeyCache,
    Keys,
    RemoteKeys,
    StaticKeys,
    TokenRejected,
)

if TYPE_CHECKING:
    import httpx
    from joserfc.jwk import Key

__all__ = [
    "BODY_CLAIM",
    "HEADER",
    "MemoryReplayCache",
    "WebhookClaims",
    "WebhookKeys",
    "WebhookSigner",
    "WebhookVerificationError",
    "WebhookVerifier",
    "generate_key",
    "load_or_create",
]

#: The header a delivery's signed token travels in.
HEADER = "A2A-Notification-Signature"
#: The claim holding base64url(SHA-256(body)).
BODY_CLAIM = "body_sha256"
#: How long a rotated-out key stays published unless ``grace=`` says otherwise (seconds).
DEFAULT_GRACE = 3600.0


def body_digest(body: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode("ascii")


# -- keys ----------------------------------------------------------------------------------------------------


def _private_key(value: Any) -> Key:
    from joserfc.jwk import ECKey, OKPKey, RSAKey, import_key

    if isinstance(value, (ECKey, RSAKey, OKPKey)):
        key: Key = value
    elif isinstance(value, Mapping):
        key = import_key(dict(value))
    elif isinstance(value, (str, bytes)):
        key = _pem_key(value.encode() if isinstance(value, str) else value)
    else:
        raise TypeError(
            f"a webhook signing key is a joserfc key, a JWK dict or a PEM, not {type(value).__name__}"
        )
    if not key.is_private:
        raise ValueError("a webhook signer needs the private key (this is a public one)")
    return key


def _pem_key(data: bytes) -> Key:
    from joserfc.errors import JoseError
    from joserfc.jwk import import_key

    for kty in ("EC", "RSA", "OKP"):
        try:
            return import_key(data, kty)
        except (JoseError, ValueError, TypeError):
            continue
    raise ValueError("the PEM is not an EC, RSA or OKP private key")


def generate_key(path: str | Path) -> Key:
    """A new EC P-256 private key, written to ``path`` as PEM, readable by its owner only (mode 0600).
    Fails (FileExistsError) when ``path`` exists: a key is never overwritten."""
    from joserfc.jwk import ECKey

    key = ECKey.generate_key("P-256", private=True)
    pem = key.as_pem(private=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(pem)
    return key


def new_key_pem() -> bytes:
    """A new EC P-256 private key as PEM (what :func:`generate_key` writes)."""
    from joserfc.jwk import ECKey

    return ECKey.generate_key("P-256", private=True).as_pem(private=True)


def load_or_create(path: str | Path) -> Key:
    """The key in ``path`` (a PEM or a JWK in JSON), made by :func:`generate_key` the first time."""
    target = Path(path)
    try:
        return generate_key(target)
    except FileExistsError:
        data = target.read_bytes()
        return _private_key(_json(data) if data.lstrip().startswith(b"{") else data)


def _json(data: bytes) -> Any:
    import json

    return json.loads(data)


@dataclass(frozen=True)
class _Published:
    key: Key
    kid: str
    alg: str
    #: until when a rotated-out key stays in the JWKS (``inf`` for the current key)
    until: float = float("inf")

    def jwk(self) -> dict[str, Any]:
        jwk = dict(self.key.as_dict(private=False))
        jwk.update(kid=self.kid, alg=self.alg, use="sig")
        return jwk


class WebhookKeys:
    """The signing key in use and the keys rotated out of use, each published until its grace period ends::

    keys = WebhookKeys(load_or_create("webhook-key.pem"))
    keys.rotate(new_key, grace=3600)   # tokens signed with the old key still verify for an hour

    ``kid`` defaults to the key's RFC 7638 thumbprint; ``clock`` is the time in seconds."""

    def __init__(self, key: Any, *, kid: str | None = None, alg: str = "ES256", clock: Clock = time.time):
        self.clock = clock
        self.current = self._published(key, kid, alg)
        self._previous: list[_Published] = []

    @staticmethod
    def _published(key: Any, kid: str | None, alg: str) -> _Published:
        if alg not in DEFAULT_ALGORITHMS:
            raise ValueError(
                f"webhook signing algorithm {alg!r}: expected one of {', '.join(DEFAULT_ALGORITHMS)}"
            )
        imported = _private_key(key)
        return _Published(imported, kid or imported.kid or imported.thumbprint(), alg)

    def rotate(
        self, key: Any, *, kid: str | None = None, alg: str | None = None, grace: float = DEFAULT_GRACE
    ) -> None:
        """Sign with ``key`` from now on; the key used so far stays published for ``grace`` seconds (give at
        least the tokens' lifetime plus the receivers' leeway, so deliveries in flight still verify)."""
        new = self._published(key, kid, alg or self.current.alg)
        old = self.current
        self._previous.append(_Published(old.key, old.kid, old.alg, self.clock() + grace))
        self.current = new

    def published(self) -> list[_Published]:
        now = self.clock()
        self._previous = [entry for entry in self._previous if entry.until > now]
        return [self.current, *self._previous]

    def public_jwks(self) -> dict[str, Any]:
        """The JWKS to publish: the current key and those still in their grace period."""
        return {"keys": [entry.jwk() for entry in self.published()]}


class WebhookSigner:
    """Signs webhook deliveries (see the module's docstring for the token)::

    signer = WebhookSigner(load_or_create(path), issuer="https://agent.example")
    headers = {HEADER: signer.sign(body, audience=config.url)}

    ``key`` is a private key (joserfc key, JWK dict or PEM; ``kid`` and ``alg`` as for :class:`WebhookKeys`)
    or a :class:`WebhookKeys`, which then holds them."""

    def __init__(
        self,
        key: Any,
        *,
        kid: str | None = None,
        alg: str = "ES256",
        issuer: str,
        lifetime: int = 300,
        clock: Clock = time.time,
    ) -> None:
        if lifetime <= 0:
            raise ValueError("lifetime must be positive (seconds)")
        self.keys = key if isinstance(key, WebhookKeys) else WebhookKeys(key, kid=kid, alg=alg, clock=clock)
        self.issuer = issuer
        self.lifetime = int(lifetime)
        self.clock = clock

    def sign(self, body: bytes, audience: str, *, issuer: str | None = None) -> str:
        """The token for delivering ``body`` (the exact bytes posted) to the webhook URL ``audience``
        (``issuer``: another ``iss`` than the signer's, as when one agent is reached at several URLs)."""
        from joserfc import jwt

        current = self.keys.current
        now = int(self.clock())
        claims = {
            "iss": issuer or self.issuer,
            "aud": audience,
            "iat": now,
            "exp": now + self.lifetime,
            "jti": secrets.token_urlsafe(18),
            BODY_CLAIM: body_digest(body),
        }
        header = {"alg": current.alg, "kid": current.kid, "typ": "JWT"}
        return jwt.encode(header, claims, current.key, algorithms=[current.alg])

    def public_jwks(self) -> dict[str, Any]:
        return self.keys.public_jwks()

    def rotate(self, key: Any, *, kid: str | None = None, grace: float = DEFAULT_GRACE) -> None:
        self.keys.rotate(key, kid=kid, grace=grace)


# -- verifying -----------------------------------------------------------------------------------------------

#: ``seen(jti, until)``: remember ``jti`` until ``until`` (seconds) and say whether it was remembered already.
#: One atomic step (Redis ``SET jti 1 NX EXAT until``, answered "not set"), so two receivers sharing the store
#: cannot both accept one token.
Seen = Callable[[str, float], "bool | Awaitable[bool]"]


class MemoryReplayCache:
    """The ``jti`` values seen in this process, each until its token could no longer be accepted anyway. At
    most ``max_entries``: when that many are live, deliveries are refused (fail closed) rather than an entry
    forgotten early."""

    def __init__(self, max_entries: int = 100_000, *, clock: Clock = time.time) -> None:
        self.max_entries = max_entries
        self.clock = clock
        self._until: dict[str, float] = {}

    def __call__(self, jti: str, until: float) -> bool:
        now = self.clock()
        if jti in self._until and self._until[jti] > now:
            return True
        if len(self._until) >= self.max_entries:
            self._until = {k: v for k, v in self._until.items() if v > now}
            if len(self._until) >= self.max_entries:
                raise WebhookVerificationError(
                    "Too many deliveries within the replay window", status=503, retry_after=1
                )
        self._until[jti] = until
        return False


@dataclass(frozen=True, kw_only=True)
class WebhookClaims:
    """A delivery that verified: its claims, and ``body``, the exact bytes they were verified against."""

    issuer: str
    audience: str | list[str]
    issued_at: int
    expires_at: int
    jti: str
    kid: str | None
    body: bytes = field(repr=False)
    claims: dict[str, Any] = field(repr=False)


class _Request(Protocol):
    """What :meth:`WebhookVerifier.verify_request` needs of a request (Starlette's and FastAPI's have it)."""

    @property
    def headers(self) -> Mapping[str, str]: ...

    def stream(self) -> AsyncIterator[bytes]: ...


class WebhookVerifier:
    """Checks a delivery's token: its size and form; ``alg`` against ``algorithms`` (asymmetric only; never
    ``none`` or HMAC); the key its ``kid`` names in ``jwks`` (a JWKS dict, a joserfc KeySet, or the URL of
    a JWKS, fetched and cached as :class:`~skillwire.security.KeyCache` says, again on an unknown ``kid``);
    the signature; ``exp``, ``iat`` (within ``leeway`` seconds), ``iss``, ``aud``; the body's size
    (``max_body_bytes``) and SHA-256; that ``iat`` is within ``replay_window`` seconds; and last that its
    ``jti`` was not seen before (``seen``: a :class:`MemoryReplayCache` by default, see :data:`Seen` for a
    shared store). Any failure raises :class:`WebhookVerificationError`."""

    def __init__(
        self,
        jwks: Any,
        *,
        issuer: str,
        audience: str,
        algorithms: tuple[str, ...] = DEFAULT_ALGORITHMS,
        leeway: float = 60,
        replay_window: float = 600,
        max_body_bytes: int = 4 * 1024 * 1024,
        max_token_bytes: int = 16 * 1024,
        seen: Seen | None = None,
        header: str = HEADER,
        cache: KeyCache | None = None,
        http: httpx.AsyncClient | None = None,
        clock: Clock = time.time,
    ) -> None:
        self._rules = JWTRules(
            algorithms=algorithms,
            shared_secrets=False,
            issuer=issuer,
            issuer_from_keys=False,
            audience=audience,
            leeway=leeway,
            required_claims=("iat", "jti", BODY_CLAIM),
            max_token_bytes=max_token_bytes,
            clock=clock,
        )
        self._keys: Keys = (
            RemoteKeys(FixedURL(jwks), Documents(cache or KeyCache(), http), clock)
            if isinstance(jwks, str)
            else StaticKeys(jwks)
        )
        self.leeway = leeway
        self.replay_window = replay_window
        self.max_body_bytes = max_body_bytes
        self.header = header
        self.seen: Seen = seen or MemoryReplayCache(clock=clock)
        self.clock = clock

    async def verify(self, body: bytes, headers: Mapping[str, str]) -> WebhookClaims:
        """The claims of the delivery of ``body`` with these request headers (looked up case-insensitively)."""
        if len(body) > self.max_body_bytes:
            raise WebhookVerificationError(f"The body is larger than {self.max_body_bytes} bytes", status=413)
        token = _header(headers, self.header)
        if token is None:
            raise WebhookVerificationError(f"The delivery carries no {self.header} header")
        try:
            claims = await self._rules.verify(token.strip(), self._keys)
        except TokenRejected as error:
            raise WebhookVerificationError(str(error)) from None
        except IdPUnavailable as error:
            raise WebhookVerificationError(str(error), status=503, retry_after=error.retry_after) from None
        return await self._check(body, claims, token)

    async def _check(self, body: bytes, claims: dict[str, Any], token: str) -> WebhookClaims:
        digest, jti, iat, exp = claims[BODY_CLAIM], claims["jti"], claims["iat"], claims["exp"]
        if not isinstance(digest, str) or not hmac.compare_digest(
            digest.encode(), body_digest(body).encode()
        ):
            raise WebhookVerificationError(f"The body does not match the token's {BODY_CLAIM}")
        if not isinstance(jti, str) or not jti or len(jti) > 256:
            raise WebhookVerificationError("The token's jti is not a string of 1 to 256 characters")
        # joserfc has checked that iat and exp are numbers, iat not in the future and exp not past.
        until = min(exp, iat + self.replay_window) + self.leeway
        if until <= self.clock():
            raise WebhookVerificationError(f"The token was issued more than {self.replay_window:g} s ago")
        answer = self.seen(jti, until)
        if await answer if inspect.isawaitable(answer) else answer:
            raise WebhookVerificationError("The delivery was seen before (replayed jti)")
        return WebhookClaims(
            issuer=claims["iss"],
            audience=claims["aud"],
            issued_at=int(iat),
            expires_at=int(exp),
            jti=jti,
            kid=_kid(token),
            body=body,
            claims=claims,
        )

    async def verify_request(self, request: _Request) -> WebhookClaims:
        """:meth:`verify` for a Starlette or FastAPI request: reads its body (at most ``max_body_bytes``)."""
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > self.max_body_bytes:
                raise WebhookVerificationError(
                    f"The body is larger than {self.max_body_bytes} bytes", status=413
                )
        return await self.verify(bytes(body), request.headers)

    async def close(self) -> None:
        await self._keys.close()


def _header(headers: Mapping[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None:
        return value
    wanted = name.lower()
    return next((v for k, v in headers.items() if k.lower() == wanted), None)


def _kid(token: str) -> str | None:
    import json

    head = token.partition(".")[0]
    header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    kid = header.get("kid")
    return kid if isinstance(kid, str) else None
