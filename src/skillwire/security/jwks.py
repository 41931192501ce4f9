"""Signing keys for the token schemes: keys given in code, and a JWKS fetched from the identity provider
(directly, or through its discovery document), cached and refreshed within bounds.

The rules for a fetched key set (:class:`KeyCache` holds the numbers):

- it is kept for the ``Cache-Control: max-age`` the IdP sends, bounded to ``[min_ttl, max_ttl]``
  (``default_ttl`` without one), then fetched again;
- a token whose ``kid`` is not in the set makes it fetched again (a key rotation), but at most once per
  ``refresh_interval`` whatever the cause, so a flood of made-up ``kid`` values cannot make us hammer the IdP;
- concurrent reasons to fetch share one fetch;
- a fetch that fails (times out, answers an error, is larger than ``max_bytes`` or compressed, is not a key
  set) changes nothing: the keys fetched before keep verifying while the IdP is down. A token no key we hold can verify
  while the last fetch failed is answered "try again" (:class:`IdPUnavailable`), not "your token is bad".

joserfc and httpx are imported on first use, never by ``import skillwire``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import httpx
    from joserfc.jwk import Key

__all__ = ["KeyCache"]

log = logging.getLogger("skillwire.security")

Clock = Callable[[], float]

#: Each JWS algorithm a token may name: the key type it needs, and the curve for those that fix one.
ALGORITHMS: dict[str, tuple[str, str | None]] = {
    **{f"HS{n}": ("oct", None) for n in (256, 384, 512)},
    **{f"RS{n}": ("RSA", None) for n in (256, 384, 512)},
    **{f"PS{n}": ("RSA", None) for n in (256, 384, 512)},
    "ES256": ("EC", "P-256"),
    "ES384": ("EC", "P-384"),
    "ES512": ("EC", "P-521"),
    "ES256K": ("EC", "secp256k1"),
    "EdDSA": ("OKP", None),
    "Ed25519": ("OKP", "Ed25519"),
    "Ed448": ("OKP", "Ed448"),
}


class TokenRejected(Exception):
    """The credentials are there and wrong (the scheme answers 401 with this reason)."""


class IdPUnavailable(Exception):
    """What the answer depends on cannot be had from the IdP right now (the scheme answers 503)."""

    def __init__(self, why: str, retry_after: float) -> None:
        super().__init__(why)
        self.retry_after = max(1, math.ceil(retry_after))


class FetchError(Exception):
    """A document could not be fetched or is not what it should be (logged, never shown to a caller)."""


@dataclass(frozen=True, kw_only=True)
class KeyCache:
    """How a token scheme fetches and keeps its IdP's documents (JWKS, discovery, introspection answers).

    ``timeout`` bounds each fetch as a whole (seconds), ``max_bytes`` each answer's size; a key set is kept
    for the IdP's ``max-age`` within ``[min_ttl, max_ttl]`` (``default_ttl`` without one); fetches happen at
    most once per ``refresh_interval``, whatever asks for them::

        Bearer(jwks_url=..., issuer=..., audience=..., cache=KeyCache(refresh_interval=60))
    """

    timeout: float = 5.0
    max_bytes: int = 256 * 1024
    refresh_interval: float = 30.0
    min_ttl: float = 60.0
    max_ttl: float = 24 * 3600.0
    default_ttl: float = 300.0

    def __post_init__(self) -> None:
        if self.timeout <= 0 or self.max_bytes <= 0 or self.refresh_interval < 0:
            raise ValueError(
                "KeyCache: timeout and max_bytes must be positive, refresh_interval not negative"
            )
        if not 0 < self.min_ttl <= self.default_ttl <= self.max_ttl:
            raise ValueError("KeyCache: needs 0 < min_ttl <= default_ttl <= max_ttl")

    def ttl(self, cache_control: str | None) -> float:
        """How long to keep a document answered with this ``Cache-Control``."""
        directives = (cache_control or "").lower()
        if "no-store" in directives or "no-cache" in directives:
            return self.min_ttl
        found = re.search(r"(?:^|[,\s])max-age\s*=\s*\"?(\d{1,10})", directives)
        seconds = float(found.group(1)) if found else self.default_ttl
        return min(self.max_ttl, max(self.min_ttl, seconds))


# -- fetching documents ------------------------------------------------------------------------------------


#: Asked for uncompressed answers, so that ``max_bytes`` bounds what is held, not what a small compressed
#: answer inflates to.
_HEADERS = {"accept": "application/json", "accept-encoding": "identity"}


class Documents:
    """JSON documents from the IdP over HTTP, each fetch bounded in time and size. Uses ``http`` when given
    (and leaves it open), else an httpx client of its own made on first use and closed by :meth:`close`."""

    def __init__(self, cache: KeyCache, http: httpx.AsyncClient | None = None) -> None:
        self.cache = cache
        self._given = http
        self._own: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._given is not None:
            return self._given
        if self._own is None:
            import httpx

            self._own = httpx.AsyncClient(follow_redirects=False)
        return self._own

    async def close(self) -> None:
        own, self._own = self._own, None
        if own is not None:
            await own.aclose()

    async def get(self, url: str) -> tuple[dict[str, Any], float]:
        """The JSON object at ``url`` and how long to keep it; raises FetchError."""
        return await self._fetch("GET", url)

    async def post_form(
        self, url: str, form: Mapping[str, str], auth: tuple[str, str] | None
    ) -> dict[str, Any]:
        return (await self._fetch("POST", url, form=form, auth=auth))[0]

    async def _fetch(
        self,
        method: str,
        url: str,
        *,
        form: Mapping[str, str] | None = None,
        auth: tuple[str, str] | None = None,
    ) -> tuple[dict[str, Any], float]:
        import httpx

        try:
            # One deadline for the whole exchange: httpx's timeouts are per read, which a server dripping
            # a byte at a time would never trip.
            async with asyncio.timeout(self.cache.timeout):
                request = self.client().stream(
                    method, url, data=form, auth=auth, headers=_HEADERS, timeout=self.cache.timeout
                )
                async with request as response:
                    if response.status_code != 200:
                        raise FetchError(f"{method} {url}: HTTP {response.status_code}")
                    body = await self._read(response)
        except TimeoutError:
            raise FetchError(f"{method} {url}: no answer within {self.cache.timeout:g} s") from None
        except httpx.HTTPError as error:
            raise FetchError(f"{method} {url}: {type(error).__name__}: {error}") from None
        try:
            document = json.loads(body)
        except (ValueError, RecursionError):
            raise FetchError(f"{method} {url}: the answer is not JSON") from None
        if not isinstance(document, dict):
            raise FetchError(f"{method} {url}: the answer is not a JSON object")
        return document, self.cache.ttl(response.headers.get("cache-control"))

    async def _read(self, response: httpx.Response) -> bytes:
        """The body, within ``max_bytes`` counted as it arrives; a compressed one is refused before any of it
        is decoded (httpx would inflate a whole network read at once, before the budget could count it)."""
        limit = self.cache.max_bytes
        encoding = response.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            raise FetchError(
                f"{response.request.url}: the answer is compressed ({encoding[:40]}), not asked for"
            )
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise FetchError(f"{response.request.url}: the answer is larger than {limit} bytes")
        body = bytearray()
        async for chunk in response.aiter_raw():
            body += chunk
            if len(body) > limit:
                raise FetchError(f"{response.request.url}: the answer is larger than {limit} bytes")
        return bytes(body)


# -- keys ----------------------------------------------------------------------------------------------------


class Keys(Protocol):
    """Where a scheme's verification keys come from."""

    async def find(self, kid: str | None, alg: str) -> Key:
        """The key to verify a token with this ``kid`` header and ``alg``; raises TokenRejected or
        IdPUnavailable."""
        ...

    @property
    def issuer(self) -> str | None:
        """The issuer the keys speak for, when it is learnt from the IdP (a discovery document's)."""
        ...

    async def close(self) -> None: ...


