"""Trusting an agent card by its signatures: ``Client.connect(url, card_keys=...)``.

``card_keys`` are the keys the client trusts: a JWKS (``{"keys": [...]}``), a joserfc KeySet, or the URL of a
JWKS, fetched when first needed (and once more when a card fails with the keys fetched before, so that a key
the agent rotated in is found). The public card, the card :meth:`Client.refresh_card` reads and the extended
card must carry at least one signature that verifies (:func:`skillwire.wire.card_signing.verify_card`), or
the call raises :class:`~skillwire.errors.CardSignatureError`.

The card is verified as the v1.0 card it was signed as: its JSON is decoded as a v1.0 AgentCard, so the v0.3
members an agent may write beside it (``url``, ``additionalInterfaces``, the v0.3 members of each security
scheme, ...) are not signed and are not used: the client connects only through the interfaces the signed
card lists, and authenticates as its v1.0 security schemes say. A signature's ``jku`` is not
followed: the agent cannot name the keys it is checked with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import httpx
import msgspec

from skillwire.client.bodies import IDENTITY, read_body
from skillwire.client.errors import AgentConnectionError, HTTPStatusError, InvalidResponseError
from skillwire.errors import CardSignatureError
from skillwire.protocol.models import AgentCard
from skillwire.wire.card_signing import load_key_set, signed_part, verify_card

if TYPE_CHECKING:
    from joserfc.jwk import KeySet

__all__ = ["CardKeys", "CardTrust"]

#: The most bytes read of a key set (a few keys are a few KiB).
_MAX_KEY_SET = 1024 * 1024

#: The keys a client trusts: a JWKS dict, a joserfc KeySet, or the URL of a JWKS (a string alias: joserfc is
#: not imported until a card is checked).
CardKeys: TypeAlias = "Mapping[str, Any] | KeySet | str"


class CardTrust:
    """Verifies cards against ``keys`` (see the module); ``http`` fetches a JWKS given by URL."""

    def __init__(self, keys: CardKeys, http: httpx.AsyncClient, timeout: httpx.Timeout) -> None:
        self._url = keys if isinstance(keys, str) else None
        # keys given as such are checked at once (ValueError): a JWKS that is not one is the caller's mistake
        self._keys: KeySet | None = None if isinstance(keys, str) else load_key_set(keys)
        self._http = http
        self._timeout = timeout

    async def verified(self, content: bytes, url: str) -> AgentCard:
        """The v1.0 card in ``content`` (the JSON served at ``url``), once a signature of it verifies."""
        try:
            card = msgspec.json.decode(content, type=AgentCard)
        except msgspec.DecodeError as exc:
            raise InvalidResponseError(f"{url} is not an A2A v1.0 agent card: {exc}") from None
        return await self.check(card)

    async def check(self, card: AgentCard) -> AgentCard:
        """``card`` as its signatures cover it (:func:`~skillwire.wire.card_signing.signed_part`), once one of
        them verifies; CardSignatureError if none does."""
        fresh = self._keys is None
        keys = self._keys if self._keys is not None else await self._fetch()
        try:
            verify_card(card, keys)
        except CardSignatureError:
            if fresh or self._url is None or not card.signatures:
                raise
            verify_card(card, await self._fetch())  # the agent may have rotated in a key fetched anew
        return signed_part(card)

    async def _fetch(self) -> KeySet:
        assert self._url is not None
        try:
            request = self._http.build_request("GET", self._url, headers=IDENTITY, timeout=self._timeout)
            response = await self._http.send(request, stream=True)
            try:
                content = await read_body(response, _MAX_KEY_SET) if response.status_code == 200 else b""
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            raise AgentConnectionError.of(exc) from exc
        if response.status_code != 200:
            raise HTTPStatusError(response.status_code, f"GET {self._url} (the card keys)")
        try:
            jwks = msgspec.json.decode(content)
        except msgspec.DecodeError as exc:
            raise InvalidResponseError(f"{self._url} is not a JWKS: {exc}") from None
        try:
            self._keys = load_key_set(jwks)
        except ValueError as exc:
            raise InvalidResponseError(f"{self._url}: {exc}") from None
        return self._keys
