"""Who is calling: the :class:`Principal` a request authenticated as, on every binding."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["ANONYMOUS", "Principal"]


class Principal(msgspec.Struct, frozen=True):
    """The authenticated caller: ``ctx.principal`` in a skill, ``call.principal`` in a request handler.

    ``subject`` is the caller's name in the scheme that authenticated it (an API key's principal, a JWT's
    ``sub``, a user name, a client certificate's subject); ``scheme`` is that scheme's name on the card;
    ``scopes`` what the credentials grant (a token's ``scope``/``scp``, an API key's configured scopes);
    ``claims`` the verified token claims (empty for schemes without any). ``granted`` has every scheme the
    request satisfied, with its scopes, for requirements that need two schemes at once."""

    subject: str = "anonymous"
    scheme: str = ""
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = msgspec.field(default_factory=dict)
    granted: Mapping[str, frozenset[str]] = msgspec.field(default_factory=dict)
    #: The bearer token the request presented (the token schemes only; ``""`` otherwise), so that a skill
    #: can call another service as its caller (``Authorization: Bearer {ctx.principal.credential}``). It is
    #: never stored (a task taken back after a restart has none) and never shown by ``repr``.
    credential: str = ""

    def __repr__(self) -> str:
        hidden = ", credential=<hidden>" if self.credential else ""
        return f"Principal(subject={self.subject!r}, scheme={self.scheme!r}, scopes={set(self.scopes)!r}{hidden})"

    @property
    def authenticated(self) -> bool:
        return bool(self.scheme)

    @property
    def owner(self) -> str:
        """The key tasks are owned by: the scheme and the subject (``""`` when anonymous), so that a name in
        one scheme is never taken for the same name in another (an API key's ``alice`` and a token's)."""
        return f"{self.scheme}:{self.subject}" if self.scheme else ""

    @classmethod
    def from_owner(cls, owner: str) -> Principal:
        """The principal an :attr:`owner` key stands for (subject and scheme only: scopes and claims are not
        part of it); anonymous for ``""``."""
        if not owner:
            return ANONYMOUS
        scheme, _, subject = owner.partition(":")
        return cls(subject=subject, scheme=scheme, granted={scheme: frozenset()})

    def has_scopes(self, scopes: frozenset[str] | set[str] | list[str] | tuple[str, ...]) -> bool:
        return all(scope in self.scopes for scope in scopes)


ANONYMOUS = Principal()