def fits(key: Key, alg: str) -> bool:
    """Whether ``key`` may verify ``alg``: its type (so an RSA public key is never an HMAC secret), its
    curve, and the ``alg`` and ``use`` it declares."""
    kty, curve = ALGORITHMS[alg]
    if key.key_type != kty or key.get("use") not in (None, "sig") or key.alg not in (None, alg):
        return False
    return curve is None or getattr(key, "curve_name", None) == curve


def select(keys: Iterable[Key], kid: str | None, alg: str) -> Key | None:
    """The key for a token: the one named by its ``kid``; without a match, the only key fitting ``alg`` that
    names no kid (or, for a token naming none, the only key fitting at all). None when there is none."""
    fitting = [key for key in keys if fits(key, alg)]
    if kid is not None:
        named = [key for key in fitting if key.kid == kid]
        if named:
            return named[0]
        fitting = [key for key in fitting if key.kid is None]
    if len(fitting) > 1:
        raise TokenRejected("The token names no key (kid) and more than one key could verify it")
    return fitting[0] if fitting else None


def import_keys(value: Any) -> list[Key]:
    """Keys given in code: a JWK or JWKS dict, PEM text, a joserfc key or KeySet, or a list of these."""
    from joserfc.errors import JoseError
    from joserfc.jwk import Key, KeySet, import_key

    if isinstance(value, (list, tuple)):
        return [key for item in value for key in import_keys(item)]
    if isinstance(value, KeySet):
        return list(value)
    if isinstance(value, Key):
        return [value]
    if isinstance(value, Mapping):
        if "keys" in value:
            return [import_key(dict(item)) for item in value["keys"]]
        return [import_key(dict(value))]
    if isinstance(value, (str, bytes)):
        text = value.encode() if isinstance(value, str) else value
        if b"-----BEGIN" not in text:
            raise ValueError(
                "keys: text must be a PEM public key or certificate; give a shared secret as "
                "joserfc.jwk.OctKey.import_key(secret) (and allow an HS* algorithm)"
            )
        for kty in ("RSA", "EC", "OKP"):
            try:
                return [import_key(text, kty)]
            except (JoseError, ValueError, TypeError) as error:
                last: Exception = error
        raise ValueError(f"keys: the PEM text is not an RSA, EC or OKP key ({last})")
    raise TypeError(
        f"keys: expected a JWK or JWKS dict, PEM text or a joserfc key, not {type(value).__name__}"
    )


