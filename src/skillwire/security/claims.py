"""The claims of a bearer token: the rules a JWT must pass (in the order :mod:`skillwire.security.tokens`
describes), and reading a principal's scopes from claims. joserfc is imported on first use."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from skillwire.security.jwks import ALGORITHMS, Clock, Keys, TokenRejected

if TYPE_CHECKING:
    from joserfc.jws import JWSRegistry
    from joserfc.jwt import ClaimsOption

__all__ = [
    "CLAIM_FAULTS",
    "DEFAULT_ALGORITHMS",
    "Audience",
    "JWTRules",
    "audiences",
    "looks_like_jwt",
    "scopes_of",
]

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

#: The longest ``kid`` header looked up.
MAX_KID = 256
Audience = str | Sequence[str] | None


def audiences(audience: Audience) -> tuple[str, ...]:
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


class JWTRules:
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
        self.audience = audiences(audience)
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
        if kid is not None and (not isinstance(kid, str) or len(kid) > MAX_KID):
            raise TokenRejected(f"The token's kid is not a string of at most {MAX_KID} characters")
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
                CLAIM_FAULTS.get(error.claim, f"The token's {error.claim} claim is not valid")
            ) from None


CLAIM_FAULTS = {
    "nbf": "The token is not valid yet (nbf)",
    "iat": "The token was issued in the future (iat)",
    "iss": "The token's issuer (iss) is not accepted",
    "aud": "The token is not meant for this agent (aud)",
    "exp": "The token's expiry (exp) is not a date",
}
