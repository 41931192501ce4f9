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
to fetch new tokens from an IdP that is down. Fetching and caching: :mod:`skillwire.security.jwks`.
"""

from __future__ import annotations

import base64
import enum
import hashlib
import inspect
import json
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote_plus, urlsplit, urlunsplit

from skillwire.errors import ServerBusyError, UnauthenticatedError
from skillwire.security.jwks import (
    ALGORITHMS,
    Clock,
    Discovery,
    Documents,
    FetchError,
    FixedURL,
    IdPUnavailable,
    KeyCache,
    Keys,
    RemoteKeys,
    StaticKeys,
    TokenRejected,
    log,
)
from skillwire.security.principal import Principal
from skillwire.security.schemes import Presented, Scheme, Verifier

if TYPE_CHECKING:
    import httpx
    from joserfc.jws import JWSRegistry
    from joserfc.jwt import ClaimsOption

__all__ = ["DEFAULT_ALGORITHMS", "Bearer", "Introspection", "OAuth2", "OpenIDConnect"]

#: The asymmetric algorithms accepted unless ``algorithms=`` says otherwise.
DEFAULT_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "Ed25519",
)


class _Unset(enum.Enum):
    UNSET = "unset"


_UNSET = _Unset.UNSET
_MAX_KID = 256
Audience = str | Sequence[str] | None


def _quoted(text: str, limit: int = 200) -> str:
    """``text`` as the inside of an RFC 6750 quoted string (its allowed characters only)."""
    return "".join(c if " " <= c <= "~" and c not in '"\\' else "?" for c in text[:limit])


def _audiences(audience: Audience) -> tuple[str, ...]:
    if audience is None:
        return ()
    found = (audience,) if isinstance(audience, str) else tuple(audience)
    if not found or not all(isinstance(a, str) and a for a in found):
        raise ValueError("audience must be a non-empty string or a list of them (or None: any audience)")
    return found


def scopes_of(claims: Mapping[str, Any], names: Iterable[str]) -> set[str]:
    """The scopes of ``claims``: each named claim, a space-separated string (``scope``) or a list (``scp``)."""
    found: set[str] = set()
    for name in names:
        value = claims.get(name)
        if isinstance(value, str):
            found.update(value.split())
        elif isinstance(value, list):
            found.update(v for v in value if isinstance(v, str) and v)
    return found


def looks_like_jwt(token: str) -> bool:
    """Whether ``token`` has a JWS's form: three segments, the first a JSON object naming an ``alg``."""
    head, dot, _ = token.partition(".")
    if not dot or token.count(".") != 2 or len(head) > 4096:
        return False
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, RecursionError):  # binascii.Error is a ValueError
        return False
    return isinstance(header, dict) and "alg" in header


# -- the JWT rules -----------------------------------------------------------------------------------------