def published_keys(document: Mapping[str, Any]) -> list[Key]:
    """The signature keys of a fetched JWKS. Symmetric keys are never taken from one (a published secret is
    no secret), nor keys for encryption; keys of a type joserfc does not know are skipped (RFC 7517, 5)."""
    from joserfc.errors import JoseError
    from joserfc.jwk import import_key

    entries = document.get("keys")
    if not isinstance(entries, list):
        raise FetchError("the JWKS has no keys array")
    keys = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") == "oct" or entry.get("use") not in (None, "sig"):
            continue
        try:
            keys.append(import_key(entry))
        except (JoseError, ValueError, TypeError):
            continue
    return keys


class StaticKeys:
    """Keys given in code."""

    def __init__(self, value: Any) -> None:
        self.keys = import_keys(value)
        if not self.keys:
            raise ValueError("keys: no key given")

    async def find(self, kid: str | None, alg: str) -> Key:
        key = select(self.keys, kid, alg)
        if key is None:
            raise TokenRejected(_no_key(kid, alg))
        return key

    @property
    def issuer(self) -> str | None:
        return None

    async def close(self) -> None:
        return None


def _no_key(kid: str | None, alg: str) -> str:
    return f"No key {kid[:64]!r} verifies {alg} tokens" if kid else f"No key verifies {alg} tokens"


# -- where a JWKS is: a URL, or a discovery document ---------------------------------------------------------


class Locator(Protocol):
    async def jwks_uri(self, documents: Documents, now: float) -> str: ...

    @property
    def issuer(self) -> str | None: ...


class FixedURL:
    def __init__(self, url: str) -> None:
        self.url = url
        self.issuer: str | None = None

    async def jwks_uri(self, documents: Documents, now: float) -> str:
        return self.url


