"""Bearer tokens: JWTs verified with the identity provider's keys (:class:`Bearer`, :class:`OAuth2`,
:class:`OpenIDConnect`), and opaque OAuth 2 tokens through RFC 7662 :class:`Introspection` or a verifier of
your own::

    from skillwire.security import OAuth2, Security

    Security(
        OAuth2(
            flows={"clientCredentials": {"tokenUrl": "https://idp.example/token", "scopes": {"read": "Read"}}},
            issuer="https://idp.example",          # its RFC 8414 metadata names the JWKS
            audience="https://agent.example",      # what the tokens' aud must name
        ),
        require=[{"oauth2": ["read"]}],
    )

A JWT is checked in this order, and refused (401, ``WWW-Authenticate: Bearer ..., error="invalid_token"``)
at the first failure: its size (``max_token_bytes``, before any parsing); its form (a compact JWS); its
``alg`` against the allowlist (``none`` is never accepted, and an HMAC algorithm only with a shared secret
given in code, so an RSA public key can never serve as an HMAC secret); the key its ``kid`` names, of the
type and curve ``alg`` needs; the signature; then ``exp`` (required), ``nbf`` and ``iat`` within ``leeway``
seconds of ``clock()``, ``iss`` and ``aud``, and ``required_claims``. The principal's subject is the
``subject_claim``, its scopes the union of the ``scope_claims`` (space-separated strings or lists), its
claims the verified claims.

``issuer`` and ``audience`` must be given whenever JWTs are verified: ``None`` turns a check off, on purpose.
When the IdP cannot be reached and no key held can verify a token, the answer is 503 with ``Retry-After``
(:class:`~skillwire.errors.ServerBusyError`): the token may well be good, and a 401 would send clients off
to fetch new tokens from an IdP that is down. Fetching and caching: :mod:`skillwire.security.jwks`; the
claims: :mod:`skillwire.security.claims`; introspection: :mod:`skillwire.security.introspection`.
"""

from __future__ import annotations

import enum
import hashlib
import inspect
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import msgspec

from skillwire.errors import ServerBusyError, UnauthenticatedError
from skillwire.security.claims import DEFAULT_ALGORITHMS, Audience, JWTRules, looks_like_jwt, scopes_of
from skillwire.security.introspection import Introspection
from skillwire.security.jwks import (
    Clock,
    Discovery,
    Documents,
    FixedURL,
    IdPUnavailable,
    KeyCache,
    Keys,
    RemoteKeys,
    StaticKeys,
    TokenRejected,
)
from skillwire.security.principal import Principal
from skillwire.security.schemes import Presented, Scheme, Verifier

if TYPE_CHECKING:
    import httpx

__all__ = ["Bearer", "OAuth2", "OpenIDConnect"]


class _Unset(enum.Enum):
    UNSET = "unset"


_UNSET = _Unset.UNSET


#: How long a verified JWT is remembered (never past its ``exp``): a key taken out of a JWKS stops
#: verifying the tokens it signed within this time.
VERIFIED_SECONDS = 60.0
#: At most this many verified tokens are remembered (the oldest go first).
VERIFIED_ENTRIES = 4096


def _quoted(text: str, limit: int = 200) -> str:
    """``text`` as the inside of an RFC 6750 quoted string (its allowed characters only)."""
    return "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in text[:limit])


# -- the schemes ---------------------------------------------------------------------------------------------