class _Rules:
    """What one scheme checks in a JWT (see the module's docstring for the order)."""

    def __init__(
        self,
        *,
        algorithms: Iterable[str],
        shared_secrets: bool,
        issuer: str | None,
        issuer_from_keys: bool,
        audience: Audience,
        leeway: float,
        required_claims: Iterable[str],
        max_token_bytes: int,
        clock: Clock,
    ) -> None:
        self.algorithms = tuple(dict.fromkeys(algorithms))
        if not self.algorithms:
            raise ValueError("algorithms: at least one is needed")
        for alg in self.algorithms:
            if alg.lower() == "none":
                raise ValueError("algorithms: 'none' (an unsigned token) is never accepted")
            if alg not in ALGORITHMS:
                raise ValueError(
                    f"algorithms: {alg!r} is not a JWS signature algorithm ({', '.join(ALGORITHMS)})"
                )
            if alg.startswith("HS") and not shared_secrets:
                raise ValueError(
                    f"algorithms: {alg} needs a shared secret given in code (keys=OctKey...), "
                    "never keys fetched from an identity provider"
                )
        self.issuer = issuer
        self.issuer_from_keys = issuer_from_keys
        self.audience = _audiences(audience)
        self.leeway = int(leeway)
        self.required = tuple(required_claims)
        self.max_token_bytes = max_token_bytes
        self.clock = clock
        self._registry: JWSRegistry | None = None

    def registry(self) -> JWSRegistry:
        if self._registry is None:
            from joserfc.jws import JWSRegistry

            registry = JWSRegistry(algorithms=list(self.algorithms), strict_check_header=False)
            # The token is already within max_token_bytes; a header may carry a certificate chain (x5c).
            registry.max_header_length = registry.max_payload_length = self.max_token_bytes
            self._registry = registry
        return self._registry

    def check_size(self, token: str) -> None:
        if not token:
            raise TokenRejected("The bearer token is empty")
        if len(token) > self.max_token_bytes:
            raise TokenRejected(f"The token is longer than {self.max_token_bytes} bytes")

    async def verify(self, token: str, keys: Keys) -> dict[str, Any]:
        """The verified claims of ``token``; raises TokenRejected or IdPUnavailable."""
        from joserfc import jws
        from joserfc.errors import JoseError

        self.check_size(token)
        raw = token.encode("ascii", "replace")
        if raw.count(b".") != 2:
            raise TokenRejected("The token is not a JWT (a signed JWS in compact form)")
        registry = self.registry()
        try:
            signed = jws.extract_compact(raw, registry=registry)
        except (JoseError, ValueError, RecursionError):  # a header nested 10,000 deep is no header
            raise TokenRejected("The token is not a JWT: its header or payload does not decode") from None
        header = signed.headers()
        try:
            registry.check_header(header)
        except (JoseError, ValueError):
            raise TokenRejected(
                "The token's header is not accepted (crit, or a malformed parameter)"
            ) from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise TokenRejected(f"The token's algorithm {str(alg)[:20]!r} is not accepted")
        if kid is not None and (not isinstance(kid, str) or len(kid) > _MAX_KID):
            raise TokenRejected(f"The token's kid is not a string of at most {_MAX_KID} characters")
        key = await keys.find(kid or None, alg)
        try:
            verified = jws.validate_compact(signed, key, registry=registry)
        except (JoseError, ValueError):
            verified = False
        if not verified:
            raise TokenRejected("The token's signature does not verify")
        try:
            claims = json.loads(signed.payload)
        except (ValueError, RecursionError):
            raise TokenRejected("The token's payload is not JSON") from None
        if not isinstance(claims, dict):
            raise TokenRejected("The token's payload is not a JSON object")
        self.check_claims(claims, keys.issuer if self.issuer_from_keys else self.issuer)
        return claims

    def check_claims(self, claims: dict[str, Any], issuer: str | None) -> None:
        from joserfc.errors import ExpiredTokenError, InvalidClaimError, MissingClaimError
        from joserfc.jwt import JWTClaimsRegistry

        options: dict[str, ClaimsOption] = {"exp": {"essential": True}}
        options.update({name: {"essential": True} for name in self.required})
        if issuer is not None:
            options["iss"] = {"essential": True, "value": issuer}
        elif self.issuer_from_keys:
            raise TokenRejected("The identity provider's issuer is not known")
        if self.audience:
            options["aud"] = {"essential": True, "values": list(self.audience)}
        rules = JWTClaimsRegistry(now=lambda: int(self.clock()), leeway=self.leeway, **options)
        try:
            rules.validate(claims)
        except ExpiredTokenError:
            raise TokenRejected("The token has expired") from None
        except MissingClaimError as error:
            raise TokenRejected(f"The token lacks the claim {error.claim}") from None
        except InvalidClaimError as error:
            raise TokenRejected(
                _CLAIM_FAULTS.get(error.claim, f"The token's {error.claim} claim is not valid")
            ) from None


_CLAIM_FAULTS = {
    "nbf": "The token is not valid yet (nbf)",
    "iat": "The token was issued in the future (iat)",
    "iss": "The token's issuer (iss) is not accepted",
    "aud": "The token is not meant for this agent (aud)",
    "exp": "The token's expiry (exp) is not a date",
}


# -- the schemes ---------------------------------------------------------------------------------------------


class _TokenScheme(Scheme):
    """What the bearer-token schemes share: the RFC 6750 challenge, the JWT path, the principal."""

    _rules: _Rules
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
        try:
            claims = await self._rules.verify(token, self._keys)
        except TokenRejected as error:
            raise self._refuse(str(error)) from None
        except IdPUnavailable as error:
            raise self._busy(error) from None
        return self._from_claims(claims, (self.subject_claim,))

    def _from_claims(self, claims: Mapping[str, Any], subject_claims: Sequence[str]) -> Principal:
        for claim in subject_claims:
            subject = claims.get(claim)
            if isinstance(subject, str) and subject:
                return self._principal(subject, scopes_of(claims, self.scope_claims), claims)
        raise self._refuse(f"The token names no subject ({', '.join(subject_claims)})")

    async def close(self) -> None:
        if self._keys is not None:
            await self._keys.close()