class Discovery:
    """An OpenID Connect discovery document or an RFC 8414 authorization server metadata document: its
    ``jwks_uri`` and ``issuer``, fetched again once it is older than its time to live. The document's issuer
    must be the one configured, when one is (OpenID Connect Discovery 4.3, RFC 8414 3.3)."""

    def __init__(self, url: str, expected_issuer: str | None) -> None:
        self.url = url
        self.expected = expected_issuer
        self.document: dict[str, Any] | None = None
        self._expires = -math.inf

    @property
    def issuer(self) -> str | None:
        return self.expected or self.get("issuer")

    def get(self, field: str) -> str | None:
        value = (self.document or {}).get(field)
        return value if isinstance(value, str) else None

    async def load(self, documents: Documents, now: float) -> None:
        if self.document is not None and now < self._expires:
            return
        try:
            document, ttl = await documents.get(self.url)
        except FetchError:
            if self.document is None:
                raise
            return  # the document fetched before still says where the keys are
        issuer = document.get("issuer")
        if not isinstance(issuer, str) or not issuer:
            raise FetchError(f"{self.url}: the document names no issuer")
        if self.expected is not None and issuer != self.expected:
            raise FetchError(f"{self.url}: the document's issuer {issuer!r} is not {self.expected!r}")
        uri = document.get("jwks_uri")
        if not isinstance(uri, str) or not uri.startswith(("https://", "http://")):
            raise FetchError(f"{self.url}: the document has no http(s) jwks_uri")
        self.document, self._expires = document, now + ttl

    async def jwks_uri(self, documents: Documents, now: float) -> str:
        await self.load(documents, now)
        uri = self.get("jwks_uri")
        assert uri is not None  # load() checked it
        return uri


class RemoteKeys:
    """A JWKS fetched from the IdP, under the rules in the module's docstring."""

    def __init__(self, where: Locator, documents: Documents, clock: Clock) -> None:
        self.where = where
        self.documents = documents
        self.cache = documents.cache
        self.clock = clock
        #: How many fetches were started (for tests and metrics).
        self.fetches = 0
        self._keys: list[Key] | None = None
        self._expires = -math.inf
        self._last_attempt = -math.inf
        self._failing = False
        self._inflight: asyncio.Task[None] | None = None

    async def find(self, kid: str | None, alg: str) -> Key:
        now = self.clock()
        if self._keys is None or now >= self._expires:
            await self.refresh(now)
        key = select(self._keys or (), kid, alg)
        if key is None and self._keys is not None:
            await self.refresh(now)  # a key rotation, or a made-up kid: rate-limited either way
            key = select(self._keys, kid, alg)
        if key is not None:
            return key
        if self._keys is None or self._failing:
            wait = self._last_attempt + self.cache.refresh_interval - self.clock()
            raise IdPUnavailable("The signing keys cannot be fetched from the identity provider", wait)
        raise TokenRejected(_no_key(kid, alg))

    @property
    def issuer(self) -> str | None:
        return self.where.issuer

    @property
    def held(self) -> tuple[Key, ...]:
        """The keys fetched last (empty before the first fetch)."""
        return tuple(self._keys or ())

    async def refresh(self, now: float) -> None:
        """Fetch the key set again unless one was tried within ``refresh_interval``; join a fetch under way."""
        if self._inflight is None:
            if now - self._last_attempt < self.cache.refresh_interval:
                return
            self._last_attempt = now
            self.fetches += 1
            self._inflight = asyncio.ensure_future(self._load())
        # shield: a caller that goes away (its request cancelled) does not cancel the others' fetch
        await asyncio.shield(self._inflight)

    async def _load(self) -> None:
        try:
            url = await self.where.jwks_uri(self.documents, self.clock())
            document, ttl = await self.documents.get(url)
            self._keys = published_keys(document)
            self._expires = self.clock() + ttl
            self._failing = False
        except FetchError as error:
            self._failing = True
            log.warning("Fetching signing keys failed (the keys fetched before stay in use): %s", error)
        finally:
            self._inflight = None

    async def close(self) -> None:
        task = self._inflight
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self.documents.close()