class _TokenScheme(Scheme):
    """What the bearer-token schemes share: the RFC 6750 challenge, the JWT path, the principal."""

    _rules: JWTRules
    _keys: Keys | None = None

    def __init__(
        self,
        name: str,
        *,
        subject_claim: str,
        scope_claims: Iterable[str],
        realm: str,
        description: str,
    ) -> None:
        super().__init__(name, description=description)
        self.subject_claim = subject_claim
        self.scope_claims = tuple(scope_claims)
        self.realm = realm
        #: verified tokens: SHA-256 -> (until when, the principal), oldest first
        self._verified: dict[bytes, tuple[float, Principal]] = {}

    def challenge(self) -> str:
        return f'Bearer realm="{_quoted(self.realm)}"'

    def _refuse(self, why: str) -> UnauthenticatedError:
        error = super()._refuse(why)
        error.challenges = [f'{self.challenge()}, error="invalid_token", error_description="{_quoted(why)}"']
        return error

    def _busy(self, error: IdPUnavailable) -> ServerBusyError:
        return ServerBusyError(
            f"{error} (security scheme {self.name!r}): try again shortly",
            retry_after=error.retry_after,
            metadata={"scheme": self.name},
        )

    def _token(self, presented: Presented) -> str | None:
        token = presented.authorization("bearer")
        if token is not None:
            try:
                self._rules.check_size(token)
            except TokenRejected as error:
                raise self._refuse(str(error)) from None
        return token

    async def _verify_jwt(self, token: str) -> Principal:
        assert self._keys is not None
        # A client sends the same token on every call until it expires: its verification (decoding, the
        # signature, the claims: about 200 µs, measured in docs/performance.md) is done once and remembered,
        # by the token's SHA-256, for at most VERIFIED_SECONDS and never past its exp (plus the leeway).
        digest = hashlib.sha256(token.encode()).digest()
        now = self._rules.clock()
        hit = self._verified.get(digest)
        if hit is not None:
            if hit[0] > now:
                return hit[1]
            del self._verified[digest]
        try:
            claims = await self._rules.verify(token, self._keys)
        except TokenRejected as error:
            raise self._refuse(str(error)) from None
        except IdPUnavailable as error:
            raise self._busy(error) from None
        principal = self._from_claims(claims, (self.subject_claim,))
        expires = claims.get("exp")
        if isinstance(expires, int | float) and not isinstance(expires, bool):
            until = min(float(expires) + self._rules.leeway, now + VERIFIED_SECONDS)
            if len(self._verified) >= VERIFIED_ENTRIES:
                self._verified.pop(next(iter(self._verified)))  # the oldest
            self._verified[digest] = (until, principal)
        return principal

    def _from_claims(self, claims: Mapping[str, Any], subject_claims: Sequence[str]) -> Principal:
        for claim in subject_claims:
            subject = claims.get(claim)
            if isinstance(subject, str) and subject:
                return self._principal(subject, scopes_of(claims, self.scope_claims), claims)
        raise self._refuse(f"The token names no subject ({', '.join(subject_claims)})")

    async def close(self) -> None:
        if self._keys is not None:
            await self._keys.close()


def _carrying(principal: Principal, token: str) -> Principal:
    """``principal`` with the token it was verified from, for a skill to pass on (``Principal.credential``)."""
    return (
        principal if principal.credential == token else msgspec.structs.replace(principal, credential=token)
    )


def _remote_keys(
    where: FixedURL | Discovery, cache: KeyCache | None, http: httpx.AsyncClient | None, clock: Clock
) -> RemoteKeys:
    return RemoteKeys(where, Documents(cache or KeyCache(), http), clock)


def _required(value: Any, what: str, name: str) -> Any:
    if value is _UNSET:
        raise ValueError(
            f"security scheme {name!r}: give {what}= (the value the tokens must carry), "
            f"or {what}=None to accept any"
        )
    return value


class Bearer(_TokenScheme):
    """HTTP bearer authentication with JWTs, verified with keys given in code (``keys=``: a JWK or JWKS dict,
    PEM text, a joserfc key or KeySet) or fetched from a JWKS URL (``jwks_url=``)::

        Bearer(jwks_url="https://idp.example/jwks.json", issuer="https://idp.example", audience="my-agent")

    See the module's docstring for the checks, :class:`~skillwire.security.jwks.KeyCache` (``cache=``) for
    fetching. ``http`` is an httpx.AsyncClient to fetch with (left open); ``clock`` the time in seconds."""

    kind = "httpAuthSecurityScheme"

    def __init__(
        self,
        name: str = "bearer",
        *,
        keys: Any = None,
        jwks_url: str | None = None,
        issuer: str | _Unset | None = _UNSET,
        audience: Audience | _Unset = _UNSET,
        algorithms: Iterable[str] = DEFAULT_ALGORITHMS,
        leeway: float = 60,
        subject_claim: str = "sub",
        scope_claims: Iterable[str] = ("scope", "scp"),
        required_claims: Iterable[str] = (),
        max_token_bytes: int = 16 * 1024,
        cache: KeyCache | None = None,
        http: httpx.AsyncClient | None = None,
        clock: Clock = time.time,
        realm: str = "skillwire",
        description: str = "",
    ) -> None:
        super().__init__(
            name, subject_claim=subject_claim, scope_claims=scope_claims, realm=realm, description=description
        )
        if (keys is None) == (jwks_url is None):
            raise ValueError(f"Bearer {name!r}: give keys= or jwks_url=, one of them")
        self._rules = JWTRules(
            algorithms=algorithms,
            shared_secrets=keys is not None,
            issuer=_required(issuer, "issuer", name),
            issuer_from_keys=False,
            audience=_required(audience, "audience", name),
            leeway=leeway,
            required_claims=required_claims,
            max_token_bytes=max_token_bytes,
            clock=clock,
        )
        self._keys = (
            StaticKeys(keys) if jwks_url is None else _remote_keys(FixedURL(jwks_url), cache, http, clock)
        )

    def card(self) -> dict[str, Any]:
        return self._entry(scheme="bearer", bearerFormat="JWT")

    async def authenticate(self, presented: Presented) -> Principal | None:
        token = self._token(presented)
        return None if token is None else _carrying(await self._verify_jwt(token), token)


