"""RFC 7662 token introspection: how :class:`~skillwire.security.OAuth2` verifies opaque access tokens."""

from __future__ import annotations

import hashlib
import math
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote_plus

from skillwire.security.claims import CLAIM_FAULTS, Audience, audiences
from skillwire.security.jwks import Clock, Documents, FetchError, IdPUnavailable, KeyCache, TokenRejected, log

if TYPE_CHECKING:
    import httpx

__all__ = ["Introspection"]


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
        self.audience = audiences(audience)
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
        if claims.get("exp") is not None:
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
            if value is not None and not _is_date(value):
                raise TokenRejected("The introspection answer's exp or nbf is not a date")
        if exp is not None and exp <= now - self.leeway:
            raise TokenRejected("The token has expired")
        if nbf is not None and nbf > now + self.leeway:
            raise TokenRejected("The token is not valid yet (nbf)")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise TokenRejected(CLAIM_FAULTS["iss"])
        if self.audience:
            aud = claims.get("aud")
            named = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if not any(isinstance(a, str) and a in self.audience for a in named):
                raise TokenRejected(CLAIM_FAULTS["aud"])


def _is_date(value: object) -> bool:
    """A NumericDate: a finite number (JSON allows no NaN, but Python's parser reads one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
