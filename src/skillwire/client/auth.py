"""Credentials keyed by the security scheme names of the agent card.

An agent card names its security schemes (``securitySchemes``) and says which ones a call needs
(``securityRequirements``). The caller gives one secret per scheme name; the card decides where it goes::

    client = await Client.connect(url, credentials={"apiKey": "s3cret", "oidc": fetch_token})

    # or, for secrets that come from elsewhere:
    class Vault:
        async def secret(self, scheme_name: str, scheme: dict[str, Any]) -> str | None: ...

    client = await Client.connect(url, credentials=Vault())

A secret is a string, or a callable (sync or async) returning one; it is asked for on every request, so a
callable can hand out a fresh token each time. Where each secret goes, by the scheme's kind:

=============================== ===============================================================
``apiKeySecurityScheme``        the header, query parameter or cookie ``name`` (``location``)
``httpAuthSecurityScheme``      ``Authorization: <scheme> <secret>``; for ``basic`` the secret is
                                ``user:password`` and is base64-encoded here
``oauth2SecurityScheme``,       ``Authorization: Bearer <token>``: getting the token (a flow, a
``openIdConnectSecurityScheme`` refresh) is the caller's, through a callable secret
``mtlsSecurityScheme``          nothing: give the httpx client (``http=``) its certificate instead
=============================== ===============================================================

Which schemes: ``securityRequirements`` is a list of alternatives, each a set of schemes that must all be
presented. The first alternative whose schemes all have a secret is used. With no requirement on the card,
or none that the secrets can meet, every scheme that has a secret is presented (a skill may require a scheme
the card-level requirements do not list); the agent then answers 401 or 403 if that is not enough. A scheme
name the card does not declare is never sent anywhere.
"""

from __future__ import annotations

import base64
import inspect
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Mapping
from typing import Any, Protocol, runtime_checkable

import httpx

from skillwire.protocol import models as m

__all__ = [
    "CardAuth",
    "Credentials",
    "CredentialsProvider",
    "Secret",
    "as_provider",
    "credential_headers",
]

#: A secret: the value itself, or a callable (sync or async) that returns it when a request is made.
Secret = str | Callable[[], str | Awaitable[str]]


@runtime_checkable
class CredentialsProvider(Protocol):
    """Hands out the secret for one of the card's security schemes, or None when it has none."""

    async def secret(self, scheme_name: str, scheme: dict[str, Any]) -> str | None: ...


class Credentials:
    """A :class:`CredentialsProvider` over a mapping of scheme name to :data:`Secret`."""

    def __init__(self, secrets: Mapping[str, Secret] | None = None, /, **named: Secret) -> None:
        self._secrets: dict[str, Secret] = {**(secrets or {}), **named}

    def __contains__(self, scheme_name: object) -> bool:
        return scheme_name in self._secrets

    def __repr__(self) -> str:  # never the secrets themselves
        return f"Credentials({sorted(self._secrets)})"

    async def secret(self, scheme_name: str, scheme: dict[str, Any]) -> str | None:
        value = self._secrets.get(scheme_name)
        if value is None or isinstance(value, str):
            return value
        produced = value()
        if inspect.isawaitable(produced):
            produced = await produced
        return str(produced)


def as_provider(credentials: CredentialsProvider | Mapping[str, Secret]) -> CredentialsProvider:
    """``credentials`` as a provider: a mapping becomes :class:`Credentials`."""
    if isinstance(credentials, CredentialsProvider):
        return credentials
    return Credentials(credentials)


def _kind(scheme: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The oneof member of a v1.0 SecurityScheme and its body (``("", {})`` when unreadable)."""
    for key, body in scheme.items():
        if key.endswith("SecurityScheme") and isinstance(body, dict):
            return key, body
    return "", {}


class _Placement:
    """Where one scheme's secret goes."""

    def __init__(self, name: str, scheme: dict[str, Any]) -> None:
        self.name = name
        self.scheme = scheme
        kind, body = _kind(scheme)
        self.location = "header"
        self.key = "Authorization"
        self.prefix = "Bearer "
        self.basic = False
        if kind == "apiKeySecurityScheme":
            self.location = str(body.get("location") or "header").lower()
            self.key = str(body.get("name") or "")
            self.prefix = ""
        elif kind == "httpAuthSecurityScheme":
            word = str(body.get("scheme") or "bearer")
            self.basic = word.lower() == "basic"
            # scheme names are case-insensitive (RFC 9110 §11.1); write the two common ones canonically
            self.prefix = {"basic": "Basic ", "bearer": "Bearer "}.get(word.lower(), f"{word} ")
        elif kind not in ("oauth2SecurityScheme", "openIdConnectSecurityScheme"):
            self.location = ""  # mTLS, or a kind this client does not know: nothing to send

    @property
    def usable(self) -> bool:
        return bool(self.location and self.key)

    def value(self, secret: str) -> str:
        if self.basic:
            secret = base64.b64encode(secret.encode()).decode("ascii")
        return self.prefix + secret


def _chosen(card: m.AgentCard, available: Callable[[str], bool]) -> list[_Placement]:
    placements = {
        name: _Placement(name, scheme)
        for name, scheme in card.security_schemes.items()
        if isinstance(scheme, dict)
    }
    for requirement in card.security_requirements:
        names = list(requirement.schemes)
        if names and all(n in placements and available(n) for n in names):
            return [placements[n] for n in names if placements[n].usable]
    return [p for p in placements.values() if p.usable and available(p.name)]


def _known(provider: CredentialsProvider) -> Callable[[str], bool]:
    """Whether ``provider`` may have a secret for a name: exact for Credentials, optimistic otherwise."""
    if isinstance(provider, Credentials):
        return provider.__contains__
    return lambda name: True


class CardAuth(httpx.Auth):
    """An httpx auth flow that puts the provider's secrets where ``card`` says, on every request."""

    def __init__(self, card: m.AgentCard, provider: CredentialsProvider) -> None:
        self.provider = provider
        self.placements = _chosen(card, _known(provider))

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        raise RuntimeError("CardAuth works with httpx.AsyncClient only")

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        cookies: list[str] = []
        for placement in self.placements:
            secret = await self.provider.secret(placement.name, placement.scheme)
            if secret is None:
                continue
            value = placement.value(secret)
            if placement.location == "header":
                request.headers[placement.key] = value
            elif placement.location == "query":
                request.url = request.url.copy_set_param(placement.key, value)
            elif placement.location == "cookie":
                cookies.append(f"{placement.key}={value}")
        if cookies:
            existing = request.headers.get("Cookie")
            request.headers["Cookie"] = "; ".join([existing, *cookies] if existing else cookies)
        yield request


async def credential_headers(card: m.AgentCard, provider: CredentialsProvider) -> dict[str, str]:
    """The secrets as headers, asked for once: for transports without per-request auth (gRPC metadata).
    Query-located API keys have no place there and are left out; cookies become a ``Cookie`` header."""
    headers: dict[str, str] = {}
    cookies: list[str] = []
    for placement in _chosen(card, _known(provider)):
        secret = await provider.secret(placement.name, placement.scheme)
        if secret is None:
            continue
        if placement.location == "header":
            headers[placement.key] = placement.value(secret)
        elif placement.location == "cookie":
            cookies.append(f"{placement.key}={placement.value(secret)}")
    if cookies:
        headers["Cookie"] = "; ".join(cookies)
    return headers