# -- OAuth 2 --------------------------------------------------------------------------------------------------

#: Each flow the card may show (the OAuthFlows oneof, ProtoJSON names): its required and optional fields.
_FLOWS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "authorizationCode": (
        frozenset({"authorizationUrl", "tokenUrl", "scopes"}),
        frozenset({"refreshUrl", "pkceRequired"}),
    ),
    "clientCredentials": (frozenset({"tokenUrl", "scopes"}), frozenset({"refreshUrl"})),
    "deviceCode": (frozenset({"deviceAuthorizationUrl", "tokenUrl", "scopes"}), frozenset({"refreshUrl"})),
}


def _check_flows(flows: Mapping[str, Any], name: str) -> dict[str, Any]:
    where = f"OAuth2 {name!r} flows"
    if len(flows) != 1:
        raise ValueError(
            f"{where}: name exactly one flow (the card's OAuthFlows is a oneof): {', '.join(_FLOWS)}"
        )
    [(flow, fields)] = flows.items()
    if flow not in _FLOWS:
        raise ValueError(
            f"{where}: {flow!r} is not one of {', '.join(_FLOWS)} (implicit and password are deprecated)"
        )
    required, optional = _FLOWS[flow]
    if not isinstance(fields, Mapping):
        raise ValueError(f"{where}: {flow} must be a mapping of its fields")
    missing, unknown = required - set(fields), set(fields) - required - optional
    if missing or unknown:
        raise ValueError(
            f"{where}: {flow} lacks {sorted(missing)} / has unknown {sorted(unknown)} (camelCase names)"
        )
    scopes = fields["scopes"]
    if not isinstance(scopes, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in scopes.items()
    ):
        raise ValueError(f"{where}: scopes must map each scope to its description")
    return {flow: {**fields, "scopes": dict(scopes)}}


def authorization_server_metadata_url(issuer: str) -> str:
    """RFC 8414 section 3: the well-known path goes between the issuer's host and its path."""
    parts = urlsplit(issuer)
    path = "/.well-known/oauth-authorization-server" + parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