def _remote_keys(where: FixedURL | Discovery, cache: KeyCache | None, http: Any, clock: Clock) -> RemoteKeys:
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
        self._rules = _Rules(
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
        return None if token is None else await self._verify_jwt(token)


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


class Introspection:
    """RFC 7662 token introspection, for opaque access tokens: ``POST url`` with ``token=...``, the client
    authenticated with HTTP basic (``client_auth="basic"``, RFC 6749 2.3.1) or in the form (``"post"``).

    The answer must say ``"active": true``; ``exp`` and ``nbf`` are honoured (within ``leeway``), ``iss`` must
    be ``issuer`` and ``aud`` name ``audience`` when those are given. An active answer is remembered for
    ``cache_seconds`` (never past its ``exp``), for at most ``cache_size`` tokens, keyed by the token's
    SHA-256, never the token. An endpoint that cannot be reached answers 503::

        OAuth2(flows=..., introspection=Introspection("https://idp.example/introspect", "agent", secret))
    """

    def __init__(
        self,
        url: str,
        client_id: str,
        client_secret: str,
        *,
        issuer: str | None = None,
        audience: Audience = None,
        client_auth: Literal["basic", "post"] = "basic",
        cache_seconds: float = 60.0,
        cache_size: int = 1024,
        leeway: float = 60,
        cache: KeyCache | None = None,
        http: httpx.AsyncClient | None = None,
        clock: Clock = time.time,
    ) -> None:
        if client_auth not in ("basic", "post"):
            raise ValueError(f"Introspection client_auth must be 'basic' or 'post', not {client_auth!r}")
        self.url = url
        self.issuer = issuer
        self.audience = _audiences(audience)
        self.client_auth = client_auth
        self._client = (client_id, client_secret)
        self.cache_seconds = cache_seconds
        self.cache_size = cache_size
        self.leeway = leeway
        self.clock = clock
        self.documents = Documents(cache or KeyCache(), http)
        #: How many introspection requests were made (for tests and metrics).
        self.requests = 0
        self._answers: OrderedDict[bytes, tuple[float, dict[str, Any]]] = OrderedDict()

    async def close(self) -> None:
        await self.documents.close()

    async def introspect(self, token: str) -> dict[str, Any]:
        """The claims of an active token; raises TokenRejected or IdPUnavailable."""
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        now = self.clock()
        hit = self._answers.get(digest)
        if hit is not None and hit[0] > now:
            self._answers.move_to_end(digest)
            return hit[1]
        self._answers.pop(digest, None)
        claims = await self._ask(token)
        self._check(claims, now)
        until = now + self.cache_seconds
        if isinstance(claims.get("exp"), (int, float)):
            until = min(until, float(claims["exp"]))
        if until > now and self.cache_size > 0:
            self._answers[digest] = (until, claims)
            while len(self._answers) > self.cache_size:
                self._answers.popitem(last=False)
        return claims

    async def _ask(self, token: str) -> dict[str, Any]:
        client_id, secret = self._client
        form = {"token": token, "token_type_hint": "access_token"}
        auth = None
        if self.client_auth == "basic":
            auth = (quote_plus(client_id), quote_plus(secret))
        else:
            form |= {"client_id": client_id, "client_secret": secret}
        self.requests += 1
        try:
            return await self.documents.post_form(self.url, form, auth)
        except FetchError as error:
            log.warning("Token introspection failed: %s", error)
            raise IdPUnavailable("The token introspection endpoint cannot be reached", 1) from None

    def _check(self, claims: Mapping[str, Any], now: float) -> None:
        if claims.get("active") is not True:
            raise TokenRejected("The token is not active")
        exp, nbf = claims.get("exp"), claims.get("nbf")
        for value in (exp, nbf):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise TokenRejected("The introspection answer's exp or nbf is not a date")
        if exp is not None and exp <= now - self.leeway:
            raise TokenRejected("The token has expired")
        if nbf is not None and nbf > now + self.leeway:
            raise TokenRejected("The token is not valid yet (nbf)")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise TokenRejected(_CLAIM_FAULTS["iss"])
        if self.audience:
            aud = claims.get("aud")
            named = {aud} if isinstance(aud, str) else set(aud) if isinstance(aud, list) else set()
            if not named & set(self.audience):
                raise TokenRejected(_CLAIM_FAULTS["aud"])


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
        self._rules = _Rules(
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
        self._rules = _Rules(
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
        return None if token is None else await self._verify_jwt(token)