class OAuth2(_TokenScheme):
    """OAuth 2 access tokens. ``flows`` is what the card shows clients (one flow, ProtoJSON names)::

        OAuth2(
            flows={"clientCredentials": {"tokenUrl": "https://idp.example/token", "scopes": {"read": "Read"}}},
            issuer="https://idp.example", audience="https://agent.example",
        )

    JWT access tokens are verified with the keys of the authorization server's metadata (RFC 8414: derived
    from ``issuer``, or ``metadata_url``, whose ``jwks_uri`` is fetched and cached as :class:`Bearer`'s),
    their ``iss`` against the metadata's issuer. Opaque tokens go to ``introspection`` (an
    :class:`Introspection`) or to ``verifier``, a callable (sync or async) ``verify(token) -> Principal |
    subject | None``. With both a JWT path and an opaque one, a token in JWS form takes the JWT path."""

    kind = "oauth2SecurityScheme"

    def __init__(
        self,
        name: str = "oauth2",
        *,
        flows: Mapping[str, Any],
        issuer: str | None = None,
        metadata_url: str | None = None,
        audience: Audience | _Unset = _UNSET,
        introspection: Introspection | None = None,
        verifier: Verifier | None = None,
        algorithms: Iterable[str] = DEFAULT_ALGORITHMS,
        leeway: float = 60,
        subject_claim: str = "sub",
        scope_claims: Iterable[str] = ("scope", "scp"),
        required_claims: Iterable[str] = (),
        max_token_bytes: int = 16 * 1024,
        cache: KeyCache | None = None,
        http: httpx.AsyncClient | None = None,
        clock: Clock = time.time,
        realm: str = "skillwire",
        description: str = "",
    ) -> None:
        super().__init__(
            name, subject_claim=subject_claim, scope_claims=scope_claims, realm=realm, description=description
        )
        self.flows = _check_flows(flows, name)
        if introspection is not None and verifier is not None:
            raise ValueError(f"OAuth2 {name!r}: give introspection= or verifier=, not both")
        self.metadata_url = metadata_url or (authorization_server_metadata_url(issuer) if issuer else None)
        jwt = self.metadata_url is not None
        if not jwt and introspection is None and verifier is None:
            raise ValueError(
                f"OAuth2 {name!r}: give issuer= or metadata_url= (JWTs), introspection= or verifier="
            )
        self.introspection = introspection
        self._verifier = verifier
        self._rules = JWTRules(
            algorithms=algorithms,
            shared_secrets=False,
            issuer=None,
            issuer_from_keys=True,
            audience=_required(audience, "audience", name) if jwt else None,
            leeway=leeway,
            required_claims=required_claims,
            max_token_bytes=max_token_bytes,
            clock=clock,
        )
        if self.metadata_url is not None:
            self._keys = _remote_keys(Discovery(self.metadata_url, issuer), cache, http, clock)

    def card(self) -> dict[str, Any]:
        return self._entry(flows=self.flows, oauth2MetadataUrl=self.metadata_url)

    async def authenticate(self, presented: Presented) -> Principal | None:
        token = self._token(presented)
        if token is None:
            return None
        return _carrying(await self._opaque_or_jwt(token), token)

    async def _opaque_or_jwt(self, token: str) -> Principal:
        opaque = self.introspection is not None or self._verifier is not None
        if self._keys is not None and (not opaque or looks_like_jwt(token)):
            return await self._verify_jwt(token)
        if self.introspection is not None:
            try:
                claims = await self.introspection.introspect(token)
            except TokenRejected as error:
                raise self._refuse(str(error)) from None
            except IdPUnavailable as error:
                raise self._busy(error) from None
            return self._from_claims(claims, (self.subject_claim, "username", "client_id"))
        if self._verifier is not None:
            return await self._verdict(self._verifier, token)
        raise self._refuse("The token is not a JWT")

    async def _verdict(self, verifier: Verifier, token: str) -> Principal:
        verdict = verifier(token)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if verdict is None or verdict == "":
            raise self._refuse("The token is not valid")
        if isinstance(verdict, Principal):
            if verdict.scheme == self.name:
                return verdict
            return self._principal(verdict.subject, verdict.scopes, verdict.claims)
        return self._principal(verdict)

    async def close(self) -> None:
        await super().close()
        if self.introspection is not None:
            await self.introspection.close()


class OpenIDConnect(_TokenScheme):
    """OpenID Connect: JWTs (access or ID tokens) verified with the keys of the provider's discovery document
    (``issuer`` + ``/.well-known/openid-configuration``, or ``discovery_url``), whose issuer the tokens'
    ``iss`` must equal (and which must equal ``issuer`` when both are given)::

        OpenIDConnect(issuer="https://accounts.example", audience="my-agent-client-id")
    """

    kind = "openIdConnectSecurityScheme"

    def __init__(
        self,
        name: str = "oidc",
        *,
        issuer: str | None = None,
        discovery_url: str | None = None,
        audience: Audience | _Unset = _UNSET,
        algorithms: Iterable[str] = DEFAULT_ALGORITHMS,
        leeway: float = 60,
        subject_claim: str = "sub",
        scope_claims: Iterable[str] = ("scope", "scp"),
        required_claims: Iterable[str] = (),
        max_token_bytes: int = 16 * 1024,
        cache: KeyCache | None = None,
        http: httpx.AsyncClient | None = None,
        clock: Clock = time.time,
        realm: str = "skillwire",
        description: str = "",
    ) -> None:
        super().__init__(
            name, subject_claim=subject_claim, scope_claims=scope_claims, realm=realm, description=description
        )
        if issuer is None and discovery_url is None:
            raise ValueError(f"OpenIDConnect {name!r}: give issuer= or discovery_url=")
        self.discovery_url = discovery_url or f"{(issuer or '').rstrip('/')}/.well-known/openid-configuration"
        self._rules = JWTRules(
            algorithms=algorithms,
            shared_secrets=False,
            issuer=None,
            issuer_from_keys=True,
            audience=_required(audience, "audience", name),
            leeway=leeway,
            required_claims=required_claims,
            max_token_bytes=max_token_bytes,
            clock=clock,
        )
        self._keys = _remote_keys(Discovery(self.discovery_url, issuer), cache, http, clock)

    def card(self) -> dict[str, Any]:
        return self._entry(openIdConnectUrl=self.discovery_url)

    async def authenticate(self, presented: Presented) -> Principal | None:
        token = self._token(presented)
        return None if token is None else _carrying(await self._verify_jwt(token), token)
